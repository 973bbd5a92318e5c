"""One error type for bad input, so the CLI can print it plainly and exit 2; and outputs
named by what was asked for when they cannot be staged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def json_path(parts) -> str:
    """Render a path such as ('memory', 'timing', 0) as `$.memory.timing[0]`."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class InputError(Exception):
    """Bad user input: names the file, the JSON path inside it, and what was expected."""

    def __init__(self, message: str, *, file: str | None = None, path: str | None = None):
        self.file = file
        self.path = path
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ": ".join(p for p in (self.file, f"at {self.path}" if self.path else None) if p)
        return f"{where}: {self.message}" if where else self.message

    def in_file(self, file: str) -> InputError:
        """The same error, attributed to `file` when it had no file yet."""
        return self if self.file else InputError(self.message, file=file, path=self.path)


def open_input(path: Path, expected: str, binary: bool = False) -> IO:
    """Open a file the user named for reading; the ways that fail become InputErrors."""
    try:
        return path.open("rb") if binary else path.open(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except IsADirectoryError:
        raise InputError(f"expected {expected}, got a directory", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc}", file=str(path)) from None


def check_folder(folder: Path, writing: str) -> None:
    """A folder to write into, made if need be: it, or the nearest part of it that exists,
    must be a folder (else the OS says "File exists" or "Not a directory"). `writing` names
    what goes there, for the message: "--out DIR", or a file."""
    folder = Path(folder)
    nearest = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if nearest is not None and not nearest.is_dir():
        raise InputError(f"expected a directory for {writing}, got a file", file=str(nearest))


@contextmanager
def staged_beside(target: Path) -> Iterator[None]:
    """Making a temporary file or folder beside an output: a failure (no folder can be made
    there, no permission) names the output asked for, not the temporary name."""
    try:
        yield
    except OSError as exc:
        check_folder(Path(target).parent, str(target))
        raise OSError(exc.errno, exc.strerror, str(target)) from None
