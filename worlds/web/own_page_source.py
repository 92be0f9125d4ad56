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
        PageError: the file does not exist, cannot be read, is binary (over 1 % and over 8 NUL bytes in
            its first 8 KiB, without a UTF-16 byte-order mark) or too large to observe
            (:func:`check_page_shape`), or the URL is not local.
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
    check_page_shape(path)
    return PageSource("file", path.name, path=path.resolve())


MAX_PAGE_ELEMENTS = 20_000
"""Most elements an HTML file may have: Chromium's accessibility tree of a page with 20,000
labelled inputs (~40,000 elements) did not come back within the browser world's restarts (~100 s
each try); 4,000 fields took 20 s."""
MAX_PAGE_DEPTH = 512
"""Deepest element nesting: Chromium's HTML parser stops nesting at 512 levels and a page of
100,000 nested ``<div>`` hung its accessibility tree."""


def check_page_shape(path: Path | bytes, name: str | None = None) -> None:
    """Refuse a page the browser world cannot observe, in linear time and before Chromium
    starts: more than :data:`MAX_PAGE_ELEMENTS` elements or nesting deeper than
    :data:`MAX_PAGE_DEPTH` (as parsed by lxml; scripts that build the page later are not counted).

    Args:
        path: an HTML file, or a page's bytes (what a local URL served).
        name: how messages name the page (default: the path; "the page" for bytes).

    Raises:
        PageError: naming the count or depth found.
    """
    import io

    from lxml import etree
    from lxml import html as lhtml

    path_name = name or ("the page" if isinstance(path, bytes) else str(path))
    try:
        src = io.BytesIO(path) if isinstance(path, bytes) else str(path)
        root = lhtml.parse(src, parser=lhtml.HTMLParser(huge_tree=True)).getroot()
    except (etree.ParserError, etree.XMLSyntaxError, OSError, ValueError):
        return  # an empty or unparsable page: Chromium shows what it can, as for any page
    if root is None:
        return
    n, stack = 0, [(root, 1)]
    while stack:
        el, depth = stack.pop()
        n += 1
        if n > MAX_PAGE_ELEMENTS:
            raise PageError(f"{path_name}: over {MAX_PAGE_ELEMENTS:,} elements; the browser world observes pages "
                            "up to that size (split the form, or serve a smaller page)")
        if depth > MAX_PAGE_DEPTH:
            raise PageError(f"{path_name}: elements nested over {MAX_PAGE_DEPTH} deep; Chromium stops nesting there")
        stack.extend((c, depth + 1) for c in el)


MAX_PAGE_BYTES = 64 * 2**20
"""Most bytes a local URL may serve as its page (its shape is checked as an HTML file's is)."""


def _check_url(url: str, timeout_s: float = 10.0) -> None:
    """Raise :class:`PageError` unless ``url`` answers a GET with a status below 400 and a page
    the browser world can observe: at most :data:`MAX_PAGE_BYTES` bytes and the element count
    and depth of :func:`check_page_shape` (the page as served, before its scripts run)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, method="GET"), timeout=timeout_s) as resp:
            body = resp.read(MAX_PAGE_BYTES + 1)
    except urllib.error.HTTPError as e:
        raise PageError(f"{url}: the server answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise PageError(f"{url}: cannot load the page ({reason})") from None
    if len(body) > MAX_PAGE_BYTES:
        raise PageError(f"{url}: the page is over {MAX_PAGE_BYTES:,} bytes; the browser world observes pages "
                        "up to that size")
    check_page_shape(body, name=url)
