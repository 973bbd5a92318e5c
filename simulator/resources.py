"""Where the shipped hardware and workload files are: the checkout, or the installed package.

In a checkout they sit at the repo root (`hardware/`, `workloads/`); a wheel carries the same files
as `simulator._data.hardware` and `simulator._data.workloads` (see pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

_REPO_ROOT = Path(__file__).resolve().parent.parent


def _data_dir(kind: str) -> Traversable:
    checkout = _REPO_ROOT / kind
    if checkout.is_dir() and (_REPO_ROOT / "pyproject.toml").is_file():
        return checkout
    from importlib import resources  # only outside a checkout (saves start-up time)

    return resources.files(f"simulator._data.{kind}")


def hardware_dir() -> Traversable:
    return _data_dir("hardware")


def workloads_dir() -> Traversable:
    return _data_dir("workloads")


def shipped_names(directory: Traversable) -> list[str]:
    return sorted(p.name[:-5] for p in directory.iterdir()
                  if p.name.endswith(".json") and p.is_file())


def shipped_file(directory: Traversable, name: str) -> Path | None:
    """The shipped file for `name` as a real path, or None."""
    entry = directory.joinpath(f"{name}.json")
    if not entry.is_file():
        return None
    return Path(str(entry))
