"""What the simulator is: its release, and a digest of the code and schemas that compute its
figures, so that a stored result can tell whether this simulator would give the same one."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "gddr6-roofline-sim"
_PACKAGE = Path(__file__).resolve().parent


@cache
def release() -> str:
    """The installed distribution's version; a checkout not installed says so."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def digested_files() -> list[Path]:
    """Every module, schema and fitted coefficient file of the package (gpu/
    library_efficiency.json); not the shipped hardware and workloads, which a point digests
    itself."""
    return sorted(p for pattern in ("*.py", "*.json") for p in _PACKAGE.rglob(pattern)
                  if "_data" not in p.relative_to(_PACKAGE).parts)


@cache
def model_digest() -> str:
    """SHA-256 of digested_files(): any edit to how figures are computed, a refit of the
    model's coefficients included, changes it, where a release number may not."""
    h = hashlib.sha256()
    for p in digested_files():
        h.update(p.relative_to(_PACKAGE).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def describe() -> str:
    """For `--version`: the release and the code digest it was computed with."""
    return f"{DISTRIBUTION} {release()} (model {model_digest()[:12]})"
