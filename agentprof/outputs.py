"""Output files of the CLI: the suffix of ``-o`` picks (or must agree with) the format, and a path that cannot
be created or written is one ``error:`` line, never a traceback."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from agentprof.errors import AgentprofError

T = TypeVar("T")


def checked_output(path: str | os.PathLike[str], suffixes: tuple[str, ...], what: str,
                   bare_ok: bool = False) -> Path:
    """``path`` when its suffix is one of ``suffixes`` (lower case, with the dot), else a one-line error
    naming the ones that work; ``bare_ok`` accepts a name without a suffix. The parent folder is created."""
    out = Path(path)
    name = out.name.lower()
    if not any(name.endswith(s) for s in suffixes) and not (bare_ok and not out.suffix):
        raise AgentprofError(f"{out}: the file name's suffix picks the format; for {what} use "
                             f"{' or '.join(suffixes)}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise AgentprofError(f"{out}: cannot write: cannot create its folder ({e.strerror or e})") from None
    if out.is_dir():
        raise AgentprofError(f"{out}: is a folder; give a file name")
    return out


def unwritable_folder(folder: Path) -> str | None:
    """Why ``folder`` could not be created or written (``None`` when it can), found without creating anything:
    the nearest existing ancestor must be a writable folder."""
    p = folder.absolute()
    while not p.exists():
        if p.is_symlink():
            return "a broken symbolic link on the way"
        p = p.parent
    if not p.is_dir():
        return f"{p} is a file, not a folder"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{p} is not writable"
    return None


@contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn any failure to write ``path`` (permissions, a full disk, a read-only file system) into one line."""
    try:
        yield
    except AgentprofError:
        raise
    except OSError as e:
        raise AgentprofError(f"{path}: cannot write: {e.strerror or e}") from None
    except Exception as e:  # writers of other libraries (Parquet) wrap the OS error in their own types
        if "os error" in str(e).lower() or "permission" in str(e).lower() or "no such file" in str(e).lower():
            raise AgentprofError(f"{path}: cannot write: {str(e).splitlines()[0][:300]}") from None
        raise


def write_with(path: str | os.PathLike[str], write: Callable[[], T]) -> T:
    """``write()`` under :func:`writing`."""
    with writing(path):
        return write()
