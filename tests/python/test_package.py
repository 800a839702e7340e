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
    assert math.isclose(one["ci95"], 4.303 / math.sqrt(3), rel_tol=1e-3)
    assert math.isnan(ci[ci["k"] == 2].iloc[0]["ci95"])
    # Other levels: t(0.995, 2) = 9.925, t(0.95, 2) = 2.920 (two-sided 99 % and 90 %).
    ci99 = rocast.ci_over_seeds(df, by=["k"], value="v", level=0.99)
    assert math.isclose(ci99[ci99["k"] == 1].iloc[0]["ci99"], 9.925 / math.sqrt(3), rel_tol=1e-3)
    ci90 = rocast.ci_over_seeds(df, by=["k"], value="v", level=0.9)
    assert math.isclose(ci90[ci90["k"] == 1].iloc[0]["ci90"], 2.920 / math.sqrt(3), rel_tol=1e-3)
    for bad in (0, 1, 95, True):
        with pytest.raises(ValueError):
            rocast.ci_over_seeds(df, by=["k"], value="v", level=bad)


def test_t_quantile_matches_the_printed_tables():
    from rocast.sweep import t_quantile

    # Two-sided 95 % (p = 0.975) for 1..10 and 30 degrees of freedom, as printed in
    # every statistics table (and in rocast repro's own `t975`).
    printed = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447,
               7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 30: 2.042}
    for df, t in printed.items():
        assert math.isclose(t_quantile(0.975, df), t, abs_tol=6e-4), df
    assert math.isclose(t_quantile(0.995, 1), 63.657, abs_tol=1e-3)
    assert math.isclose(t_quantile(0.9995, 1000), 3.300, abs_tol=1e-3)


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

    # `rocast.sweep` is the function; its module is rocast's submodule of that name.
    for module in (rocast, sys.modules["rocast.sweep"]):
        r = doctest.testmod(module, verbose=False)
        assert r.attempted > 0 and r.failed == 0, (module.__name__, r)


def test_a_key_given_twice_is_refused_not_overridden():
    with pytest.raises(ValueError, match="topology.k given twice"):
        rocast.sim("default", sets={"topology.k": 6}, topology__k=4)


def interrupted(call, after_s, deadline_s, then=""):
    """Runs `call` (a rocast call, as text) in a fresh interpreter, sends it SIGINT
    `after_s` seconds after it started, and returns what the process printed: "interrupted"
    for a KeyboardInterrupt, "finished" if the call ran to its end, then `then`'s output.
    Past `deadline_s` the process is killed and the test fails."""
    import signal

    code = (
        "import rocast\n"
        "print('started', flush=True)\n"
        "try:\n"
        f"    {call}\n"
        "    print('finished')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
        f"{then}"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "started"
        time.sleep(after_s)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=deadline_s)
    finally:
        p.kill()
    return out, err


def test_ctrl_c_stops_a_flow_run():
    # A run of minutes (50 MB flows on 1024 hosts): it ends on the interrupt, or the
    # 120 s deadline fails the test.
    out, err = interrupted(
        "rocast.sim('permutation-1024', progress=False, workload__size_bytes=50_000_000)", 3, 120)
    assert out.strip() == "interrupted", (out, err)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"topo": "fat-tree:k=5"}, "topo"),
        ({"topo": "no-such-file.toml"}, "topo"),
        ({"dst": "random:999"}, "dst"),
        ({"dst": "x,y"}, "dst"),
        ({"algo": "nonsense"}, "algo"),
        ({"fail": 2.0}, "fail"),
        ({"src": 999}, "src"),
        ({"exact_time_limit": -1.0}, "exact_time_limit"),
    ],
)
def test_tree_errors_name_the_python_argument_not_the_flag(kwargs, name):
    with pytest.raises(ValueError) as e:
        rocast.tree(**kwargs)
    msg = str(e.value)
    assert msg.startswith(name + " ") and "--" not in msg, msg
    # The CLI names its flag for the same mistake.
    flag = "--" + name.replace("_", "-")
    if name not in ("src", "exact_time_limit"):
        args = {"topo": "fat-tree:k=8", "dst": "random:4", "algo": "peel", "fail": 0.0}
        args.update(kwargs)
        p = subprocess.run([BIN, "tree"] + [x for k, v in args.items() for x in ("--" + k, str(v))],
                           capture_output=True, text=True)
        assert p.returncode != 0 and flag in p.stderr, p.stderr


def test_summaries_name_the_overrides_they_ran_under(tmp_path):
    r = rocast.sim("default", seed=2, topology__k=4)
    assert r.overrides == ["seed=2", "topology.k=4"]
    # The preset's description says k=8; the title says what replaced it (the seed is
    # printed beside it, not in it).
    assert r.scenario.endswith("[--set topology.k=4]"), r.scenario
    assert r.summary.loc[0, "scenario"] == r.scenario
    assert r.summary.loc[0, "overrides"] == "seed=2 topology.k=4"
    out = tmp_path / "cli"
    p = subprocess.run([BIN, "sim", "--seed", "2", "--set", "topology.k=4", "--quiet", "--out", str(out)],
                       check=True, capture_output=True, text=True)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == r.scenario and sorted(summary["overrides"]) == ["seed=2", "topology.k=4"]
    plain = rocast.sim("default", topology__k=4, sets={})
    assert "seed" not in plain.scenario
    assert rocast.sim("cepheus-fig10").overrides == []


