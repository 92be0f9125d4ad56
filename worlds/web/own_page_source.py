"""Where a user's page comes from, for :class:`worlds.web.own_page.PageWorld`.

A page argument is an HTML file (a path or a ``file://`` URL) or an ``http(s)://`` URL on
``127.0.0.1``, ``localhost`` or ``[::1]`` (:func:`page_source`); a URL is checked to answer before
Chromium is started (:func:`_check_url`). Anything else raises :class:`PageError`.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Hosts a page URL may name."""


class PageError(ValueError):
    """A page that cannot be opened: not an existing file, not a local URL, or a URL that does
    not answer with a page."""


@dataclass(frozen=True)
class PageSource:
    """Where a user's page comes from.

    Attributes:
        kind: ``file`` (an HTML file served by a :class:`LocalFileServer`) or ``url``.
        name: a short name for logs (the file name, or the URL).
        path: the file (``file``).
        url: the URL (``url``).
    """

    kind: Literal["file", "url"]
    name: str
    path: Path | None = None
    url: str | None = None

    # the world's id of the page in log lines (BrowserWorld names tasks by `.id`)
    @property
    def id(self) -> str:
        """The name (BrowserWorld's log lines name a task by its id)."""
        return self.name


def page_source(page: str | Path) -> PageSource:
    """Parse a page argument: a path to an HTML file (or a ``file://`` URL), or an
    ``http(s)://`` URL on 127.0.0.1 / localhost / [::1].

    Raises:
        PageError: the file does not exist, cannot be read or is binary (over 1 % and over 8 NUL bytes in its
            first 8 KiB, without a UTF-16 byte-order mark), or the URL is not local.
    """
    text = str(page)
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if parts.hostname not in LOCAL_HOSTS:
            raise PageError(f"{text}: only local pages are opened (http://127.0.0.1:…, "
                            f"http://localhost:… or http://[::1]:…); got host {parts.hostname!r}")
        return PageSource("url", text, url=text)
    if "://" in text and not text.startswith("file://"):
        raise PageError(f"{text}: a page is an HTML file or an http(s) URL on 127.0.0.1/localhost")
    path = Path(unquote(urlsplit(text).path)) if text.startswith("file://") else Path(text)
    if not path.is_file():
        raise PageError(f"{path}: no such HTML file")
    try:
        with path.open("rb") as fh:
            head = fh.read(8192)
    except OSError as e:
        raise PageError(f"{path}: cannot read the file ({e.strerror or e})") from None
    if head.count(b"\x00") > max(8, len(head) // 100) and not head.startswith((b"\xff\xfe", b"\xfe\xff")):  # no UTF-16 mark
        raise PageError(f"{path}: a binary file, not an HTML page")
    return PageSource("file", path.name, path=path.resolve())


def _check_url(url: str, timeout_s: float = 10.0) -> None:
    """Raise :class:`PageError` unless ``url`` answers a GET with a status below 400."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, method="GET"), timeout=timeout_s) as resp:
            resp.read(1)
    except urllib.error.HTTPError as e:
        raise PageError(f"{url}: the server answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise PageError(f"{url}: cannot load the page ({reason})") from None
