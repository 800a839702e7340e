"""rocast's figures, drawn in the papers' forms from rocast's tables.

Each function takes the DataFrame an experiment produces (`rocast.sim(preset).tables[...]`,
or the CSV `rocast sim --preset …` writes) and returns a matplotlib Figure; where the
paper gives numbers, they are overlaid (black crosses or dashed lines, labelled
"paper"). `save(fig, "x.png")` writes PNG and SVG. `for_table(name)` names the
function that draws a table, as `rocast sim` chooses.

The same modules draw what `rocast sim` plots (`python/plot.py FIGURE DATA.csv OUT.png
TITLE`, FIGURE a module name here).
"""

from __future__ import annotations

from typing import Callable, Optional

import matplotlib.pyplot as _plt
import pandas as pd
from matplotlib.figure import Figure

from . import (
    bcast as _bcast,
    cepheus_fig10 as _fig10,
    cepheus_fig11 as _fig11,
    cepheus_fig12 as _fig12,
    cepheus_fig13 as _fig13,
    cepheus_fig14 as _fig14,
    cepheus_testbed as _testbed,
    lab_bcast as _lab_bcast,
    multicast as _multicast,
    peel as _peel,
    peel_static as _peel_static,
    tmcf_rate as _tmcf_rate,
    ud_latency as _ud_latency,
)
from ._cli import save  # noqa: E402,F401


def _figure(module, what: str) -> Callable[..., Figure]:
    """The public function of a figure module: `f(df, title="", **tables)`; a module
    whose draw takes the table its experiment writes beside the CSV names it SIBLING
    (paper= or phases=)."""
    name = module.__name__.rsplit(".", 1)[-1]
    sibling = getattr(module, "SIBLING", None)

    def draw(df: pd.DataFrame, title: str = "", **tables: Optional[pd.DataFrame]) -> Figure:
        return module.draw(df, title, _plt, **tables)

    draw.__name__ = name
    draw.__doc__ = f"{what}: a Figure from its table (rocast.plot.{name})." + (
        f" `{sibling}=` the experiment's NAME-{sibling} table, overlaid." if sibling else "")
    draw.sibling = sibling  # type: ignore[attr-defined]
    return draw


bcast = _figure(_bcast, "`rocast bcast`'s latency against message size")
cepheus_testbed = _figure(_testbed, "Cepheus Figs 8-9, MPI-Bcast time on the 1 -> 3 testbed and each overlay over Cepheus (the paper's ranges)")
cepheus_fig10 = _figure(_fig10, "Cepheus Fig. 10, 3-replica write latency")
cepheus_fig11 = _figure(_fig11, "Cepheus Fig. 11, HPL panel broadcast and row swap")
cepheus_fig12 = _figure(_fig12, "Cepheus Fig. 12, FCT vs message size against chain and tree")
cepheus_fig13 = _figure(_fig13, "Cepheus Fig. 13, multicast FCT under random loss")
cepheus_fig14 = _figure(_fig14, "Cepheus Fig. 14, three flows' throughput per CNP policy (fair shares dashed)")
lab_bcast = _figure(_lab_bcast, "the namespace lab's broadcast benchmark")
multicast = _figure(_multicast, "the multicast preset, Cepheus vs overlays")
peel = _figure(_peel, "PEEL Figs 4-7, mean and p99 CCT per scheme (the paper's claims as crosses)")
peel_static = _figure(_peel_static, "PEEL Figs 1 and 3")
tmcf_rate = _figure(_tmcf_rate, "TMCF Figs 3-6, the multicast's rate and the fullest queue per policy (fair shares dashed)")
ud_latency = _figure(_ud_latency, "broadcast-select UD multicast latency (Figs 1, 3, 5)")


