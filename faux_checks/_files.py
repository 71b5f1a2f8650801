"""Records are whole or absent: every file written under a temporary name, synced, checked, then renamed (private).

A full disk, a killed process or a quota stops a write half-way; the file it leaves must never pass
for a record (``report.json`` of 0 bytes and a ``gx_validation.json`` cut mid-way were
logged and tagged ``passed`` + ``deployable``, because a retry saw them and did not rewrite them).
So a record is written to ``.<name>.<random>.tmp`` in its own folder, flushed and ``fsync``-ed, its size
compared with what was written and its content read back (:func:`record_problem`), and only then
renamed over the final name (``os.replace``: atomic on one file system), the folder synced. Any
failure removes the temporary file and raises; the final name then holds the previous whole
version or nothing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import uuid
from pathlib import Path
from typing import Callable, Iterator

__all__ = ["IncompleteRecordError", "TEMP_SUFFIX", "check_records", "record_problem", "refuse_existing",
           "remove_temporaries", "whole_file", "write_whole"]

#: Temporary files end with this (and start with a dot); :func:`remove_temporaries` removes leftovers.
TEMP_SUFFIX = ".tmp"


class IncompleteRecordError(OSError):
    """A record was not written whole: short, unreadable, or not what was meant (an I/O problem: retried)."""

    def __init__(self, message: str):
        super().__init__(errno.EIO, message)

    def __str__(self) -> str:
        assert self.strerror is not None            # set by __init__
        return self.strerror


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}{TEMP_SUFFIX}")


def _write_bytes(path: Path, raw: bytes) -> None:
    """Write ``raw`` to a new file and sync it to disk (the one place bytes of a record are written)."""
    with open(path, "xb") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())


def _sync_folder(folder: Path) -> None:
    """Make a rename durable (best effort: some file systems cannot open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_whole(path: str | Path, data: str | bytes, *, replace: bool = True) -> Path:
    """Write ``data`` to ``path`` whole or not at all (module docstring).

    Parameters
    ----------
    path : str or Path
        Its folder must exist.
    data : str or bytes
        Text is written as UTF-8.
    replace : bool
        Replace an existing file (a retry rewrites, never trusts what an earlier attempt left);
        False refuses one (:class:`FileExistsError`), and a symbolic link at ``path``, dangling or not (never
        written through, never replaced: the file is linked into place, :func:`whole_file`).

    Returns
    -------
    Path

    Raises
    ------
    OSError
        The write failed (e.g. ``ENOSPC``: no space left); :class:`IncompleteRecordError` when the
        file on disk is not what was written (its size, or :func:`record_problem` for its kind).
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if not replace:
        refuse_existing(path)
    with whole_file(path, size=len(raw), replace=replace) as tmp:
        _write_bytes(tmp, raw)
    return path


def refuse_existing(path: str | Path) -> None:
    """Raise :class:`FileExistsError` when anything is at ``path``: a file, a folder or a symbolic link (a dangling
    link too, which :meth:`Path.exists` does not see and ``open`` would write through), naming what it is."""
    path = Path(path)
    if path.is_symlink():
        raise FileExistsError(errno.EEXIST, f"is a symbolic link (to {os.readlink(path)}), and nothing is written "
                              "through a link", str(path))
    if path.exists():
        raise FileExistsError(errno.EEXIST, "exists already", str(path))


def _link_new(tmp: Path, path: Path) -> None:
    """Put ``tmp`` at ``path`` only if nothing is there (a hard link: ``EEXIST`` for a file or link that appeared
    meanwhile), then remove ``tmp``; a file system without hard links takes a checked rename."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        refuse_existing(path)
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        refuse_existing(path)
        os.replace(tmp, path)
        return
    tmp.unlink()


@contextlib.contextmanager
def whole_file(path: str | Path, *, size: int | None = None,
               check: Callable[[Path], str | None] | None = None, replace: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for a writer (``torch.jit.save``, ``to_parquet``); on exit sync
    it, check it and rename it to ``path``; on any error remove it and raise.

    Parameters
    ----------
    size : int, optional
        The byte count the file must have.
    check : callable, optional
        ``Path -> problem or None``; default :func:`record_problem` for the final name's kind.
    replace : bool
        Rename over ``path`` (default); False puts the file there only if nothing is there, a symbolic link
        included (:func:`refuse_existing`: :class:`FileExistsError`).
    """
    path = Path(path)
    tmp = _temporary(path)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:              # a library writer may not have synced it
            os.fsync(fh.fileno())
        found = tmp.stat().st_size
        if size is not None and found != size:
            raise IncompleteRecordError(f"{path}: {found:,} of {size:,} bytes reached the disk; nothing was kept")
        problem = (check or (lambda p: record_problem(p, kind=path.suffix)))(tmp)
        if problem:
            raise IncompleteRecordError(f"{path}: {problem}; nothing was kept")
        if replace:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
        _sync_folder(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def record_problem(path: str | Path, *, kind: str | None = None) -> str | None:
    """Why a record file cannot be used as it is on disk, or None when it reads whole.

    Every record is non-empty; then by kind (its suffix, or ``kind``): ``.json`` parses, ``.html``
    ends with ``</html>``, ``.parquet`` has readable metadata, ``.pt`` (TorchScript, a zip archive)
    has an intact central directory and CRCs, ``.csv`` / ``.toml`` / ``.txt`` decode as UTF-8.
    """
    path = Path(path)
    kind = (kind or path.suffix).lower()
    try:
        size = path.stat().st_size
        if size == 0:
            return "empty (0 bytes)"
        if kind == ".json":
            json.loads(path.read_bytes())
        elif kind == ".html":
            with open(path, "rb") as fh:
                fh.seek(max(0, size - 256))
                if b"</html>" not in fh.read().lower():
                    return "cut short (no closing </html>)"
        elif kind == ".parquet":
            import pyarrow.parquet as pq

            pq.read_metadata(str(path))
        elif kind == ".pt":
            import zipfile

            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
            if bad is not None:
                return f"archive member {bad!r} is damaged"
        elif kind in (".csv", ".toml", ".txt"):
            path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return "missing"
    except Exception as exc:  # noqa: BLE001 - a parser's or reader's own words say what is wrong
        return f"unreadable ({type(exc).__name__}: {str(exc)[:200]})"
    return None


def remove_temporaries(folder: str | Path) -> list[Path]:
    """Remove the temporary files an interrupted write left in ``folder`` (recursively); returns them."""
    removed = []
    for p in Path(folder).rglob(f".*{TEMP_SUFFIX}"):
        if p.is_file():
            with contextlib.suppress(OSError):
                p.unlink()
                removed.append(p)
    return removed


def check_records(folder: str | Path) -> None:
    """Raise :class:`IncompleteRecordError` naming every file under ``folder`` that does not read whole.

    Run before a decision is logged and tagged: what the registry then points at is whole.
    """
    folder = Path(folder)
    problems = [f"{p.relative_to(folder)}: {problem}" for p in sorted(folder.rglob("*"))
                if p.is_file() and not p.name.endswith(TEMP_SUFFIX) for problem in [record_problem(p)] if problem]
    if problems:
        raise IncompleteRecordError(f"records in {folder} are not whole: {'; '.join(problems)}")
