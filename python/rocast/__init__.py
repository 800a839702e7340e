"""rocast in Python: the simulator in-process, results as pandas DataFrames.

    import rocast
    r = rocast.sim("default")            # a preset name, a TOML file, or TOML text
    r.fct.describe()                     # one row per flow
    r.summary                            # one row: the run's totals and FCT quantiles
    rocast.presets()                     # every preset with its description
    rocast.tree("fat-tree:k=8", dst="random:16", algo="peel").arcs
    rocast.sweep({"topology.k": [4, 8]}, seeds=[1, 2, 3], backend="dask")
    rocast.plot.cepheus_fig12(rocast.sim("cepheus-fig12").tables["fig12"])

The simulator is Rust (the extension module `rocast._native`, built by maturin from
python/pyproject.toml); it runs with the GIL released. Nothing goes through files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from io import StringIO
from typing import Any, Dict, List, Mapping, Optional, Union

import pandas as pd

from . import pcap  # noqa: F401
from .sweep import ci_over_seeds, grid_points, sweep  # noqa: F401

__all__ = [
    "ReproResult",
    "SimResult",
    "Tree",
    "bcast",
    "ci_over_seeds",
    "grid_points",
    "pcap",
    "plot",
    "preset_toml",
    "presets",
    "repro",
    "sim",
    "sweep",
    "tree",
    "version",
    "__version__",
]


def _lib():
    """The compiled half; a clear error when only the source tree is on the path."""
    try:
        from . import _native as n
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(
            "rocast's compiled module is not installed: run `bash scripts/install-python.sh` "
            "(builds the wheel with maturin into the project's .venv)"
        ) from e
    return n


def version() -> str:
    """The rocast version the compiled module was built from."""
    return _lib().__version__


def __getattr__(name: str) -> Any:
    # `rocast.__version__`: the compiled module's, asked for when read.
    if name == "__version__":
        return version()
    # `rocast.plot` imports matplotlib: only when asked for.
    if name == "plot":
        import importlib

        return importlib.import_module(".plot", __name__)
    raise AttributeError(f"module 'rocast' has no attribute {name!r}")


def presets() -> pd.DataFrame:
    """Every built-in scenario: columns name, description (as `rocast sim --list`)."""
    return pd.DataFrame(_lib().presets(), columns=["name", "description"])


def preset_toml(name: str) -> str:
    """A preset's TOML text (as `rocast sim --print-preset`)."""
    return _lib().preset_toml(name)


