"""Type stubs of rocast's compiled module (crates/py); use the wrappers in `rocast`."""

from os import PathLike
from typing import Any, Dict, List, Optional, Tuple, Union

__version__: str

def presets() -> List[Tuple[str, str]]: ...
def preset_toml(name: str) -> str: ...
def sim(
    preset: Optional[str] = None,
    toml: Optional[str] = None,
    base: Optional[Union[str, PathLike[str]]] = None,
    sets: List[str] = ...,
) -> Dict[str, Any]: ...
def figure_for_table(table: str) -> Optional[str]: ...
def tree(
    topo: str = "fat-tree:k=8",
    src: int = 0,
    dst: str = "random:16",
    algo: str = "peel",
    fail: float = 0.0,
    seed: int = 1,
    exact_time_limit: float = 120.0,
) -> str: ...
