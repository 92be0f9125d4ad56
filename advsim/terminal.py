"""The product's console output (rich): one place that decides how it looks off a terminal."""

from __future__ import annotations

import os

from rich.console import Console


def make_console() -> Console:
    """A :class:`rich.console.Console` for advsim's phase lines and tables.

    On a terminal, rich's defaults. Written to a file or a pipe (a log, a device machine's output)
    and without ``COLUMNS`` set: 132 columns instead of rich's 80, which wrapped every phase line
    and cut table headers, and no ``file.py:line`` column on ``Console.log`` lines, so each is one
    grep-able line."""
    console = Console()
    if console.is_terminal or "COLUMNS" in os.environ:
        return console
    return Console(width=132, log_path=False)
