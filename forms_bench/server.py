"""Local page server of the form benchmark: serves task pages and records what happens on them.

The server binds ``127.0.0.1`` on an ephemeral port (never another interface) and runs in a
daemon thread of the calling process (stdlib :class:`http.server.ThreadingHTTPServer`).

Routes:

``GET /task/<task_id>[?session=<sid>]``
    The task's page (:func:`forms_bench.html.render_html`), ``text/html; charset=utf-8``. With
    ``?session=`` the page's inline script reports every field change and control activation to
    ``POST /api/events``.
``POST /api/events?task=<task_id>&session=<sid>``
    One event as a JSON object: ``{"seq": n, "kind": "change", "key": k, "value": v}`` or
    ``{"seq": n, "kind": "activate", "key": c, "values": {field: value, ...}}``. ``seq`` is the
    page's own counter (0, 1, 2, ...), so events are stored in page order even when requests
    overtake each other. Re-sending an identical event is accepted (idempotent); a different
    event under an already used ``seq`` is a conflict (409).
``GET /api/events?task=<task_id>&session=<sid>``
    ``{"task": ..., "session": ..., "events": [...]}`` with the events in ``seq`` order (an
    unknown session of a known task has no events yet: an empty list).

Every error is a JSON object ``{"error": "<message>"}`` with a 4xx status: 400 malformed
request (bad JSON, missing ``task``/``session``, bad ``seq``), 404 unknown task or route, 405
wrong method, 409 ``seq`` conflict, 411 missing ``Content-Length``, 413 body larger than
``max_body_bytes``, 414 URL too long, 415 wrong content type, 422 event that does not fit the
task (unknown field or control, value of the wrong type), 429 too many events in one session.
A handler never takes the server down; idle connections time out after ``timeout_s``.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections import OrderedDict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping
from urllib.parse import parse_qs, quote, unquote, urlsplit

from forms_bench.html import render_html
from forms_bench.schema import Task
from forms_bench.unique_keys import loads

log = logging.getLogger(__name__)

TaskSource = Mapping[str, Task] | Callable[[str], Task | None]
"""Where the server looks up a task by id: a mapping, or a loader returning the task or None
(a loader may also raise :class:`KeyError` for an unknown id)."""

HOST = "127.0.0.1"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # listen backlog: bursts of reports must not be reset

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its connection (a closed browser context) is routine: log it at
        DEBUG instead of printing a traceback; anything else is logged as an error."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            log.debug("page server: connection from %s ended: %s", client_address, exc)
        else:
            log.exception("page server: error on a connection from %s", client_address)


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def serve_in_thread(httpd: ThreadingHTTPServer, name: str) -> threading.Thread:
    """Start ``httpd.serve_forever`` in a daemon thread named ``<name>:<port>``; returns it."""
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                              name=f"{name}:{httpd.server_address[1]}", daemon=True)
    thread.start()
    return thread


def stop_serving(httpd: ThreadingHTTPServer | None, thread: threading.Thread | None) -> None:
    """Shut ``httpd`` down, close its socket and join its thread (5 s at most); None: nothing to do."""
    if httpd is None:
        return
    httpd.shutdown()
    httpd.server_close()
    if thread is not None:
        thread.join(timeout=5)


class PageServer:
    """Serves task pages on ``http://127.0.0.1:<port>`` and records the events pages report.

    Usable as a context manager (``with PageServer(tasks) as srv: ...``) or with
    :meth:`start` / :meth:`stop`.

    Args:
        tasks: the tasks it serves by id: a mapping ``id -> Task`` or a loader callable
            ``id -> Task | None``; None serves only tasks added with :meth:`add`.
        port: TCP port; 0 (default) picks a free ephemeral port.
        max_body_bytes: largest accepted request body (bytes); larger ones get 413.
        max_events_per_session: events stored per (task, session) before 429.
        max_sessions: sessions kept; beyond it the oldest session's events are dropped (logged).
        timeout_s: socket timeout of a connection (seconds), so stalled clients free their thread.

    Thread safety: the event store is guarded by a lock; all public methods may be called from
    any thread while the server runs.
    """

    def __init__(self, tasks: TaskSource | None = None, *, port: int = 0,
                 max_body_bytes: int = 1 << 20, max_events_per_session: int = 10_000,
                 max_sessions: int = 4096, timeout_s: float = 10.0) -> None:
        self._source = tasks
        self._added: dict[str, Task] = {}
        self._html: OrderedDict[str, bytes] = OrderedDict()
        self._events: OrderedDict[tuple[str, str], dict[int, dict]] = OrderedDict()
        self._lock = threading.Lock()
        self._port = port
        self.max_body_bytes = max_body_bytes
        self.max_events_per_session = max_events_per_session
        self.max_sessions = max_sessions
        self.timeout_s = timeout_s
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "PageServer":
        """Bind 127.0.0.1 and serve in a daemon thread. Idempotent. Returns self.

        Raises:
            OSError: if the port cannot be bound.
        """
        if self._httpd is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"server_app": self, "timeout": self.timeout_s})
        self._httpd = _Server((HOST, self._port), handler)
        self._thread = serve_in_thread(self._httpd, "PageServer")
        log.debug("page server listening on %s", self.base_url)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket. Idempotent; recorded events stay readable."""
        httpd, self._httpd = self._httpd, None
        stop_serving(httpd, self._thread)
        self._thread = None

    def __enter__(self) -> "PageServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the server is serving."""
        return self._httpd is not None

    @property
    def port(self) -> int:
        """The bound TCP port. Raises RuntimeError before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("PageServer is not running; call start()")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{HOST}:{self.port}"

    def task_url(self, task_id: str, session: str | None = None) -> str:
        """URL of a task's page; with ``session`` the page reports its events under that id."""
        url = f"{self.base_url}/task/{quote(task_id, safe='')}"
        if session is not None:
            url += f"?session={quote(session, safe='')}"
        return url

    # -- tasks -------------------------------------------------------------------------------

    def add(self, task: Task) -> None:
        """Serve ``task`` (in addition to the source given at construction); replaces a task
        added earlier under the same id."""
        with self._lock:
            old = self._added.get(task.id)
            self._added[task.id] = task
            if old is not None and old != task:
                self._html.pop(task.id, None)

    def get_task(self, task_id: str) -> Task | None:
        """The task with this id, or None if neither :meth:`add` nor the source has it."""
        with self._lock:
            task = self._added.get(task_id)
        if task is not None:
            return task
        src = self._source
        if src is None:
            return None
        try:
            task = src.get(task_id) if isinstance(src, Mapping) else src(task_id)
        except (KeyError, LookupError):
            return None
        return task if isinstance(task, Task) else None

    def page_html(self, task_id: str) -> bytes | None:
        """The UTF-8 page of a task (rendered once, cached), or None for an unknown id."""
        with self._lock:
            cached = self._html.get(task_id)
        if cached is not None:
            return cached
        task = self.get_task(task_id)
        if task is None:
            return None
        body = render_html(task).encode("utf-8")
        with self._lock:
            self._html[task_id] = body
            while len(self._html) > 512:
                self._html.popitem(last=False)
        return body

    # -- events ------------------------------------------------------------------------------

    def record_event(self, task_id: str, session: str, event: Mapping[str, Any]) -> None:
        """Store one event (already validated) under (task, session) at its ``seq``.

        Raises:
            _HTTPError: 409 on a ``seq`` conflict, 429 when the session is full.
        """
        seq = event["seq"]
        key = (task_id, session)
        with self._lock:
            store = self._events.get(key)
            if store is None:
                store = self._events[key] = {}
                while len(self._events) > self.max_sessions:
                    (t, s), dropped = self._events.popitem(last=False)
                    log.warning("page server: dropped %d events of the oldest session %s/%s "
                                "(max_sessions=%d)", len(dropped), t, s, self.max_sessions)
            prev = store.get(seq)
            if prev is not None:
                if prev != event:
                    raise _HTTPError(409, f"seq {seq} of session {session!r} is already recorded "
                                          "with a different event")
                return
            if len(store) >= self.max_events_per_session:
                raise _HTTPError(429, f"session {session!r} has {len(store)} events; "
                                      f"at most {self.max_events_per_session}")
            store[seq] = dict(event)

    def events(self, task_id: str, session: str) -> list[dict]:
        """The events of a (task, session) in ``seq`` order, each including its ``seq``."""
        with self._lock:
            store = self._events.get((task_id, session), {})
            return [dict(store[k]) for k in sorted(store)]

    def discard(self, task_id: str, session: str) -> None:
        """Forget the events of one session (no-op if there are none)."""
        with self._lock:
            self._events.pop((task_id, session), None)

    def sessions(self) -> list[tuple[str, str]]:
        """The (task, session) pairs with stored events, oldest first."""
        with self._lock:
            return list(self._events)


