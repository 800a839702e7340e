"""python/plot.py ud_latency draws the ud-latency preset's CSV."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "python" / "plot.py"

CSV = """n,size,scheme,mean_us,p50_us,p99_us,max_us
4,64,ud-mcast,3.2,2.9,6.0,30.2
4,64,binomial-rc,6.2,5.8,10.5,38.9
4,64,ud-mcast-rx-tail,3.8,3.4,7.0,33.0
1024,64,ud-mcast,4.0,3.7,7.0,37.1
1024,64,binomial-rc,51.1,48.0,77.0,91.4
1024,64,ud-mcast-rx-tail,29.4,30.0,40.0,44.0
4,4096,ud-mcast,8.2,7.9,11.0,42.2
4,4096,binomial-rc,16.4,16.0,23.3,53.2
1024,4096,ud-mcast,12.4,12.1,15.8,45.6
1024,4096,binomial-rc,95.7,93.0,121.7,146.6
"""


def test_plots_one_panel_per_size(tmp_path):
    csv = tmp_path / "ud-latency.csv"
    png = tmp_path / "ud-latency.png"
    csv.write_text(CSV)
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "ud_latency", str(csv), str(png), "ud-latency"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_arguments_are_a_usage_error():
    r = subprocess.run([sys.executable, str(SCRIPT), "ud_latency"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "FIGURE DATA.csv" in r.stderr
