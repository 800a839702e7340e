"""python/plot_peel.py draws the PEEL figures from the CSV the presets write."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CSV = """figure,{x},scheme,jobs,mean_ms,p99_ms,packets_per_message,switch_gb,retransmitted,repairs
peel-figN,{a},peel,10,1.5,2.0,3.0,1.0,0,0
peel-figN,{a},ring,10,2.5,3.0,0.0,1.0,0,0
peel-figN,{b},peel,10,4.5,6.0,3.0,1.0,0,0
peel-figN,{b},ring,10,9.5,12.0,0.0,1.0,0,0
"""


def run_plot(tmp_path, x, a, b):
    csv = tmp_path / "f.csv"
    png = tmp_path / "f.png"
    csv.write_text(CSV.format(x=x, a=a, b=b))
    r = subprocess.run(
        [sys.executable, str(REPO / "python" / "plot_peel.py"), str(csv), str(png), "t"],
        capture_output=True,
        text=True,
    )
    return r, png


def test_each_figure_axis_plots(tmp_path):
    for x, a, b in [("size", 2097152, 8388608), ("gpus", 32, 64), ("failed", 0.01, 0.1)]:
        r, png = run_plot(tmp_path, x, a, b)
        assert r.returncode == 0, r.stderr
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paper_points_are_overlaid_when_present(tmp_path):
    """A sibling f-paper.csv adds the paper's crosses; a broken one is an error, not ignored."""
    (tmp_path / "f-paper.csv").write_text(
        "x,scheme,stat,paper_ms,relative_to\n2097152,peel,mean_ms,0.55,optimal\n2097152,orca,p99_ms,90.0,peel\n"
    )
    r, png = run_plot(tmp_path, "size", 2097152, 8388608)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "f-paper.csv").write_text("x,scheme\n1,peel\n")
    r, _ = run_plot(tmp_path, "size", 2097152, 8388608)
    assert r.returncode != 0
    assert "stat" in r.stderr


def test_bad_arguments_are_a_usage_error(tmp_path):
    r = subprocess.run(
        [sys.executable, str(REPO / "python" / "plot_peel.py")], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "Usage" in r.stderr


RATE_CSV = """ms,policy,gbps,u0_gbps,u1_gbps,queue_kb,pauses
0.1,tmcf,39.0,0.0,0.0,0.0,0
0.2,tmcf,20.0,20.0,0.0,150.0,0
0.3,tmcf,20.0,0.0,20.0,120.0,1
0.1,forward-all,39.0,0.0,0.0,0.0,0
0.2,forward-all,9.0,30.0,0.0,300.0,2
0.3,forward-all,9.0,0.0,30.0,250.0,2
"""


def plot(tmp_path, script):
    csv = tmp_path / "r.csv"
    png = tmp_path / "r.png"
    csv.write_text(RATE_CSV)
    r = subprocess.run(
        [sys.executable, str(REPO / "python" / script), str(csv), str(png), "t"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rate_plot(tmp_path):
    """The TMCF presets' CSV: rate and queue panels per policy."""
    plot(tmp_path, "plot_rate.py")


def test_fairness_plot(tmp_path):
    """The same CSV as cepheus-fairness writes it: a panel per policy."""
    plot(tmp_path, "plot_fairness.py")


FIG1_CSV = """figure,gpus,servers,leaves,optimal_core_links,ring_core_links,tree_core_links,nccl_tree_core_links,ring_over_optimal,tree_over_optimal,nccl_tree_over_optimal
peel-fig1,16,2,1,0,0,0,0,0.0,0.0,0.0
peel-fig1,128,16,8,8,14,28,22,1.75,3.5,2.75
peel-fig1,256,32,16,16,30,60,46,1.875,3.75,2.875
"""

FIG3_CSV = """figure,k,hosts,group_fraction,members,tree_ports,fpr,header_bytes,header_over_mtu,false_positive_copies,overhead
peel-fig3,8,128,1,128,167,0.2,70,0.05,0.14,0.19
peel-fig3,16,1024,1,1024,1167,0.2,489,0.33,0.17,0.5
peel-fig3,32,8192,1,8192,8735,0.2,3658,2.44,0.19,2.63
"""


def test_static_figures_plot_and_unknown_csvs_fail(tmp_path):
    """plot_peel_static.py draws Fig 1 and Fig 3 and refuses a CSV of neither."""
    script = str(REPO / "python" / "plot_peel_static.py")
    for name, text in [("f1", FIG1_CSV), ("f3", FIG3_CSV), ("bad", "a,b\n1,2\n")]:
        csv = tmp_path / f"{name}.csv"
        png = tmp_path / f"{name}.png"
        csv.write_text(text)
        r = subprocess.run([sys.executable, script, str(csv), str(png), "t"], capture_output=True, text=True)
        if name == "bad":
            assert r.returncode != 0
            assert "neither" in r.stderr
        else:
            assert r.returncode == 0, r.stderr
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