def with_ci(
    ci: pd.DataFrame, x: str, hue: Optional[str] = None, ylabel: str = "", title: str = ""
) -> Figure:
    """A sweep's means over seeds with their confidence intervals as error bars: `ci`
    is `rocast.ci_over_seeds(df, by=[x, hue], value=…, level=…)` (its `ciNN` column
    names the level)."""
    cols = [c for c in ci.columns if c.startswith("ci") and c[2:].replace(".", "").isdigit()]
    if len(cols) != 1:
        raise ValueError(f"with_ci: expected one ciNN column from rocast.ci_over_seeds, got {cols}")
    col = cols[0]
    fig, ax = _plt.subplots(figsize=(6, 4))
    groups = ci.groupby(hue, sort=True) if hue else [(None, ci)]
    for key, g in groups:
        g = g.sort_values(x)
        err = g[col].fillna(0.0)
        label = f"{hue}={key}" if hue else None
        ax.errorbar(g[x], g["mean"], yerr=err, marker="o", capsize=3, label=label)
    n = int(ci["seeds"].min()) if len(ci) else 0
    ax.set_xlabel(x)
    ax.set_ylabel(f"{ylabel or 'mean'} ({col[2:]}% CI over {n} seeds)")
    ax.grid(alpha=0.3)
    if hue:
        ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return fig


def for_table(name: str) -> Optional[Callable[..., Figure]]:
    """The function that draws the experiment table `name` (e.g. "fig12"), or None: the
    map `rocast sim` uses (the experiment registry, rocast_eval::experiments::plot_for_table)."""
    from .. import _lib

    figure = _lib().figure_for_table(name)
    return None if figure is None else globals()[figure]


def of(result, table: Optional[str] = None, title: Optional[str] = None) -> Figure:
    """Draws a `rocast.sim` result. An experiment: its table `table` (or the first table
    that has a figure) with what the experiment wrote beside it (the paper's points
    `NAME-paper`, the fair shares `NAME-phases`). A flow-level run: its flows' FCT and
    slowdown CDFs (`flows`). A table that does not exist or has no figure: KeyError."""
    title = result.scenario if title is None else title
    if result.kind == "flows":
        if table is not None:
            raise KeyError(f"a flow-level run has no tables (got table={table!r}); plot.of draws its FCTs")
        return flows(result.fct, title)
    drawable = [n for n in result.tables if for_table(n) is not None]
    name = table if table is not None else (drawable[0] if drawable else None)
    if name not in drawable:
        raise KeyError(f"no figure for table {table!r}; drawable: {drawable}")
    draw = for_table(name)
    tables = {} if draw.sibling is None else {draw.sibling: result.tables.get(f"{name}-{draw.sibling}")}
    return draw(result.tables[name], title, **tables)


def flows(fct: pd.DataFrame, title: str = "") -> Figure:
    """A flow-level run's flows (`SimResult.fct`): the CDF of their completion times
    (µs, log axis: FCTs span decades) and of their slowdowns (FCT over the flow alone
    on the fabric). Flows that did not finish are counted in the title."""
    done = fct.dropna(subset=["fct_ns"])
    fig, (a, b) = _plt.subplots(1, 2, figsize=(9, 3.6), constrained_layout=True)
    for ax, values, label in (
        (a, done["fct_ns"] / 1e3, "flow completion time (µs)"),
        (b, done["slowdown"], "slowdown (FCT / FCT alone)"),
    ):
        v = values.sort_values().to_numpy()
        if len(v):
            ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post")
            if v[0] > 0 and v[-1] / v[0] > 10:
                ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of flows")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    missing = len(fct) - len(done)
    fig.suptitle(f"{title}: {len(done)} flows finished" + (f", {missing} did not" if missing else ""), fontsize=9)
    return fig


__all__ = [
    "bcast",
    "cepheus_fig10",
    "cepheus_fig11",
    "cepheus_fig12",
    "cepheus_fig13",
    "cepheus_fig14",
    "cepheus_testbed",
    "flows",
    "for_table",
    "of",
    "lab_bcast",
    "multicast",
    "peel",
    "peel_static",
    "save",
    "tmcf_rate",
    "ud_latency",
    "with_ci",
]
