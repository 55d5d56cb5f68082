"""casstore.store.s3_wire: the GET http.client sends, and only plainly framed answers read.

A raw stub server on 127.0.0.1 answers each request path with canned bytes: the framings
http.client reads alike (Content-Length, chunked, the end of the connection) give the same
bytes through the signed reader, and anything else (a 1xx, a folded header, another
transfer coding, a body cut short, a malformed chunk) is left to the full client (NotPlain).
"""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator

import pytest

from casstore.store.s3_signed import NotPlain, SignedReader
from casstore.store.s3_wire import Connection, WireError, split_netloc
from tests.helpers.s3 import fake_aws_env

BODY = b"0123456789" * 50

CANNED = {
    "/bkt-wire/length": b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nServer: stub\r\n\r\n" + BODY,
    "/bkt-wire/chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"64;ext=1\r\n" + BODY[:100]
                          + b"\r\n190\r\n" + BODY[100:] + b"\r\n0\r\nX-Trailer: t\r\n\r\n"),
    "/bkt-wire/until-close": b"HTTP/1.0 200 OK\r\nServer: stub\r\n\r\n" + BODY,
    "/bkt-wire/continue": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + BODY,
    "/bkt-wire/folded": b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nX-A: a\r\n b\r\n\r\n" + BODY,
    "/bkt-wire/gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "/bkt-wire/short": b"HTTP/1.1 200 OK\r\nContent-Length: 900\r\n\r\n" + BODY,
    "/bkt-wire/two-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nContent-Length: 501\r\n\r\n" + BODY,
    "/bkt-wire/bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + BODY,
    "/bkt-wire/http2": b"HTTP/2 200\r\ncontent-length: 500\r\n\r\n" + BODY,
    "/bkt-wire/no-colon": b"HTTP/1.1 200 OK\r\nContent-Length 500\r\n\r\n" + BODY,
}
KEPT = ("/bkt-wire/length", "/bkt-wire/chunked")
PLAIN = ("length", "chunked", "until-close")
ODD = ("continue", "folded", "gzip", "short", "two-lengths", "bad-chunk", "http2", "no-colon")


class _Answer(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server: Stub = self.server  # type: ignore[assignment]
        server.connections += 1
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = self.rfile.readline()
                if not line:
                    return
                head += line
            server.requests.append(head)
            path = head.split(b" ")[1].split(b"?")[0].decode()
            self.wfile.write(CANNED[path])
            if path not in KEPT:  # the server closes after any other answer
                return


class Stub(socketserver.ThreadingTCPServer):
    """Reads each request's head, answers from CANNED by path; counts connections and requests."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.port = self.server_address[1]
        self.connections = 0
        self.requests: list[bytes] = []
        threading.Thread(target=self.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stub]:
    for k, v in fake_aws_env().items():
        monkeypatch.setenv(k, v)
    s = Stub()
    yield s
    s.close()


def _reader(stub: Stub) -> SignedReader:
    reader = SignedReader.for_options("bkt-wire", {"endpoint_url": f"http://127.0.0.1:{stub.port}"})
    assert reader is not None
    return reader


def test_plainly_framed_answers_are_the_same_bytes_and_a_connection_is_kept(stub: Stub) -> None:
    reader = _reader(stub)
    assert reader.get("length") == BODY
    assert reader.get("length") == BODY  # kept alive: the same connection
    assert stub.connections == 1
    for name in PLAIN:
        assert reader.get(name) == BODY, name
    assert stub.connections == 1  # every answer on the kept connection; until-close ends it
    assert reader.get("length") == BODY
    assert stub.connections == 2


@pytest.mark.parametrize("name", ODD)
def test_any_other_framing_is_left_to_the_client(stub: Stub, name: str) -> None:
    reader = _reader(stub)
    with pytest.raises(NotPlain):
        reader.get(name)
    assert reader.get("length") == BODY  # a new connection after the odd one


def test_the_request_is_the_one_http_client_sends(stub: Stub) -> None:
    import http.client

    headers = {"X-Amz-Date": "20260101T000000Z", "Range": "bytes=0-9", "Host": f"127.0.0.1:{stub.port}"}
    Connection("http", f"127.0.0.1:{stub.port}", timeouts=(5, 5)).get("/bkt-wire/length?a=1&b=%2F", headers)
    conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=5)
    conn.request("GET", "/bkt-wire/length?a=1&b=%2F", headers=headers)
    assert conn.getresponse().read() == BODY
    conn.close()
    assert len(stub.requests) == 2 and stub.requests[0] == stub.requests[1]


def test_requests_http_client_refuses_are_not_sent() -> None:
    conn = Connection("http", "127.0.0.1:9", timeouts=(1, 1))
    conn._sock = object()  # never used: each refusal comes before anything is sent
    for target, headers in (("/a b", {}), ("/a", {"X-A": "a\r\nX-B: b"}), ("/a", {"X A": "a"}), ("/a", {"X": "é€"})):
        with pytest.raises(WireError):
            conn.get(target, headers)


def test_the_netloc_is_split_as_http_client_splits_it() -> None:
    import http.client

    for netloc in ("127.0.0.1", "127.0.0.1:8080", "[::1]:9000", "[::1]", "localhost:", "Host.Example:443"):
        for scheme, cls in (("http", http.client.HTTPConnection), ("https", http.client.HTTPSConnection)):
            c = cls(netloc)
            assert split_netloc(netloc, scheme) == (c.host, c.port), (netloc, scheme)
