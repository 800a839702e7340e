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


def _wrap(module, name: str, what: str) -> Callable[..., Figure]:
    def draw(df: pd.DataFrame, title: str = "") -> Figure:
        return module.draw(df, title, _plt)

    draw.__name__ = name
    draw.__doc__ = f"{what}: a Figure from its table (see rocast.plot.{module.__name__.split('.')[-1]})."
    return draw


cepheus_fig10 = _wrap(_fig10, "cepheus_fig10", "Cepheus Fig. 10, 3-replica write latency")
cepheus_fig11 = _wrap(_fig11, "cepheus_fig11", "Cepheus Fig. 11, HPL panel broadcast and row swap")
cepheus_fig12 = _wrap(_fig12, "cepheus_fig12", "Cepheus Fig. 12, FCT vs message size against chain and tree")
cepheus_fig13 = _wrap(_fig13, "cepheus_fig13", "Cepheus Fig. 13, multicast FCT under random loss")
multicast = _wrap(_multicast, "multicast", "the multicast preset, Cepheus vs overlays")
peel_static = _wrap(_peel_static, "peel_static", "PEEL Figs 1 and 3")
ud_latency = _wrap(_ud_latency, "ud_latency", "broadcast-select UD multicast latency (Figs 1, 3, 5)")
bcast = _wrap(_bcast, "bcast", "`rocast bcast`'s latency against message size")
lab_bcast = _wrap(_lab_bcast, "lab_bcast", "the namespace lab's broadcast benchmark")


def peel(df: pd.DataFrame, title: str = "", paper: Optional[pd.DataFrame] = None) -> Figure:
    """PEEL Figs 4-7 (mean and p99 CCT per scheme); `paper` is the experiment's
    peel-figN-paper table, overlaid as crosses."""
    return _peel.draw(df, title, _plt, paper)


def with_ci(
    ci: pd.DataFrame, x: str, hue: Optional[str] = None, ylabel: str = "", title: str = ""
) -> Figure:
    """A sweep's means over seeds with their 95% confidence intervals as error bars:
    `ci` is `rocast.ci_over_seeds(df, by=[x, hue], value=…)`."""
    fig, ax = _plt.subplots(figsize=(6, 4))
    groups = ci.groupby(hue, sort=True) if hue else [(None, ci)]
    for key, g in groups:
        g = g.sort_values(x)
        err = g["ci95"].fillna(0.0)
        label = f"{hue}={key}" if hue else None
        ax.errorbar(g[x], g["mean"], yerr=err, marker="o", capsize=3, label=label)
    n = int(ci["seeds"].min()) if len(ci) else 0
    ax.set_xlabel(x)
    ax.set_ylabel(f"{ylabel or 'mean'} (95% CI over {n} seeds)")
    ax.grid(alpha=0.3)
    if hue:
        ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return fig


def cepheus_testbed(df: pd.DataFrame, title: str = "", paper: Optional[pd.DataFrame] = None) -> Figure:
    """Cepheus Figs 8-9 (MPI-Bcast time on the 1 -> 3 testbed, and each overlay over
    Cepheus); `paper` is the experiment's testbed-paper table (the paper's ranges)."""
    return _testbed.draw(df, title, _plt, paper)


def cepheus_fig14(df: pd.DataFrame, title: str = "", phases: Optional[pd.DataFrame] = None) -> Figure:
    """Cepheus Fig. 14 (three flows' throughput per CNP policy); `phases` is the
    experiment's fairness-phases table, whose fair shares are drawn dashed."""
    return _fig14.draw(df, title, _plt, phases)


def tmcf_rate(df: pd.DataFrame, title: str = "", phases: Optional[pd.DataFrame] = None) -> Figure:
    """TMCF Figs 3-6 (the multicast's rate and the fullest queue per policy); `phases` is
    the experiment's tmcf-*-phases table, whose fair shares are drawn dashed."""
    return _tmcf_rate.draw(df, title, _plt, phases)


_BY_TABLE = {
    "bcast": bcast,
    "fairness": cepheus_fig14,
    "testbed": cepheus_testbed,
    "fig10": cepheus_fig10,
    "fig11": cepheus_fig11,
    "fig12": cepheus_fig12,
    "loss": cepheus_fig13,
    "multicast": multicast,
    "peel-fig1": peel_static,
    "peel-fig3": peel_static,
    "peel-fig4": peel,
    "peel-fig5": peel,
    "peel-fig6": peel,
    "peel-fig7": peel,
    "tmcf-cpmp": tmcf_rate,
    "tmcf-moving": tmcf_rate,
    "ud-latency": ud_latency,
}


def for_table(name: str) -> Optional[Callable[..., Figure]]:
    """The function that draws the experiment table `name` (e.g. "fig12"), or None."""
    return _BY_TABLE.get(name)


def of(result, table: Optional[str] = None, title: Optional[str] = None) -> Figure:
    """Draws an experiment's table from a `rocast.sim` result with what the experiment
    wrote beside it (the paper's points `NAME-paper`, the fair shares `NAME-phases`):
    `table` names it, or the first table that has a figure."""
    names = [table] if table is not None else [n for n in result.tables if n in _BY_TABLE]
    if not names or names[0] not in result.tables or names[0] not in _BY_TABLE:
        raise KeyError(f"no figure for table {table!r}; drawable: "
                       f"{[n for n in result.tables if n in _BY_TABLE]}")
    name = names[0]
    draw = _BY_TABLE[name]
    title = result.scenario if title is None else title
    df = result.tables[name]
    if draw in (peel, cepheus_testbed):
        return draw(df, title, paper=result.tables.get(f"{name}-paper"))
    if draw in (tmcf_rate, cepheus_fig14):
        return draw(df, title, phases=result.tables.get(f"{name}-phases"))
    return draw(df, title)


__all__ = [
    "bcast",
    "cepheus_fig10",
    "cepheus_fig11",
    "cepheus_fig12",
    "cepheus_fig13",
    "cepheus_fig14",
    "cepheus_testbed",
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
