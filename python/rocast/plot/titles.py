"""The title a docs/repro figure carries: its id, paper and figure, from the folder's
provenance.json (what `rocast repro` wrote)."""

import json
from pathlib import Path


def repro_title(folder) -> str:
    """`cepheus-fig10: Cepheus (HPCA 2024), Fig. 10` for docs/repro/cepheus-fig10."""
    folder = Path(folder)
    try:
        p = json.loads((folder / "provenance.json").read_text())
        return f"{p['figure']}: {p['paper']}, {p['paper_figure']}"
    except (OSError, ValueError, KeyError):
        return folder.name
