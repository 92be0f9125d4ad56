"""``--json FILE`` for every ``advsim`` command: the path is checked before any work starts and
written atomically afterwards; a bad path is a one-line error (exit 2), never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer


def check_output_path(path: Optional[Path]) -> Optional[Path]:
    """Typer callback for ``--json``: ``path`` must be a file path whose nearest existing ancestor is a
    writable directory (missing parent folders are created on writing), and not an existing directory.
    A symbolic link is judged by its target (:func:`forms_bench.atomic.atomic_write_bytes` replaces
    the target, not the link); an existing non-regular file (``/dev/stdout``, a pipe) must be writable.

    Raises:
        typer.BadParameter: ``path`` is a directory, lies under an existing file, or its nearest
            existing folder is not writable.
    """
    if path is None:
        return None
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a directory; give a file name, e.g. {path / 'out.json'}")
    from forms_bench.atomic import written_in_place

    if written_in_place(path):  # /dev/stdout, a pipe: appended to in place
        if not os.access(path, os.W_OK):
            raise typer.BadParameter(f"{path} is not writable")
        return path
    target = Path(os.path.realpath(path)) if path.is_symlink() else path  # the write goes to a link's target
    parent = target.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise typer.BadParameter(f"{path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise typer.BadParameter(f"{path}: the folder {parent} is not writable")
    return path


def json_option(help: str = "also write the numbers as JSON") -> Any:
    """The ``--json FILE`` option, checked by :func:`check_output_path` before the command runs."""
    return typer.Option(None, "--json", help=help, callback=check_output_path)


def write_json(path: Optional[Path], payload: Any, **dumps: Any) -> None:
    """Write ``payload`` as JSON to ``path`` atomically (nothing if ``path`` is None) and say so.

    Raises:
        typer.Exit: code 2, after printing ``error: cannot write PATH: …``, when the file system
            refuses the write (e.g. a read-only or full disk).
    """
    if path is None:
        return
    from forms_bench.atomic import atomic_write_text

    try:
        atomic_write_text(path, json.dumps(payload, **{"indent": 2, "sort_keys": True, **dumps}))
    except OSError as exc:
        typer.echo(f"error: cannot write {path}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2)
    typer.echo(f"wrote {path}")