def _validate_event(task: Task, ev: Any) -> dict:
    """Check a reported event against the task's page; return it as a plain dict."""
    if not isinstance(ev, dict):
        raise _HTTPError(400, "event must be a JSON object")
    seq = ev.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise _HTTPError(400, "event needs an integer 'seq' >= 0")
    kind = ev.get("kind")
    fields = {f.key: f for f in task.page.fields()}
    if kind == "change":
        allowed = {"seq", "kind", "key", "value"}
        key = ev.get("key")
        if key not in fields:
            raise _HTTPError(422, f"change event: task {task.id!r} has no field {key!r}")
        if not fields[key].accepts(ev.get("value")) and not (
                fields[key].kind == "radio" and ev.get("value") == ""):
            raise _HTTPError(422, f"change event: {ev.get('value')!r} is not a valid value of "
                                  f"field {key!r} ({fields[key].kind})")
    elif kind == "activate":
        allowed = {"seq", "kind", "key", "values"}
        key = ev.get("key")
        if key not in {c.key for c in task.page.controls}:
            raise _HTTPError(422, f"activate event: task {task.id!r} has no control {key!r}")
        values = ev.get("values")
        if not isinstance(values, dict) or set(values) != set(fields):
            raise _HTTPError(422, "activate event: 'values' must map every field of the task")
        for k, v in values.items():
            if not isinstance(v, (str, bool)) or (fields[k].kind == "checkbox") != isinstance(v, bool):
                raise _HTTPError(422, f"activate event: value of field {k!r} has the wrong type")
    else:
        raise _HTTPError(400, "event 'kind' must be 'change' or 'activate'")
    extra = set(ev) - allowed
    if extra:
        raise _HTTPError(400, f"{kind} event: unexpected key(s) {', '.join(sorted(extra))}")
    return ev


