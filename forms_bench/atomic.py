"""Atomic file writes for every package (temporary file + fsync + rename + fsync of the folder),
appends to JSONL logs that never rewrite earlier bytes (:func:`append_jsonl`: fsync per append, a
crash leaves at most a torn last line that readers drop and the next append removes), and files
checked against a recorded SHA-256 (:func:`write_checksummed`, :func:`read_checksummed`: the frozen form
test set, the ledger suite and any suite file ``worlds.ledger.suite.load_suite`` verifies).

It lives in the lowest package, ``forms_bench``, so that every other package may import it
without breaking the one-way dependency rule of DESIGN.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable


def umask() -> int:
    """The process's umask. Read from ``/proc/self/status`` where Linux gives it (no change to
    the process at all); elsewhere ``os.umask`` set and restored at once (a thread creating a file
    in that instant would get mode 0o666)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask



def fsync_tree(folder: str | os.PathLike) -> None:
    """fsync every regular file under ``folder`` and every folder in it, ``folder`` included
    (deepest first), so a folder written in full and then renamed into place is on disk before the
    rename is. Symlinks are not followed."""
    for root, _dirs, files in os.walk(folder, topdown=False):
        for name in files:
            f = os.path.join(root, name)
            if os.path.isfile(f) and not os.path.islink(f):
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        _fsync_dir(Path(root))


def _fsync_dir(folder: Path) -> None:
    """fsync the folder ``folder`` so that a rename or a new file in it survives a power loss
    (POSIX: a file's data and its directory entry are made durable separately). A platform that
    cannot open a folder for fsync (Windows) skips it."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def written_in_place(path: str | os.PathLike) -> bool:
    """Whether :func:`atomic_write_bytes` writes ``path`` in place instead of renaming over it:
    a path under ``/dev/`` or ``/proc/`` (``/dev/stdout`` leads to the process's own descriptor,
    whatever file or pipe it is), or one that exists and is not a regular file or folder once
    links are followed (a named pipe, a socket, a device)."""
    text = os.path.abspath(os.fspath(path))
    if text.startswith(("/dev/", "/proc/")):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, fsync, rename,
    fsync of the folder.

    A reader sees either the old file or the complete new one, never a partial write; a killed
    process leaves at most a stray ``.tmp`` file; once this returns, the new file is on disk,
    rename included. Parent folders are created. Returns the path.

    A symbolic link is followed: its target is replaced, the link stays. A path that
    :func:`written_in_place` names (``/dev/stdout``, ``/dev/fd/N``, a named pipe, a terminal)
    cannot be replaced by a rename and is appended to directly, in one ``write`` call.

    Raises:
        IsADirectoryError: ``path`` (or the link's target) is a folder.
    """
    path = Path(path)
    if written_in_place(path):
        with open(path, "ab") as fh:  # append: a redirected stdout keeps what was printed before
            fh.write(data)
        return path
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give a file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented, key-sorted JSON, atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _drop_torn_tail(fh, block: int = 1 << 16) -> None:
    """Truncate the open binary file ``fh`` just after its last ``\n`` when it does not end in
    one (the fragment a crash in the middle of an append leaves); reads backwards from the end in
    blocks of ``block`` bytes, never the whole file. A file with no ``\n`` at all is emptied."""
    size = fh.seek(0, os.SEEK_END)
    if size == 0:
        return
    fh.seek(size - 1)
    if fh.read(1) == b"\n":
        return
    end = size
    cut = 0
    while end > 0:
        start = max(0, end - block)
        fh.seek(start)
        i = fh.read(end - start).rfind(b"\n")
        if i >= 0:
            cut = start + i + 1
            break
        end = start
    fh.truncate(cut)


def append_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> Path:
    """Append ``rows`` to the JSONL file ``path`` in time linear in the rows, not the file.

    The rows are serialised first (``json.dumps`` with sorted keys, non-ASCII kept, one per
    line, each ending in ``\n``), so a row that cannot be serialised raises before the file is
    touched. Then the file (created, with its parent folders, if missing) is opened in append
    mode, a torn fragment at its end is truncated (see below), the whole chunk is written with
    one ``write`` call, and the file is flushed and ``os.fsync``-ed before this returns.

    What is guaranteed: once this returns, the rows are on disk. The earlier bytes of the file
    are never rewritten (same inode, same prefix). A crash during the write can leave only a
    *torn tail*: zero or more of the new rows complete, then one last fragment without its
    terminating ``\n``. A line is therefore either fully present (``\n``-terminated) or that
    final fragment, which readers must drop (:meth:`advsim.run.RunDir.read` does) and which the
    next append truncates before writing. This is not all-or-nothing for a batch of rows: a
    crash may keep some rows of the batch and lose the rest (the caller's checkpoint records
    how many rows count; ``advsim.run.RunDir.rollback_logs`` drops the others on resume).
    Single writer only: concurrent appenders to one file are not supported. "Crash" means the
    process dying (SIGKILL, OOM); after a power loss the same holds where the file system writes
    a file's data before its new size (ext4's default ``data=ordered``). When the append creates the
    file, its folder is fsync-ed too (as in :func:`atomic_write_bytes`). Returns ``path``.
    """
    path = Path(path)
    chunk = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    with open(path, "a+b") as fh:  # O_APPEND: every write lands at the end, whatever the position
        _drop_torn_tail(fh)
        if chunk:
            fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    if created:
        _fsync_dir(path.parent)
    return path


class ChecksumError(ValueError):
    """A file does not match its recorded SHA-256, or the record is missing."""


def checksum_path(path: str | os.PathLike) -> Path:
    """Where ``path``'s SHA-256 is recorded: ``<path>.sha256`` (``<hex>  <name>``, sha256sum's format)."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def write_checksummed(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` and its SHA-256 to :func:`checksum_path`, each atomically
    (data first: a crash between the two leaves a mismatch that :func:`read_checksummed` reports,
    never a silently accepted file). Returns ``path``."""
    path = Path(path)
    atomic_write_bytes(path, data)
    atomic_write_text(checksum_path(path), f"{hashlib.sha256(data).hexdigest()}  {path.name}\n")
    return path


def read_checksummed(path: str | os.PathLike) -> bytes:
    """The bytes of ``path``, checked against the SHA-256 recorded beside it.

    Raises:
        ChecksumError: the record is missing, or the file's SHA-256 differs from it (the message
            names the file and both digests' first 16 hex digits).
        OSError: ``path`` cannot be read.
    """
    path = Path(path)
    raw = path.read_bytes()
    ck = checksum_path(path)
    if not ck.exists():
        raise ChecksumError(f"{path.name}: checksum file {ck.name} is missing")
    want = ck.read_text(encoding="utf-8").split()[0]
    got = hashlib.sha256(raw).hexdigest()
    if got != want:
        raise ChecksumError(f"{path.name}: sha256 {got[:16]}… does not match the recorded {want[:16]}…")
    return raw
