"""Where the shipped hardware, host and workload files are: the checkout, or the installed
package.

In a checkout they sit at the repo root (`hardware/`, `hosts/`, `workloads/`); a wheel carries
the same files as `simulator._data.hardware`, `.hosts` and `.workloads` (see pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_REPO_ROOT = _PACKAGE.parent


def _data_dir(kind: str) -> Path:
    """A plain folder either way: the wheel installs its data as files beside the modules
    (importlib.resources would hand back a MultiplexedPath for these namespace folders, whose
    joinpath takes one part on Python 3.10 and 3.11)."""
    checkout = _REPO_ROOT / kind
    if checkout.is_dir() and (_REPO_ROOT / "pyproject.toml").is_file():
        return checkout
    return _PACKAGE / "_data" / kind


def hardware_dir() -> Path:
    return _data_dir("hardware")


def workloads_dir() -> Path:
    return _data_dir("workloads")


def hosts_dir() -> Path:
    return _data_dir("hosts")


def shipped_names(directory: Path) -> list[str]:
    return sorted(p.name[:-5] for p in directory.iterdir()
                  if p.name.endswith(".json") and p.is_file())


TIMING = "timing"  # hardware/timing/: named GDDR6 timing sets


def timing_preset(spec: str, beside: Path) -> Path:
    """A timing preset a hardware file names: a shipped one by name, else a path relative to
    the hardware file's folder (`beside`)."""
    from simulator.errors import InputError

    shipped = hardware_dir() / TIMING
    if "/" not in spec and "\\" not in spec and not spec.endswith(".json"):
        path = shipped / f"{spec}.json"
        if not path.is_file():
            raise InputError(f"unknown timing preset '{spec}'; expected a path to a .json file "
                             f"or one of: {', '.join(shipped_names(shipped))}",
                             path="$.memory.timing.preset")
        return path
    return beside / spec


def resolve(kind: str, spec: str) -> Path:
    """What a user's `spec` names among `kind` ('hardware', 'hosts' or 'workloads'): an
    existing file; else the shipped file it names: `NAME`, `NAME.json` or `KIND/...json` (so
    the repo-relative form works outside the checkout). A missing path comes back as given:
    reading it says so."""
    from simulator.errors import InputError

    path = Path(spec)
    if path.is_file():
        return path
    parts = path.parts[1:] if path.parts[:1] == (kind,) else path.parts
    if len(parts) == 1 and not parts[0].endswith(".json") and "\\" not in spec:
        parts = (parts[0] + ".json",)
    entry = _data_dir(kind).joinpath(*parts) if parts else None
    if entry is not None and parts[-1].endswith(".json") and entry.is_file():
        return entry
    if not spec.endswith(".json") and "/" not in spec and "\\" not in spec:
        what = {"hosts": "host", "workloads": "workload"}.get(kind, kind)
        names = ", ".join(shipped_names(_data_dir(kind)))
        raise InputError(f"unknown {what} '{spec}'; expected a path to a .json file or one of: "
                         f"{names}")
    return path
