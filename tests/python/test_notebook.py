"""examples/*.ipynb run top to bottom in a fresh kernel (nbclient), every cell without
an error, and every plot cell leaves an image: the notebook is documentation that CI
keeps true."""

from pathlib import Path

import nbclient
import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "examples").glob("*.ipynb"))


def test_there_is_a_notebook():
    assert NOTEBOOKS, "examples/ has no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    # A deadline on every cell; the kernel runs in a scratch directory.
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    plots = [c for c in nb.cells if c.cell_type == "code" and "rocast.plot." in c.source]
    assert plots
    for cell in plots:
        images = [o for o in cell.outputs if o.output_type == "display_data" and "image/png" in o.data]
        assert images, f"no figure from: {cell.source[:60]}"