class _Handler(BaseHTTPRequestHandler):
    server_app: PageServer
    protocol_version = "HTTP/1.1"
    server_version = "advsim-forms"

    def version_string(self) -> str:
        return self.server_version

    # -- plumbing ----------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("page server: " + format, *args)

    def _send(self, status: int, body: bytes, ctype: str, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"),
                   "application/json; charset=utf-8", headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """JSON error body for the stdlib's own errors (bad request line, URL too long, ...)."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        if code == 501:  # unknown method: this server answers only GET/POST
            code, message = 405, f"method {self.command!r} not allowed"
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # always answer with a status line and headers
        self._json(code, {"error": message or phrase}, {"Allow": "GET, POST"} if code == 405 else None)

    def __getattr__(self, name: str):
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self.close_connection = True
        self._json(405, {"error": f"method {self.command} not allowed"}, {"Allow": "GET, POST"})

    def _dispatch(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except _HTTPError as e:
            self._json(e.status, {"error": e.message}, e.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # a bug must not kill the server; report it as a 500 and go on
            log.exception("page server: error handling %s %s", self.command, self.path)
            self.close_connection = True
            try:
                self._json(500, {"error": "internal error"})
            except OSError:
                pass

    def _query(self) -> tuple[str, dict[str, list[str]]]:
        parts = urlsplit(self.path)
        try:
            q = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False,
                         max_num_fields=32)
        except ValueError as e:
            raise _HTTPError(400, f"bad query string: {e}") from None
        return parts.path, q

    @staticmethod
    def _one(q: dict[str, list[str]], name: str) -> str:
        vals = q.get(name)
        if not vals or vals[0] == "":
            raise _HTTPError(400, f"missing query parameter {name!r}")
        if len(vals) > 1:
            raise _HTTPError(400, f"query parameter {name!r} given {len(vals)} times")
        if len(vals[0]) > 256:
            raise _HTTPError(400, f"query parameter {name!r} is longer than 256 characters")
        return vals[0]

    def _task(self, task_id: str) -> Task:
        task = self.server_app.get_task(task_id)
        if task is None:
            raise _HTTPError(404, f"unknown task {task_id!r}")
        return task

    # -- routes ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch(self._get)

    def do_HEAD(self) -> None:
        self._dispatch(self._get)

    def do_POST(self) -> None:
        self._dispatch(self._post)

    def _get(self) -> None:
        path, q = self._query()
        if path.startswith("/task/"):
            task_id = unquote(path[len("/task/"):])
            body = self.server_app.page_html(task_id)
            if body is None:
                raise _HTTPError(404, f"unknown task {task_id!r}")
            self._send(200, body, "text/html; charset=utf-8")
        elif path == "/api/events":
            task = self._task(self._one(q, "task"))
            session = self._one(q, "session")
            self._json(200, {"task": task.id, "session": session,
                             "events": self.server_app.events(task.id, session)})
        elif path == "/api/health":
            self._json(200, {"ok": True})
        else:
            raise _HTTPError(404, f"no route for GET {path}")

    def _post(self) -> None:
        path, q = self._query()
        if path == "/api/events":
            body = self._body()  # read (or refuse) the body first, so keep-alive stays in sync
            task = self._task(self._one(q, "task"))
            session = self._one(q, "session")
            try:
                ev = loads(body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError (too deep included), DuplicateKeyError
                raise _HTTPError(400, f"body is not valid JSON: {e.__class__.__name__}") from None
            ev = _validate_event(task, ev)
            self.server_app.record_event(task.id, session, ev)
            self._json(200, {"ok": True, "seq": ev["seq"]})
        elif path.startswith("/task/") or path in ("/api/health",):
            self._read_and_discard()
            self.close_connection = True
            self._json(405, {"error": f"method POST not allowed on {path}"}, {"Allow": "GET"})
        else:
            self._read_and_discard()
            raise _HTTPError(404, f"no route for POST {path}")

    def _content_length(self) -> int:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise _HTTPError(411, "chunked bodies are not accepted; send Content-Length")
        raw = self.headers.get("Content-Length")
        if raw is None:
            self.close_connection = True
            raise _HTTPError(411, "Content-Length required")
        try:
            n = int(raw)
        except ValueError:
            n = -1
        if n < 0:
            self.close_connection = True
            raise _HTTPError(400, f"bad Content-Length {raw[:40]!r}")
        return n

    def _body(self) -> bytes:
        n = self._content_length()
        if n > self.server_app.max_body_bytes:
            self.close_connection = True  # the unread body would desync the connection
            raise _HTTPError(413, f"body of {n} bytes exceeds {self.server_app.max_body_bytes}")
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        data = self.rfile.read(n)
        if len(data) != n:
            self.close_connection = True
            raise _HTTPError(400, "body shorter than Content-Length")
        if ctype not in ("application/json", "text/plain", ""):
            raise _HTTPError(415, f"content type {ctype!r} not accepted; send application/json")
        return data

    def _read_and_discard(self) -> None:
        try:
            n = self._content_length()
        except _HTTPError:
            return
        if n > self.server_app.max_body_bytes:
            self.close_connection = True
            return
        self.rfile.read(n)
