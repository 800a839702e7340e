"""Parameter sweeps: every point of a grid, for every seed, in parallel, in one table.

    df = rocast.sweep({"workload.size_bytes": [100_000, 1_000_000], "topology.k": [4, 8]},
                      scenario="default", seeds=range(1, 6), backend="dask")
    ci = rocast.ci_over_seeds(df, by=["topology.k"], value="fct_us.p99")

Backends:
- "local" (the default): a pool of local processes (`concurrent.futures`), embedded,
  no server.
- "dask": Dask's distributed scheduler. Without `address`, a LocalCluster of worker
  processes on this machine (what CI runs); with `address="tcp://host:8786"`, the same
  code runs on a multi-node cluster (every worker needs the rocast wheel installed).

rocast uses Dask rather than Ray (measured side by side on the project's 2-core VM):
Dask is pure Python, 24 MB installed, and a 2-worker LocalCluster starts in 0.45 s;
Ray 2.60 is 240 MB of native code with its own raylet and object store, and `ray.init`
takes 3.1 s. A remote cluster is one `Client(address)` away in both, and Dask's results
are pandas DataFrames already, as are rocast's.

One row per (point, seed): the grid's keys and `seed` as columns, then the metrics.
By default the metrics are the run's summary (flow runs: `fct_us.p50`, `fct_us.p99`,
`flows.finished`, …); `table="fig12"` keeps an experiment's table instead (its rows,
tagged with the point and seed); `metrics=f` calls `f(SimResult) -> dict`.
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

import pandas as pd

from ._backends import map_on

# Two-sided 95% Student t quantiles for n-1 degrees of freedom (n seeds); beyond 30, 1.96.
_T95 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]


def grid_points(grid: Mapping[str, Sequence[Any]]) -> List[Dict[str, Any]]:
    """The cartesian product of a grid, keys in sorted order (a fixed point order)."""
    keys = sorted(grid)
    for k in keys:
        if isinstance(grid[k], (str, bytes)) or not isinstance(grid[k], Iterable):
            raise TypeError(f"grid[{k!r}] must be a list of values, got {grid[k]!r}")
    return [dict(zip(keys, vals)) for vals in itertools.product(*(list(grid[k]) for k in keys))]


def _run_point(task: Dict[str, Any]) -> pd.DataFrame:
    """One (point, seed): runs in a worker process; returns its rows."""
    import rocast

    r = rocast.sim(task["scenario"], seed=task["seed"], sets=task["point"])
    if task["metrics"] is not None:
        rows = pd.DataFrame([task["metrics"](r)])
    elif task["table"] is not None:
        if task["table"] not in r.tables:
            raise KeyError(f"{task['scenario']} has no table {task['table']!r}: {sorted(r.tables)}")
        rows = r.tables[task["table"]].copy()
    elif r.kind == "flows":
        rows = r.summary.copy()
    else:
        raise ValueError(
            f"{task['scenario']} is an experiment: name one of its tables "
            f"(table=…: {sorted(r.tables)}) or pass metrics="
        )
    tag = {**task["point"], "seed": task["seed"]}
    # The point's keys first; a column of the same name (summary's seed) gives way.
    rows = rows.drop(columns=[k for k in tag if k in rows.columns])
    for i, (k, v) in enumerate(tag.items()):
        rows.insert(i, k, [v] * len(rows))
    return rows


def sweep(
    grid: Mapping[str, Sequence[Any]],
    *,
    scenario: str = "default",
    seeds: Iterable[int] = (1,),
    backend: str = "local",
    address: Optional[str] = None,
    workers: Optional[int] = None,
    table: Optional[str] = None,
    metrics: Optional[Callable[[Any], Mapping[str, Any]]] = None,
    out: Optional[str] = None,
) -> pd.DataFrame:
    """Runs `scenario` at every point of `grid` (scenario keys to lists of values) for
    every seed, on `backend` ("local" or "dask"), and returns one DataFrame with one row
    per point and seed (sorted by the grid's keys, then seed). `out` also writes it as CSV.
    A point that fails raises its error after the others are cancelled."""
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: give at least one seed")
    tasks = [
        {"scenario": scenario, "point": p, "seed": s, "table": table, "metrics": metrics}
        for p in grid_points(grid)
        for s in seeds
    ]
    n = workers or min(len(tasks), os.cpu_count() or 1)
    frames = map_on(_run_point, tasks, backend, n, address)
    df = pd.concat(frames, ignore_index=True)
    if out is not None:
        df.to_csv(out, index=False)
    return df


def ci_over_seeds(df: pd.DataFrame, by: Sequence[str], value: str, level: float = 0.95) -> pd.DataFrame:
    """Mean of `value` over seeds per group `by`, with its 95% confidence interval
    (Student t over the seeds; a single seed gives no interval: NaN)."""
    if level != 0.95:
        raise ValueError("only the 95% interval is tabulated")
    g = df.groupby(list(by), sort=True)[value]
    out = g.agg(["mean", "std", "count"]).reset_index()

    def half(row):
        n = int(row["count"])
        if n < 2:
            return math.nan
        t = _T95[n - 2] if n - 2 < len(_T95) else 1.96
        return t * row["std"] / math.sqrt(n)

    out["ci95"] = out.apply(half, axis=1)
    out["low"] = out["mean"] - out["ci95"]
    out["high"] = out["mean"] + out["ci95"]
    return out.rename(columns={"count": "seeds"})
