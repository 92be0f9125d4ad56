"""Serving a user's HTML file, with the files next to it, on 127.0.0.1 (:class:`LocalFileServer`).

GET and HEAD only, no directory listings, never another interface; used by
:class:`worlds.web.own_page.PageWorld` for a page given as a file.
"""

from __future__ import annotations

import logging
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

from forms_bench.server import serve_in_thread, stop_serving

# PageWorld's logger: its records keep the name they had when this code was part of
# worlds/web/own_page.py.
log = logging.getLogger("worlds.web.own_page")

HOST = "127.0.0.1"


class _FileHandler(SimpleHTTPRequestHandler):
    """GET/HEAD of files under one folder; no listings; other methods 405."""

    server_version = "advsim-pages"
    sys_version = ""

    def list_directory(self, path):  # noqa: D401 - stdlib hook
        self.send_error(404, "directory listings are not served")
        return None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("file server: " + format, *args)

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def _refuse(self) -> None:
        self.send_error(405, f"{self.command} is not handled: this server only serves the page's files")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse


class LocalFileServer:
    """Serves the files of one folder on ``http://127.0.0.1:<port>`` (an ephemeral port; never
    another interface), GET and HEAD only, without directory listings, from a daemon thread.

    Args:
        root: the folder.

    Raises:
        NotADirectoryError: ``root`` is not a folder (from :meth:`start`).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "LocalFileServer":
        """Bind 127.0.0.1 and serve. Idempotent; returns self."""
        if self._httpd is not None:
            return self
        if not self.root.is_dir():
            raise NotADirectoryError(f"{self.root}: not a folder")
        httpd = ThreadingHTTPServer((HOST, 0), partial(_FileHandler, directory=str(self.root)))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = serve_in_thread(httpd, "LocalFileServer")
        return self

    def stop(self) -> None:
        """Stop serving. Idempotent."""
        httpd, self._httpd = self._httpd, None
        stop_serving(httpd, self._thread)
        self._thread = None

    @property
    def running(self) -> bool:
        """Whether it serves."""
        return self._httpd is not None

    def url(self, path: str | Path) -> str:
        """The URL of a file under the folder.

        Raises:
            RuntimeError: not started. ValueError: ``path`` is not under the folder.
        """
        if self._httpd is None:
            raise RuntimeError("LocalFileServer is not running; call start()")
        rel = Path(path).resolve().relative_to(self.root)
        return f"http://{HOST}:{self._httpd.server_address[1]}/{quote(rel.as_posix())}"
