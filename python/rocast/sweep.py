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

def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1.0 - x) / b


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: the t with P(T <= t) = p for `df` degrees of freedom
    (p in (0.5, 1)), by bisection on the t distribution's CDF. `t_quantile(0.975, 4)`
    is 2.776; rocast carries its own rather than require SciPy for one function."""
    if not (0.5 < p < 1.0) or df < 1:
        raise ValueError(f"t_quantile: need 0.5 < p < 1 and df >= 1, got p={p!r}, df={df!r}")
    tail = 1.0 - p  # P(T > t) = I_{df/(df+t^2)}(df/2, 1/2) / 2

    def upper(t: float) -> float:
        return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))

    lo, hi = 0.0, 1.0
    while upper(hi) > tail:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if upper(mid) > tail:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


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
    """Mean of `value` over seeds per group `by`, with its two-sided confidence interval
    at `level` (0.95 by default; any level in (0, 1)): Student t over the seeds. A
    single seed gives no interval (NaN). The half-width's column is named for the
    level (`ci95`, `ci99`, `ci99.9`); `low` and `high` are the interval's ends.

        >>> d = pd.DataFrame({"k": [4, 4, 4], "seed": [1, 2, 3], "x": [1.0, 2.0, 3.0]})
        >>> round(float(ci_over_seeds(d, ["k"], "x")["ci95"].iloc[0]), 3)
        2.484
        >>> round(float(ci_over_seeds(d, ["k"], "x", level=0.99)["ci99"].iloc[0]), 3)
        5.73
    """
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not (0.0 < level < 1.0):
        raise ValueError(f"level must be a fraction in (0, 1), e.g. 0.95; got {level!r}")
    col = "ci" + f"{level * 100:.4f}".rstrip("0").rstrip(".")
    g = df.groupby(list(by), sort=True)[value]
    out = g.agg(["mean", "std", "count"]).reset_index()

    def half(row):
        n = int(row["count"])
        if n < 2:
            return math.nan
        return t_quantile(0.5 + level / 2.0, n - 1) * row["std"] / math.sqrt(n)

    out[col] = out.apply(half, axis=1)
    out["low"] = out["mean"] - out[col]
    out["high"] = out["mean"] + out[col]
    return out.rename(columns={"count": "seeds"})
