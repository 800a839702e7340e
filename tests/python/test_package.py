"""The Python package `rocast` (python/rocast/ + crates/py), as installed in the project's
.venv by scripts/install-python.sh: the simulator in-process against the `rocast sim`
command, overrides and errors, experiment tables, trees, plots, and sweeps on the local
and Dask backends (the same rows from both)."""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import rocast

REPO = Path(__file__).resolve().parents[2]
BIN = os.environ.get("ROCAST_BIN", str(REPO / "target" / "debug" / "rocast"))
# Timing columns differ run to run; everything else is deterministic.
WALL = ["wall_s", "setup_s", "events_per_s"]


def test_the_installed_wheel_answers_not_the_source_tree():
    assert "site-packages" in rocast.__file__, rocast.__file__
    assert rocast.version() == subprocess.run(
        [BIN, "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert rocast.__version__ == rocast.version()
    # Every public name is there.
    for name in rocast.__all__:
        assert getattr(rocast, name) is not None, name


def test_default_preset_matches_the_command_line(tmp_path):
    r = rocast.sim("default")
    assert r.kind == "flows" and r.seed == 1
    fct = r.fct
    assert len(fct) == 128 and not fct["failed"].any()
    assert (fct["fct_ns"] >= fct["standalone_ns"] * 0.999).all()
    assert (fct["slowdown"] >= 1).all()
    assert int(r.summary.loc[0, "flows.finished"]) == 128
    # `rocast sim` on the same preset: the same flows with the same FCTs (fct.txt has ns).
    out = tmp_path / "cli"
    subprocess.run([BIN, "sim", "--quiet", "--out", str(out)], check=True, capture_output=True)
    cli = pd.read_csv(out / "fct.txt", sep=" ", header=None,
                      names=["sip", "dip", "sport", "dport", "size", "start_ns", "fct_ns", "standalone_ns"])
    assert sorted(cli["fct_ns"]) == sorted(int(x) for x in fct["fct_ns"])
    assert sorted(cli["size"]) == sorted(fct["size_bytes"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["fct_us"]["p99"] == r.summary.loc[0, "fct_us.p99"]
    ports = pd.read_csv(out / "ports.csv")
    pd.testing.assert_frame_equal(ports, r.ports)
    # Samples are cumulative and end at the run's totals.
    s = r.samples
    assert len(s) >= 1 and s["events"].is_monotonic_increasing
    assert s["flows_finished"].iloc[-1] == 128 and s["flows_outstanding"].iloc[-1] == 0
    assert s["events"].iloc[-1] == summary["events"]


def test_same_seed_same_results_other_seed_other_results():
    a = rocast.sim("default", seed=7)
    b = rocast.sim("default", seed=7)
    c = rocast.sim("default", seed=8)
    pd.testing.assert_frame_equal(a.fct, b.fct)
    assert a.seed == 7 and c.seed == 8
    assert not a.fct["fct_ns"].equals(c.fct["fct_ns"])


def test_thread_count_does_not_change_results():
    one = rocast.sim("default", seed=3, threads=1, topology__k=4, workload__size_bytes=100_000)
    two = rocast.sim("default", seed=3, threads=2, topology__k=4, workload__size_bytes=100_000)
    pd.testing.assert_frame_equal(one.fct, two.fct)
    pd.testing.assert_frame_equal(one.ports, two.ports)
    with pytest.raises(ValueError):
        rocast.sim("default", threads=-1)


def test_overrides_by_keyword_by_mapping_and_toml_text(tmp_path):
    small = rocast.sim("default", topology__k=4, workload__size_bytes=100_000)
    assert len(small.fct) == 16 and (small.fct["size_bytes"] == 100_000).all()
    same = rocast.sim("default", sets={"topology.k": 4, "workload.size_bytes": 100_000})
    pd.testing.assert_frame_equal(small.fct, same.fct)
    text = rocast.preset_toml("default")
    from_text = rocast.sim(text, topology__k=4, workload__size_bytes=100_000)
    pd.testing.assert_frame_equal(small.fct, from_text.fct)
    f = tmp_path / "s.toml"
    f.write_text(text)
    from_file = rocast.sim(f, topology__k=4, workload__size_bytes=100_000)
    pd.testing.assert_frame_equal(small.fct, from_file.fct)


@pytest.mark.parametrize(
    "scenario, sets, message",
    [
        ("no-such-preset", {}, "neither a preset"),
        ("default", {"topology.nonsense": 1}, "nonsense"),
        ("default", {"topology.k": 3}, "k"),
        ("[topology\nkind=", {}, "TOML"),
    ],
)
def test_bad_scenarios_raise_value_errors(scenario, sets, message):
    with pytest.raises(ValueError, match=message):
        rocast.sim(scenario, sets=sets)


def test_an_unwritable_override_is_a_type_error():
    with pytest.raises(TypeError):
        rocast.sim("default", topology__k=object())


def test_presets_list_every_preset_the_command_lists():
    p = rocast.presets()
    listed = subprocess.run([BIN, "sim", "--list"], capture_output=True, text=True, check=True).stdout
    names = [line.split()[0] for line in listed.splitlines() if line.strip()]
    assert list(p["name"]) == names
    assert "default" in names and "cepheus-fig12" in names
    # One exception for one mistake, whichever call made it.
    with pytest.raises(ValueError, match="no-such-preset"):
        rocast.preset_toml("no-such-preset")
    with pytest.raises(ValueError, match="no-such-preset"):
        rocast.sim("no-such-preset")


def test_an_experiment_returns_its_tables_and_draws_them():
    r = rocast.sim("cepheus-fig10")
    assert r.kind == "experiment" and "fig10" in r.tables
    df = r.tables["fig10"]
    assert set(df["scheme"]) == {"1-unicast", "3-unicasts", "cepheus", "chain"}
    assert "paper vs rocast" in r.text
    draw = rocast.plot.for_table("fig10")
    fig = draw(df, "t")
    assert len(fig.axes) == 1 and len(fig.axes[0].patches) == len(df)
    assert rocast.plot.for_table("no-such-table") is None
    assert len(rocast.plot.of(r).axes) == 1
    with pytest.raises(KeyError):
        rocast.plot.of(r, "no-such-table")


def test_tree_matches_the_command_line(tmp_path):
    t = rocast.tree("fat-tree:k=8", src=0, dst="random:16", algo="peel", seed=3)
    assert len(t.destinations) == 16 and t.source == 0
    assert len(t.arcs) == t.links >= t.lower_bound
    out = tmp_path / "t.json"
    subprocess.run([BIN, "tree", "--topo", "fat-tree:k=8", "--dst", "random:16", "--seed", "3",
                    "--json", str(out)], check=True, capture_output=True)
    cli = json.loads(out.read_text())
    assert cli["arcs"] == t.arcs.values.tolist() and cli["links"] == t.links
    listed = rocast.tree("fat-tree:k=4", dst=[1, 5, 9], algo="optimal")
    assert listed.destinations == [1, 5, 9]
    with pytest.raises(ValueError, match="algo"):
        rocast.tree(algo="nonsense")


def test_grid_points_are_the_sorted_cartesian_product():
    pts = rocast.grid_points({"b": [1, 2], "a": ["x"]})
    assert pts == [{"a": "x", "b": 1}, {"a": "x", "b": 2}]
    with pytest.raises(TypeError):
        rocast.grid_points({"a": "xyz"})


def test_ci_over_seeds_is_the_student_t_interval():
    df = pd.DataFrame({"k": [1, 1, 1, 2], "v": [1.0, 2.0, 3.0, 5.0]})
    ci = rocast.ci_over_seeds(df, by=["k"], value="v")
    one = ci[ci["k"] == 1].iloc[0]
    # mean 2, sd 1, n 3: t(0.975, 2) = 4.303, half-width 4.303 / sqrt(3).
    assert one["mean"] == 2.0 and one["seeds"] == 3
    assert math.isclose(one["ci95"], 4.303 / math.sqrt(3), rel_tol=1e-9)
    assert math.isnan(ci[ci["k"] == 2].iloc[0]["ci95"])


GRID = {"workload.size_bytes": [100_000, 300_000], "topology.k": [4]}


def test_sweep_local_and_dask_give_the_same_table(tmp_path):
    local = rocast.sweep(GRID, seeds=[1, 2], backend="local", workers=2, out=str(tmp_path / "s.csv"))
    dask = rocast.sweep(GRID, seeds=[1, 2], backend="dask", workers=2)
    assert len(local) == 4
    assert list(local.columns[:3]) == ["topology.k", "workload.size_bytes", "seed"]
    assert list(zip(local["workload.size_bytes"], local["seed"])) == [
        (100_000, 1), (100_000, 2), (300_000, 1), (300_000, 2)]
    pd.testing.assert_frame_equal(local.drop(columns=WALL), dask.drop(columns=WALL))
    assert (local["flows.finished"] == 16).all()
    on_disk = pd.read_csv(tmp_path / "s.csv")
    assert len(on_disk) == 4 and list(on_disk.columns) == list(local.columns)
    # Each row is the single run of its point and seed.
    one = rocast.sim("default", seed=2, sets={"workload.size_bytes": 300_000, "topology.k": 4})
    assert local.iloc[3]["fct_us.p99"] == one.summary.loc[0, "fct_us.p99"]


def test_sweep_of_an_experiment_table_and_of_custom_metrics():
    t = rocast.sweep({"multicast.sizes": ["4K,8K"]}, scenario="cepheus-fig10", table="fig10")
    assert len(t) == 2 * 4 and set(t["size_bytes"]) == {4096, 8192}
    m = rocast.sweep({"topology.k": [4]}, seeds=[1, 2], metrics=_flows_finished)
    assert m["finished"].tolist() == [16, 16]
    with pytest.raises(ValueError, match="experiment"):
        rocast.sweep({"topology.k": [4]}, scenario="cepheus-fig10")
    with pytest.raises(ValueError, match="backend"):
        rocast.sweep(GRID, backend="ray")


def _flows_finished(r):
    return {"finished": int((~r.fct["fct_ns"].isna()).sum())}


def test_a_failing_point_raises():
    with pytest.raises(Exception, match="nonsense"):
        rocast.sweep({"topology.nonsense": [1]})


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def _reports(out):
    """Each figure's report without its wall-time lines, the output folder as OUT."""
    return {
        d.name: [l.replace(str(out), "OUT") for l in (d / "report.txt").read_text().splitlines()
                 if "wall" not in l]
        for d in sorted(out.iterdir()) if d.is_dir()
    }


def test_repro_on_dask_writes_what_local_writes(tmp_path):
    ids = ["cepheus-fig10", "peel-fig1", "rdmc-slack"]
    for backend in ["local", "dask"]:
        subprocess.run([BIN, "repro", *ids, "--backend", backend, "--jobs", "2",
                        "--out", str(tmp_path / backend)], check=True, capture_output=True, timeout=600)
    local, dask = _reports(tmp_path / "local"), _reports(tmp_path / "dask")
    assert sorted(local) == sorted(ids) and local == dask
    prov = json.loads((tmp_path / "dask" / "peel-fig1" / "provenance.json").read_text())
    assert prov["backend"] == "dask" and prov["exit_status"] == 0 and prov["seed"] == 1
    assert prov["parameters"]["preset"] == "peel-fig1"
    assert (tmp_path / "dask" / "peel-fig1" / "peel-fig1.svg").stat().st_size > 0
    bad = subprocess.run([BIN, "repro", "peel-fig1", "--address", "tcp://127.0.0.1:1", "--out",
                          str(tmp_path / "x")], capture_output=True, text=True)
    assert bad.returncode != 0 and "--backend dask" in bad.stderr


@pytest.mark.parametrize("stdin", ["nonsense", "{}", '[{"id": 1, "argv": ["true"]}]'])
def test_distribute_refuses_malformed_jobs(stdin):
    r = subprocess.run([sys.executable, "-m", "rocast.distribute"], input=stdin,
                       capture_output=True, text=True, cwd="/")
    assert r.returncode == 2 and "bad jobs" in r.stderr and r.stdout == ""


def test_distribute_runs_jobs_in_order_with_their_status():
    jobs = [{"id": "a", "argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]},
            {"id": "b", "argv": ["true"]}]
    r = subprocess.run([sys.executable, "-m", "rocast.distribute", "--workers", "2"],
                       input=json.dumps(jobs), capture_output=True, text=True, cwd="/", check=True)
    out = json.loads(r.stdout)
    assert [(j["id"], j["code"], j["stdout"], j["stderr"]) for j in out] == [
        ("a", 3, "out\n", "err\n"), ("b", 0, "", "")]


def test_the_docstring_examples_run():
    import doctest

    r = doctest.testmod(rocast, verbose=False)
    assert r.attempted > 0 and r.failed == 0, r


def test_a_key_given_twice_is_refused_not_overridden():
    with pytest.raises(ValueError, match="topology.k given twice"):
        rocast.sim("default", sets={"topology.k": 6}, topology__k=4)


def test_ctrl_c_stops_a_flow_run():
    # A run of minutes (50 MB flows on 1024 hosts): it ends on the interrupt, or the
    # 120 s deadline fails the test.
    import signal

    code = (
        "import rocast, sys\n"
        "print('started', flush=True)\n"
        "try:\n"
        "    rocast.sim('permutation-1024', progress=False, workload__size_bytes=50_000_000)\n"
        "    print('finished')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "started"
        time.sleep(3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert out.strip() == "interrupted", (out, err)