def _toml_value(v: Any) -> str:
    """A Python value as a TOML literal for a `KEY=VALUE` override."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is a JSON string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} ({type(v).__name__}) as a TOML value")


def overrides_to_sets(overrides: Mapping[str, Any]) -> List[str]:
    """`{"topology.k": 8}` (or keyword style `topology__k=8`) as `["topology.k=8"]`."""
    return [f"{k.replace('__', '.')}={_toml_value(v)}" for k, v in sorted(overrides.items())]


@dataclass
class SimResult:
    """What one simulation produced.

    A flow-level run (`kind == "flows"`) fills `fct` (one row per flow: src, dst,
    sport, size_bytes, start_ns, fct_ns, received_ns, standalone_ns, failed, slowdown;
    NaN times for flows that did not finish), `ports` (every switch and host port's
    counters), `samples` (cumulative counters once per `output.summary_interval_ms`)
    and `summary` (one row, summary.json flattened: `fct_us.p99`, `flows.finished`…).
    An experiment preset (`kind == "experiment"`: the papers' figures) fills `tables`
    (the CSVs `rocast sim` would write, by name), `verdicts` (one row per paper-vs-rocast
    verdict: claim, paper, rocast, word, reading, reason) and `text` (its report). `scenario` is the name as reports print it: under
    overrides, the name then `[--set KEY=VALUE …]` (a preset's description no longer
    holds); `overrides` lists them.
    """

    scenario: str
    seed: int
    kind: str
    overrides: List[str] = field(default_factory=list)
    fct: pd.DataFrame = field(default_factory=pd.DataFrame)
    ports: pd.DataFrame = field(default_factory=pd.DataFrame)
    samples: pd.DataFrame = field(default_factory=pd.DataFrame)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    tables: Dict[str, pd.DataFrame] = field(default_factory=dict)
    verdicts: pd.DataFrame = field(default_factory=pd.DataFrame)
    text: str = ""

    def __repr__(self) -> str:
        if self.kind == "flows":
            return f"SimResult({self.scenario!r}, seed={self.seed}, {len(self.fct)} flows)"
        return f"SimResult({self.scenario!r}, seed={self.seed}, tables={sorted(self.tables)})"


VERDICT_COLUMNS = ["claim", "paper", "rocast", "word", "reading", "reason"]


def _verdicts_frame(records: List[Mapping[str, Any]]) -> pd.DataFrame:
    """Verdict records (`verdicts.json`) as a DataFrame with a fixed column order."""
    return pd.DataFrame(list(records), columns=VERDICT_COLUMNS)


def _resolve(scenario: Union[str, os.PathLike]) -> Dict[str, Any]:
    """A preset name, a .toml file, or TOML text, as keyword arguments of _native.sim."""
    s = os.fspath(scenario)
    if os.path.isfile(s):
        with open(s, encoding="utf-8") as f:
            return {"toml": f.read(), "base": os.path.dirname(os.path.abspath(s))}
    names = {n for n, _ in _lib().presets()}
    if s in names:
        return {"preset": s}
    if "\n" in s or "=" in s:
        return {"toml": s, "base": os.getcwd()}
    raise ValueError(
        f"{s!r} is neither a preset ({', '.join(sorted(names))}), a file, nor TOML text"
    )


def sim(
    scenario: Union[str, os.PathLike] = "default",
    seed: Optional[int] = None,
    *,
    sets: Optional[Mapping[str, Any]] = None,
    threads: int = 0,
    progress: Optional[bool] = None,
    **overrides: Any,
) -> SimResult:
    """Runs a scenario in the simulator and returns its results as DataFrames.

    `threads`: worker threads (0, the default: every core), as `rocast sim --threads`;
    results do not depend on it. `progress`: a progress bar on stderr, the simulated
    time of a flow-level run or an experiment's runs done of all (None, the default:
    when stderr is a terminal). Ctrl-C stops a flow-level run
    within a second (KeyboardInterrupt); an experiment stops at its next point (the
    points it is running finish first, so it stops within one point's time).

        >>> r = sim("default", topology__k=4)
        >>> int(r.summary["flows.finished"].iloc[0])
        16

    `scenario`: a preset name (`presets()`), a TOML file, or TOML text. `seed`: the RNG
    seed (same seed and scenario, same results). Overrides are scenario keys, either
    `sets={"topology.k": 4}` or keywords with `__` for the dot (`topology__k=4`), as
    `rocast sim --set`. Errors (unknown preset or key, invalid value) raise ValueError.
    """
    all_sets = {k: v for k, v in (sets or {}).items()}
    for k, v in overrides.items():
        key = k.replace("__", ".")
        if key in all_sets:
            # Two values for one key: neither silently wins.
            raise ValueError(f"{key} given twice: in sets ({all_sets[key]!r}) and as {k}={v!r}")
        all_sets[key] = v
    if seed is not None:
        all_sets["seed"] = int(seed)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"threads must be a non-negative int, got {threads!r}")
    raw = _lib().sim(sets=overrides_to_sets(all_sets), threads=threads, progress=progress,
                     **_resolve(scenario))
    r = SimResult(scenario=raw["scenario"], seed=raw["seed"], kind=raw["kind"],
                  overrides=list(raw["overrides"]))
    if raw["kind"] == "experiment":
        r.text = raw["text"]
        r.verdicts = _verdicts_frame(json.loads(raw["verdicts_json"]))
        r.tables = {name: pd.read_csv(StringIO(body)) for name, body in raw["tables"].items()}
        return r
    fct = pd.DataFrame(raw["fct"])
    fct["slowdown"] = (fct["fct_ns"] / fct["standalone_ns"]).clip(lower=1.0)
    r.fct = fct
    r.samples = pd.DataFrame(raw["samples"])
    r.ports = pd.read_csv(StringIO(raw["ports_csv"]))
    summary = pd.json_normalize(json.loads(raw["summary_json"]))
    # One cell per key: the overrides as one string (`KEY=VALUE KEY=VALUE`), not a list.
    summary["overrides"] = summary["overrides"].apply(" ".join)
    r.summary = summary
    return r


@dataclass
class Tree:
    """A multicast tree (`rocast tree`): its arcs (parent, child, link) and sizes."""

    algorithm: str
    topology: str
    source: int
    destinations: List[int]
    switches: int
    links: int
    depth: int
    lower_bound: int
    arcs: pd.DataFrame


def tree(
    topo: str = "fat-tree:k=8",
    *,
    src: int = 0,
    dst: Union[str, List[int]] = "random:16",
    algo: str = "peel",
    fail: float = 0.0,
    seed: int = 1,
    exact_time_limit: float = 120.0,
) -> Tree:
    """Builds a multicast tree offline, as `rocast tree`.

    `topo`: `fat-tree:k=8`, `leaf-spine:spines=16,leaves=48,hosts=2` or a topology
    file; `dst`: `random:N` (seeded), or a list of host ids; `algo`: peel (PEEL §2's
    layer peeling), optimal (the symmetric optimum, fault-free fabrics), cepheus
    (hop-by-hop), exact (HiGHS ILP); `fail`: the fraction of switch links failed.
    """
    if not isinstance(dst, str):
        dst = ",".join(str(int(d)) for d in dst)
    j = json.loads(
        _lib().tree(topo, src, dst, algo, float(fail), int(seed), float(exact_time_limit))
    )
    return Tree(
        algorithm=j["algorithm"],
        topology=j["topology"],
        source=j["source"],
        destinations=list(j["destinations"]),
        switches=j["switches"],
        links=j["links"],
        depth=j["depth"],
        lower_bound=j["lower_bound"],
        arcs=pd.DataFrame(j["arcs"], columns=["parent", "child", "link"]),
    )


def bcast(
    schemes: Union[str, List[str]] = "sequential,tree,chain,pipeline,ring",
    *,
    group_size: int = 8,
    sizes: Union[str, List[int]] = "64:16M",
    topo: str = "star",
    sets: Optional[Mapping[str, Any]] = None,
    block: Union[str, int] = "1M",
    ring_slice: Union[str, int] = "512K",
    ring_slots: int = 8,
    overhead_us: Optional[float] = None,
    flow_control: bool = True,
    root: int = 0,
    verify: bool = False,
) -> pd.DataFrame:
    """The OSU-style broadcast benchmark, as `rocast bcast --json`: one broadcast per
    scheme and size on an otherwise idle fabric, one row each (bcast.csv's columns:
    scheme, group, size_bytes, block_bytes, window, flow_control, latency_us, model_us,
    messages, host_tx_bytes, events, retransmitted, avg_rank_us, min_rank_us).

        >>> df = bcast("chain,pipeline", group_size=4, sizes=[65536])
        >>> list(df["scheme"]), bool((df["latency_us"] > 0).all())
        (['chain', 'pipeline'], True)

    `schemes`: sequential, tree, chain, pipeline, ring (a comma string or a list).
    `sizes`: `MIN:MAX` (powers of two between, as OSU's -m), a comma string with K/M/G
    suffixes, or a list of byte counts. `topo`: "star" (one leaf switch, one host per
    rank), a preset name or a scenario TOML file; `sets` overrides its keys
    (`{"topology.host_gbps": 25}`). `overhead_us`: software overhead per post at every
    hop (None: the CLI's default). Errors raise ValueError. `rocast bcast`'s --fail,
    --smc and --analyze are reports of their own and stay in the CLI.
    """
    if not isinstance(schemes, str):
        schemes = ",".join(schemes)
    if not isinstance(sizes, str):
        sizes = ",".join(str(int(x)) for x in sizes)
    for name, v in (("group_size", group_size), ("ring_slots", ring_slots), ("root", root)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    csv = _lib().bcast(
        [s for s in schemes.split(",") if s],
        group_size,
        sizes,
        os.fspath(topo),
        overrides_to_sets(sets or {}),
        str(block),
        str(ring_slice),
        ring_slots,
        None if overhead_us is None else float(overhead_us),
        bool(flow_control),
        root,
        bool(verify),
    )
    return pd.read_csv(StringIO(csv))


@dataclass
class ReproResult:
    """What `rocast.repro` ran: `figures` (one row per figure: id, paper, figure,
    scale, wall_s, exit_status, reproduced, differs, calibrated, not_measured),
    `verdicts` (one row per verdict, with the figure's id), `tables` (each figure's
    CSVs by name), `report` (REPORT.md) and `out` (the folder that holds it all)."""

    out: str
    figures: pd.DataFrame
    verdicts: pd.DataFrame
    tables: Dict[str, Dict[str, pd.DataFrame]]
    report: str

    def __repr__(self) -> str:
        return f"ReproResult({len(self.figures)} figures, {len(self.verdicts)} verdicts, out={self.out!r})"


def _rocast_binary() -> str:
    """The `rocast` CLI: $ROCAST_BIN, else `rocast` on the PATH (scripts/demo.sh puts
    it there)."""
    import shutil

    b = os.environ.get("ROCAST_BIN") or shutil.which("rocast")
    if not b or not os.path.isfile(b):
        raise FileNotFoundError(
            "rocast.repro runs the `rocast` CLI: put it on the PATH (bash scripts/demo.sh "
            "does) or set ROCAST_BIN to its path"
        )
    return b


def repro(
    ids: Union[str, List[str]],
    *,
    quick: bool = False,
    out: Optional[Union[str, os.PathLike]] = None,
    jobs: Optional[int] = None,
    threads: Optional[int] = None,
) -> ReproResult:
    """Redraws the papers' figures, as `rocast repro IDS --out OUT`, and returns what
    it found as DataFrames. `ids`: figure ids or papers (`rocast repro --list`; one
    string or a list; "all" for every figure, about 37 minutes). `quick`: the long
    figures at their smaller scale. `out`: the folder for REPORT.md and each figure's
    report, CSVs, plots and provenance (default: a new temporary folder, kept).

    The figures run through the `rocast` CLI ($ROCAST_BIN, else on the PATH), as
    `rocast repro` runs them: many are not simulator presets (`rocast bcast …`), and
    each figure's process is its own. A figure that fails raises RuntimeError after
    the others ran (its `stderr.txt` is in `out`); an unknown id raises ValueError.
    """
    import glob
    import subprocess
    import tempfile

    if isinstance(ids, str):
        ids = [ids]
    ids = list(ids)
    if not ids:
        raise ValueError("ids: name at least one figure or paper (or \"all\")")
    out = os.fspath(out) if out is not None else tempfile.mkdtemp(prefix="rocast-repro-")
    argv = [_rocast_binary(), "repro"]
    argv += ["--all"] if ids == ["all"] else ids
    argv += ["--out", out]
    if quick:
        argv.append("--quick")
    if jobs is not None:
        argv += ["--jobs", str(int(jobs))]
    if threads is not None:
        argv += ["--threads", str(int(threads))]
    p = subprocess.run(argv, capture_output=True, text=True)
    report_path = os.path.join(out, "REPORT.md")
    if p.returncode != 0 and not os.path.isfile(report_path):
        # A usage error (an unknown id): nothing ran.
        raise ValueError(p.stderr.strip().removeprefix("rocast: ").removeprefix("error: "))
    with open(report_path, encoding="utf-8") as f:
        report = f.read()
    ran = _selected(report)
    rows, verdicts, tables = [], [], {}
    for prov_path in sorted(glob.glob(os.path.join(out, "*", "provenance.json"))):
        with open(prov_path, encoding="utf-8") as f:
            prov = json.load(f)
        fig = prov["figure"]
        if fig not in ran:
            continue  # a folder left by an earlier run into the same `out`
        v = _verdicts_frame(prov["verdicts"])
        v.insert(0, "figure", fig)
        verdicts.append(v)
        words = v["word"].str.split(" ").str[0] if len(v) else pd.Series(dtype=str)
        rows.append({
            "id": fig, "paper": prov["paper"], "figure": prov["paper_figure"],
            "scale": prov["scale"], "wall_s": prov["wall_s"], "exit_status": prov["exit_status"],
            "reproduced": int((words == "reproduced").sum()),
            "differs": int((words == "differs").sum()),
            "calibrated": int((words == "calibrated").sum()),
            "not_measured": int((v["word"] == "not measured").sum()) if len(v) else 0,
        })
        folder = os.path.dirname(prov_path)
        tables[fig] = {
            os.path.basename(c)[:-4]: pd.read_csv(c)
            for c in sorted(glob.glob(os.path.join(folder, "*.csv")))
        }
    r = ReproResult(
        out=out,
        figures=pd.DataFrame(rows, columns=["id", "paper", "figure", "scale", "wall_s", "exit_status",
                                            "reproduced", "differs", "calibrated", "not_measured"]),
        verdicts=(pd.concat(verdicts, ignore_index=True) if verdicts
                  else pd.DataFrame(columns=["figure"] + VERDICT_COLUMNS)),
        tables=tables,
        report=report,
    )
    if p.returncode != 0:
        e = RuntimeError(f"rocast repro: {p.stderr.strip().splitlines()[-1]} (see {out}/*/stderr.txt)")
        e.result = r  # what did run, for a look at the rest
        raise e
    return r


def _selected(report_md: str) -> set:
    """The figure ids of REPORT.md's table (the rows this run wrote)."""
    ids = set()
    for line in report_md.splitlines():
        if line.startswith("| [") and "](" in line:
            ids.add(line[3:line.index("]")])
    return ids