def test_plot_of_a_flow_run_draws_its_fct_cdfs():
    r = rocast.sim("default", topology__k=4)
    fig = rocast.plot.of(r)
    assert len(fig.axes) == 2
    assert fig.axes[0].get_xlabel() == "flow completion time (µs)"
    # One step per flow, ending at 1.
    x, y = fig.axes[0].lines[0].get_data()
    assert len(x) == len(r.fct) and y[-1] == 1.0
    with pytest.raises(KeyError):
        rocast.plot.of(r, "fig12")


def test_bcast_matches_the_command_line(tmp_path):
    df = rocast.bcast("sequential,pipeline,ring", group_size=6, sizes="4K,1M", block="256K")
    p = subprocess.run([BIN, "bcast", "--schemes", "sequential,pipeline,ring", "--group-size", "6",
                        "--sizes", "4K,1M", "--block", "256K", "--json", "--out", str(tmp_path)],
                       check=True, capture_output=True, text=True)
    cli = pd.DataFrame(json.loads(p.stdout))
    assert len(df) == 6 and sorted(df.columns) == sorted(cli.columns)
    pd.testing.assert_frame_equal(df, cli[df.columns], check_dtype=False)
    # The same rows from bcast.csv, and sizes given as a list.
    assert rocast.bcast(["sequential"], group_size=6, sizes=[4096], block="256K")["latency_us"].iloc[0] \
        == df["latency_us"].iloc[0]
    for bad, word in ((dict(group_size=1), "group_size"), (dict(root=8), "root"),
                      (dict(schemes="x"), "schemes"), (dict(topo="no-such"), "topo"),
                      (dict(sizes="1Q"), "sizes"), (dict(overhead_us=-1.0), "overhead_us")):
        with pytest.raises(ValueError, match=word):
            rocast.bcast(**bad)


def test_pcap_read_matches_pcap_dump_json():
    cap = REPO / "testdata" / "rxe-golden.pcap"
    df = rocast.pcap.read(cap)
    p = subprocess.run([BIN, "pcap", "dump", "--json", str(cap)], check=True, capture_output=True, text=True)
    cli = json.loads(p.stdout)
    assert len(df) == len(cli) > 100
    assert list(df["frame"]) == [f["frame"] for f in cli]
    assert list(df["psn"]) == [f["psn"] for f in cli]
    assert list(df["opcode"]) == [f["opcode"] for f in cli]
    assert df["icrc_ok"].all()
    acks = df[df["opcode"] == "RC ACKNOWLEDGE"]
    assert len(acks) and acks["aeth.syndrome"].str.startswith("AETH(ACK").all()
    assert list(df.columns[:11]) == rocast.pcap.BASE_COLUMNS


def test_pcap_read_refuses_what_is_not_a_capture(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"not a capture at all, just text")
    with pytest.raises(ValueError, match="not a pcap"):
        rocast.pcap.read(bad)
    # A capture cut mid-record is an error, not a shorter table.
    data = (REPO / "testdata" / "rxe-golden.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated"):
        rocast.pcap.read(cut)
    with pytest.raises(ValueError, match="cannot read"):
        rocast.pcap.read(tmp_path / "missing.pcap")


def test_experiment_verdicts_are_the_ones_the_command_writes(tmp_path):
    r = rocast.sim("cepheus-fig10")
    subprocess.run([BIN, "sim", "--preset", "cepheus-fig10", "--quiet", "--no-plot", "--out", str(tmp_path)],
                   check=True, capture_output=True)
    cli = json.loads((tmp_path / "verdicts.json").read_text())
    assert r.verdicts.to_dict("records") == cli
    assert list(r.verdicts.columns) == rocast.VERDICT_COLUMNS


def test_repro_returns_the_report_as_dataframes(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCAST_BIN", BIN)
    r = rocast.repro(["cepheus-fig10", "peel-fig3"], out=tmp_path)
    assert list(r.figures["id"]) == ["cepheus-fig10", "peel-fig3"]
    assert (r.figures["exit_status"] == 0).all()
    for fig in ("cepheus-fig10", "peel-fig3"):
        prov = json.loads((tmp_path / fig / "provenance.json").read_text())
        mine = r.verdicts[r.verdicts["figure"] == fig].drop(columns="figure")
        assert mine.to_dict("records") == prov["verdicts"]
        row = r.figures[r.figures["id"] == fig].iloc[0]
        assert row["reproduced"] + row["differs"] + row["calibrated"] + row["not_measured"] == len(mine)
    assert "fig10" in r.tables["cepheus-fig10"]
    assert r.report == (tmp_path / "REPORT.md").read_text()
    with pytest.raises(ValueError, match="no figure"):
        rocast.repro("no-such-figure", out=tmp_path / "x")
    monkeypatch.setenv("ROCAST_BIN", str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", "")
    with pytest.raises(FileNotFoundError, match="ROCAST_BIN"):
        rocast.repro("cepheus-fig10")


def test_ctrl_c_stops_an_experiment_at_its_next_point():
    # tmcf-robustness on one thread runs about 140 s of points of a few seconds each:
    # the interrupt ends it at the next point, and the process's next run runs whole.
    out, err = interrupted("rocast.sim('tmcf-robustness', threads=1)", 3, 100,
                           then="r = rocast.sim('cepheus-fig10')\nprint('next run', len(r.verdicts))\n")
    assert out.split("\n")[:2] == ["interrupted", "next run 2"], (out, err)
