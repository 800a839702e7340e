"""python/plot.py draws the figures (rocast.plot) from the CSVs the presets write: PEEL's,
TMCF's and Cepheus Fig. 14's, with the tables the experiments write beside them."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLOT = str(REPO / "python" / "plot.py")

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
        [sys.executable, PLOT, "peel", str(csv), str(png), "t"],
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
        [sys.executable, PLOT, "peel"], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "FIGURE DATA.csv" in r.stderr
    r = subprocess.run(
        [sys.executable, PLOT, "no_such_figure", "a.csv", "b.png", "t"], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "no figure" in r.stderr


RATE_CSV = """ms,policy,gbps,u0_gbps,u1_gbps,queue_kb,pauses
0.1,tmcf,39.0,0.0,0.0,0.0,0
0.2,tmcf,20.0,20.0,0.0,150.0,0
0.3,tmcf,20.0,0.0,20.0,120.0,1
0.1,forward-all,39.0,0.0,0.0,0.0,0
0.2,forward-all,9.0,30.0,0.0,300.0,2
0.3,forward-all,9.0,0.0,30.0,250.0,2
"""


PHASES_CSV = """policy,phase_start_ms,phase_end_ms,congested,bottleneck,gbps,fair_gbps,rate_over_fair,jain,converge_ms,queue_avg_kb,queue_max_kb,pfc_pauses
tmcf,0.0,0.15,0,,39.0,40.0,0.97,,0.1,0,0,0
tmcf,0.15,0.3,1,2,20.0,20.0,1.0,1.0,0.1,100,150,0
forward-all,0.0,0.15,0,,39.0,40.0,0.97,,0.1,0,0,0
forward-all,0.15,0.3,1,2,9.0,20.0,0.45,0.8,0.1,100,150,0
"""


def plot(tmp_path, figure, phases=False):
    csv = tmp_path / "r.csv"
    png = tmp_path / "r.png"
    csv.write_text(RATE_CSV)
    if phases:
        (tmp_path / "r-phases.csv").write_text(PHASES_CSV)
    r = subprocess.run(
        [sys.executable, PLOT, figure, str(csv), str(png), "t"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = png.with_suffix(".svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    return svg


def test_the_same_data_gives_the_same_svg(tmp_path):
    first = plot(tmp_path, "tmcf_rate")
    assert plot(tmp_path, "tmcf_rate") == first


def test_rate_plot(tmp_path):
    """The TMCF presets' CSV: rate and queue panels per policy; the fair share dashed
    only when the phases table lies beside it."""
    assert "max-min fair share" not in plot(tmp_path, "tmcf_rate")
    assert "max-min fair share" in plot(tmp_path, "tmcf_rate", phases=True)


def test_fairness_plot(tmp_path):
    """The same CSV as cepheus-fairness writes it: a panel per policy."""
    plot(tmp_path, "cepheus_fig14")
    assert "fair share" in plot(tmp_path, "cepheus_fig14", phases=True)


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
    """peel_static draws Fig 1 and Fig 3 and refuses a CSV of neither."""
    for name, text in [("f1", FIG1_CSV), ("f3", FIG3_CSV), ("bad", "a,b\n1,2\n")]:
        csv = tmp_path / f"{name}.csv"
        png = tmp_path / f"{name}.png"
        csv.write_text(text)
        r = subprocess.run([sys.executable, PLOT, "peel_static", str(csv), str(png), "t"],
                           capture_output=True, text=True)
        if name == "bad":
            assert r.returncode != 0
            assert "neither" in r.stderr
        else:
            assert r.returncode == 0, r.stderr
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
