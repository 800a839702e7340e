"""rocast's figures, drawn in the papers' forms from rocast's tables.

Each function takes the DataFrame an experiment produces (`rocast.sim(preset).tables[...]`,
or the CSV `rocast sim --preset …` writes) and returns a matplotlib Figure; where the
paper gives numbers, they are overlaid (black crosses or dashed lines, labelled
"paper"). `save(fig, "x.png")` writes PNG and SVG. `for_table(name)` names the
function that draws a table, as `rocast sim` chooses.

The same modules are the plot commands `rocast sim` runs (`python -m rocast.plot.peel
DATA.csv OUT.png TITLE`, or the shims python/plot_*.py).
"""

from __future__ import annotations

from typing import Callable, Optional

import matplotlib.pyplot as _plt
import pandas as pd
from matplotlib.figure import Figure

from . import (  # noqa: E402
    cepheus_fig10 as _fig10,
    cepheus_fig11 as _fig11,
    cepheus_fig12 as _fig12,
    cepheus_fig13 as _fig13,
    cepheus_fig14 as _fig14,
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
cepheus_fig14 = _wrap(_fig14, "cepheus_fig14", "Cepheus Fig. 14, multicast vs unicast fairness")
multicast = _wrap(_multicast, "multicast", "the multicast preset, Cepheus vs overlays")
peel_static = _wrap(_peel_static, "peel_static", "PEEL Figs 1 and 3")
tmcf_rate = _wrap(_tmcf_rate, "tmcf_rate", "TMCF Figs 3-6, sending rate and queues")
ud_latency = _wrap(_ud_latency, "ud_latency", "broadcast-select UD multicast latency (Figs 1, 3, 5)")
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


_BY_TABLE = {
    "fairness": cepheus_fig14,
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


__all__ = [
    "cepheus_fig10",
    "cepheus_fig11",
    "cepheus_fig12",
    "cepheus_fig13",
    "cepheus_fig14",
    "for_table",
    "lab_bcast",
    "multicast",
    "peel",
    "peel_static",
    "save",
    "tmcf_rate",
    "ud_latency",
    "with_ci",
]
