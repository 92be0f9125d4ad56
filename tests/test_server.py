"""The local page server: pages by id, events in seq order, 4xx JSON errors without dying."""

from __future__ import annotations

import http.client
import json
import socket
import threading

import pytest

from forms_bench.html import render_html
from forms_bench.server import PageServer
from tests.sample_task import task as TASK

VALUES = {"case_id": "CASE-7", "holder": "Dana O'Neil", "notes": "", "method": "Express",
          "priority": "Low", "sig": False}


@pytest.fixture()
def srv():
    with PageServer({TASK.id: TASK}, max_body_bytes=4096, max_events_per_session=5) as s:
        yield s


def request(srv: PageServer, method: str, path: str, body: bytes | str | None = None,
            headers: dict | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    if isinstance(body, str):
        body = body.encode()
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    hdrs.update(headers or {})
    conn.request(method, path, body=body, headers=hdrs)
    resp = conn.getresponse()
    data = resp.read()
    out = resp.status, dict(resp.getheaders()), data
    conn.close()
    return out


def raw(srv: PageServer, data: bytes) -> bytes:
    """Send raw bytes; return everything the server answers before closing."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as c:
        c.sendall(data)
        out = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                return out
            out += chunk


def post(srv, ev, task="demo-1", session="s1"):
    return request(srv, "POST", f"/api/events?task={task}&session={session}", json.dumps(ev))


def events(srv, task="demo-1", session="s1"):
    status, _, body = request(srv, "GET", f"/api/events?task={task}&session={session}")
    assert status == 200
    return json.loads(body)


def alive(srv) -> bool:
    return request(srv, "GET", "/api/health")[0] == 200


def test_binds_loopback_ephemeral_port(srv):
    assert srv.base_url == f"http://127.0.0.1:{srv.port}"
    assert srv.port > 0
    assert srv._httpd.server_address[0] == "127.0.0.1"
    assert srv.task_url("demo-1", "a b") == f"http://127.0.0.1:{srv.port}/task/demo-1?session=a%20b"


def test_serves_task_page(srv):
    status, headers, body = request(srv, "GET", "/task/demo-1?session=x")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert body.decode("utf-8") == render_html(TASK)


def test_loader_callable_and_add():
    calls = []

    def loader(tid):
        calls.append(tid)
        return TASK if tid == "demo-1" else None

    with PageServer(loader) as s:
        assert request(s, "GET", "/task/demo-1")[0] == 200
        status, _, body = request(s, "GET", "/task/nope")
        assert (status, json.loads(body)) == (404, {"error": "unknown task 'nope'"})
        assert calls == ["demo-1", "nope"]
    other = TASK.model_copy(update={"id": "demo-2"})
    with PageServer() as s:
        assert request(s, "GET", "/task/demo-2")[0] == 404
        s.add(other)
        assert request(s, "GET", "/task/demo-2")[2].decode() == render_html(other)


def test_events_are_returned_in_seq_order(srv):
    evs = [{"seq": 2, "kind": "activate", "key": "submit", "values": VALUES},
           {"seq": 0, "kind": "change", "key": "method", "value": "Express"},
           {"seq": 1, "kind": "change", "key": "sig", "value": True}]
    for ev in evs:
        status, _, body = post(srv, ev)
        assert (status, json.loads(body)) == (200, {"ok": True, "seq": ev["seq"]})
    got = events(srv)
    assert got == {"task": "demo-1", "session": "s1",
                   "events": [evs[1], evs[2], evs[0]]}
    assert events(srv, session="other") == {"task": "demo-1", "session": "other", "events": []}
    assert srv.events("demo-1", "s1") == [evs[1], evs[2], evs[0]]


def test_resent_event_is_idempotent_conflict_is_409(srv):
    ev = {"seq": 0, "kind": "change", "key": "notes", "value": "a\nb"}
    assert post(srv, ev)[0] == 200
    assert post(srv, ev)[0] == 200
    status, _, body = post(srv, {**ev, "value": "other"})
    assert status == 409
    assert json.loads(body) == {"error": "seq 0 of session 's1' is already recorded with a different event"}
    assert srv.events("demo-1", "s1") == [ev]


@pytest.mark.parametrize("path,body,status,error", [
    ("/api/events?task=demo-1&session=s1", "{not json", 400, "body is not valid JSON: JSONDecodeError"),
    ("/api/events?task=demo-1&session=s1", b"\xff\xfe", 400, "body is not valid JSON: UnicodeDecodeError"),
    ("/api/events?task=demo-1&session=s1", "[1, 2]", 400, "event must be a JSON object"),
    # the last of two equal keys used to win silently (seq 7 stored)
    ("/api/events?task=demo-1&session=s1", '{"seq": 0, "kind": "change", "key": "notes", "value": "", "seq": 7}', 400,
     "body is not valid JSON: DuplicateKeyError"),
    pytest.param("/api/events?task=demo-1&session=s1", "[" * 2_000 + "]" * 2_000, 400,
                 "body is not valid JSON: JsonDepthError", id="2000-brackets"),
    ("/api/events?task=demo-1", '{"seq": 0, "kind": "change", "key": "notes", "value": ""}', 400,
     "missing query parameter 'session'"),
    ("/api/events?task=demo-1&session=", '{"seq": 0, "kind": "change", "key": "notes", "value": ""}', 400,
     "missing query parameter 'session'"),
    ("/api/events?session=s1", '{"seq": 0, "kind": "change", "key": "notes", "value": ""}', 400,
     "missing query parameter 'task'"),
    ("/api/events?task=demo-1&task=x&session=s1", '{"seq": 0, "kind": "change", "key": "notes", "value": ""}',
     400, "query parameter 'task' given 2 times"),
    ("/api/events?task=nope&session=s1", '{"seq": 0, "kind": "change", "key": "notes", "value": ""}', 404,
     "unknown task 'nope'"),
    ("/api/events?task=demo-1&session=s1", '{"seq": -1, "kind": "change", "key": "notes", "value": ""}', 400,
     "event needs an integer 'seq' >= 0"),
    ("/api/events?task=demo-1&session=s1", '{"seq": true, "kind": "change", "key": "notes", "value": ""}', 400,
     "event needs an integer 'seq' >= 0"),
    ("/api/events?task=demo-1&session=s1", '{"seq": "0", "kind": "change", "key": "notes", "value": ""}', 400,
     "event needs an integer 'seq' >= 0"),
    ("/api/events?task=demo-1&session=s1", '{"seq": 0, "kind": "explode", "key": "notes"}', 400,
     "event 'kind' must be 'change' or 'activate'"),
    ("/api/events?task=demo-1&session=s1", '{"seq": 0, "kind": "change", "key": "nope", "value": ""}', 422,
     "change event: task 'demo-1' has no field 'nope'"),
    ("/api/events?task=demo-1&session=s1", '{"seq": 0, "kind": "change", "key": "sig", "value": "yes"}', 422,
     "change event: 'yes' is not a valid value of field 'sig' (checkbox)"),
    ("/api/events?task=demo-1&session=s1", '{"seq": 0, "kind": "change", "key": "method", "value": "Air"}', 422,
     "change event: 'Air' is not a valid value of field 'method' (select)"),
    ("/api/events?task=demo-1&session=s1", '{"seq": 0, "kind": "change", "key": "notes", "value": "", "x": 1}',
     400, "change event: unexpected key(s) x"),
    ("/api/events?task=demo-1&session=s1", '{"seq": 0, "kind": "activate", "key": "launch", "values": {}}', 422,
     "activate event: task 'demo-1' has no control 'launch'"),
    ("/api/events?task=demo-1&session=s1", '{"seq": 0, "kind": "activate", "key": "submit", "values": {}}', 422,
     "activate event: 'values' must map every field of the task"),
    ("/api/nowhere", "{}", 404, "no route for POST /api/nowhere"),
])
def test_bad_posts_get_4xx_json(srv, path, body, status, error):
    got_status, headers, got = request(srv, "POST", path, body)
    assert got_status == status
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert json.loads(got) == {"error": error}
    assert srv.sessions() == []
    assert alive(srv)


def test_bad_gets_and_methods(srv):
    assert request(srv, "GET", "/nowhere")[0] == 404
    status, _, body = request(srv, "GET", "/api/events?task=demo-1")
    assert (status, json.loads(body)) == (400, {"error": "missing query parameter 'session'"})
    assert request(srv, "GET", "/api/events?task=zzz&session=s")[0] == 404
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS", "FOO"):
        status, headers, body = request(srv, method, "/api/events?task=demo-1&session=s1")
        assert status == 405, method
        assert headers["Allow"] == "GET, POST"
        assert json.loads(body) == {"error": f"method {method} not allowed"}
    status, headers, body = request(srv, "POST", "/task/demo-1", "{}")
    assert (status, headers["Allow"], json.loads(body)) == (405, "GET", {"error": "method POST not allowed on /task/demo-1"})
    assert alive(srv)


def test_huge_and_unframed_bodies(srv):
    # declared body over the limit: refused before reading it, connection closed
    answer = raw(srv, b"POST /api/events?task=demo-1&session=s1 HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 99999999\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.endswith(b'{"error": "body of 99999999 bytes exceeds 4096"}')
    big = json.dumps({"seq": 0, "kind": "change", "key": "notes", "value": "x" * 5000})
    assert post(srv, json.loads(big))[0] == 413
    answer = raw(srv, b"POST /api/events?task=demo-1&session=s1 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 411 ")
    assert answer.endswith(b'{"error": "Content-Length required"}')
    answer = raw(srv, b"POST /api/events?task=demo-1&session=s1 HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: -5\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")
    status, _, body = request(srv, "POST", "/api/events?task=demo-1&session=s1", "{}",
                              {"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, json.loads(body)) == (415, {"error": "content type 'application/x-www-form-urlencoded' "
                                                         "not accepted; send application/json"})
    assert srv.sessions() == []
    assert alive(srv)


def test_garbage_and_long_request_lines(srv):
    answer = raw(srv, b"GET / HTTP/1.1 extra\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert answer.endswith(b'{"error": "Bad request version (\'extra\')"}')
    answer = raw(srv, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 414 ")
    answer = raw(srv, b"\x00\x01\x02 garbage\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"error": "Bad HTTP/0.9 request type ('\\x00\\x01\\x02')"}
    assert alive(srv)


def test_session_event_limit_is_429(srv):
    for i in range(5):
        assert post(srv, {"seq": i, "kind": "change", "key": "notes", "value": str(i)})[0] == 200
    status, _, body = post(srv, {"seq": 5, "kind": "change", "key": "notes", "value": "5"})
    assert (status, json.loads(body)) == (429, {"error": "session 's1' has 5 events; at most 5"})
    assert [e["seq"] for e in srv.events("demo-1", "s1")] == [0, 1, 2, 3, 4]


def test_discard_and_session_eviction():
    with PageServer({TASK.id: TASK}, max_sessions=2) as s:
        for sid in ("a", "b", "c"):
            assert post(s, {"seq": 0, "kind": "change", "key": "notes", "value": sid}, session=sid)[0] == 200
        assert s.sessions() == [("demo-1", "b"), ("demo-1", "c")]
        s.discard("demo-1", "b")
        assert s.sessions() == [("demo-1", "c")]
        assert s.events("demo-1", "b") == []


def test_concurrent_posts_keep_seq_order(srv):
    srv.max_events_per_session = 1000
    errors = []

    def send(i):
        try:
            status = post(srv, {"seq": i, "kind": "change", "key": "notes", "value": f"v{i}"})[0]
            if status != 200:
                errors.append(status)
        except OSError as e:  # pragma: no cover - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=send, args=(i,)) for i in reversed(range(40))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [e["value"] for e in srv.events("demo-1", "s1")] == [f"v{i}" for i in range(40)]


def test_stop_closes_the_port():
    s = PageServer({TASK.id: TASK}).start()
    port = s.port
    assert alive(s)
    s.stop()
    s.stop()  # idempotent
    assert not s.running
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(RuntimeError):
        s.port
