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

from .sweep import ci_over_seeds, grid_points, sweep  # noqa: F401

__all__ = [
    "SimResult",
    "Tree",
    "ci_over_seeds",
    "grid_points",
    "plot",
    "preset_toml",
    "presets",
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
    (the CSVs `rocast sim` would write, by name) and `text` (its report, with the
    paper-vs-rocast verdicts).
    """

    scenario: str
    seed: int
    kind: str
    fct: pd.DataFrame = field(default_factory=pd.DataFrame)
    ports: pd.DataFrame = field(default_factory=pd.DataFrame)
    samples: pd.DataFrame = field(default_factory=pd.DataFrame)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    tables: Dict[str, pd.DataFrame] = field(default_factory=dict)
    text: str = ""

    def __repr__(self) -> str:
        if self.kind == "flows":
            return f"SimResult({self.scenario!r}, seed={self.seed}, {len(self.fct)} flows)"
        return f"SimResult({self.scenario!r}, seed={self.seed}, tables={sorted(self.tables)})"


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
    results do not depend on it. `progress`: a flow-level run's progress bar on stderr
    (None, the default: when stderr is a terminal). Ctrl-C stops a flow-level run
    within a second (KeyboardInterrupt); an experiment finishes the points it runs.

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
    r = SimResult(scenario=raw["scenario"], seed=raw["seed"], kind=raw["kind"])
    if raw["kind"] == "experiment":
        r.text = raw["text"]
        r.tables = {name: pd.read_csv(StringIO(body)) for name, body in raw["tables"].items()}
        return r
    fct = pd.DataFrame(raw["fct"])
    fct["slowdown"] = (fct["fct_ns"] / fct["standalone_ns"]).clip(lower=1.0)
    r.fct = fct
    r.samples = pd.DataFrame(raw["samples"])
    r.ports = pd.read_csv(StringIO(raw["ports_csv"]))
    r.summary = pd.json_normalize(json.loads(raw["summary_json"]))
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
