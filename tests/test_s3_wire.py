"""casstore.store.s3_wire: the GET http.client sends, and only plainly framed answers read.

A raw stub server on 127.0.0.1 answers each request path with canned bytes: the framings
http.client reads alike (Content-Length, chunked, the end of the connection) give the same
bytes through the signed reader, and anything else (a 1xx, a folded header, another
transfer coding, a body cut short, a malformed chunk) is left to the full client (NotPlain).
Bytes after an answer (with it, or later) never become the next answer, and a kept-alive
connection the server closed between requests is replaced, as urllib3 replaces a pooled one
(its ``is_connection_dropped``): the stub and a proxy in front of moto send them.
"""

from __future__ import annotations

import http.client
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from casstore.store.s3_signed import NotPlain, SignedReader
from casstore.store.s3_wire import Connection, WireError, split_netloc
from tests.helpers.s3 import fake_aws_env
from tests.test_replay_https import make_tls_files
from tests.test_s3_direct import KEYS, fill

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
# a whole second answer: read as the next request's answer, it would be a wrong body served
STRAY = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"
CANNED["/bkt-wire/stray-with"] = CANNED["/bkt-wire/length"] + STRAY  # in the same write as the body
CANNED["/bkt-wire/stray-later"] = CANNED["/bkt-wire/length"]  # STRAY sent once the test says so
CANNED["/bkt-wire/chunked-stray"] = CANNED["/bkt-wire/chunked"] + STRAY
CANNED["/bkt-wire/closes"] = CANNED["/bkt-wire/length"]  # then the server closes, without saying so
LARGE = bytes(range(256)) * 1200  # more than one read of the socket brings: the rest read past the buffer
CANNED["/bkt-wire/large"] = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(LARGE), LARGE)
CANNED["/bkt-wire/chunked-large"] = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n"
                                     % (100_000, LARGE[:100_000], len(LARGE) - 100_000, LARGE[100_000:]))
CANNED["/bkt-wire/until-close-large"] = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + LARGE
KEPT = ("/bkt-wire/length", "/bkt-wire/chunked", "/bkt-wire/stray-with", "/bkt-wire/stray-later",
        "/bkt-wire/chunked-stray", "/bkt-wire/large", "/bkt-wire/chunked-large")
PLAIN = ("length", "chunked", "until-close")
ODD = ("continue", "folded", "gzip", "short", "two-lengths", "bad-chunk", "http2", "no-colon")


def _delivered(sock: socket.socket) -> None:
    """Wait until the peer has acknowledged all that was sent on ``sock`` (so its side can read
    it, or the close): a small write waits for an ACK without TCP_NODELAY, and a busy machine
    may hand loopback delivery to a kernel thread."""
    if sys.platform.startswith("linux"):
        import fcntl
        import termios

        deadline = time.monotonic() + 10
        while struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]:  # SIOCOUTQ
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)


def _heads(rfile: Any) -> Iterator[bytes]:
    """The head of each request a client sends on one connection, until it closes."""
    while True:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = rfile.readline()
            if not line:
                return
            head += line
        yield head


class _Answer(socketserver.StreamRequestHandler):
    disable_nagle_algorithm = True

    def handle(self) -> None:
        server: Stub = self.server  # type: ignore[assignment]
        server.connections += 1
        for head in _heads(self.rfile):
            server.requests.append(head)
            path = head.split(b" ")[1].split(b"?")[0].decode()
            self.wfile.write(CANNED[path])
            if path == "/bkt-wire/stray-later":
                server.go.wait(10)
                self.wfile.write(STRAY)
                _delivered(self.connection)
                server.sent.set()
            if path == "/bkt-wire/closes":  # a server's keep-alive timeout: it closes between requests
                self.connection.shutdown(socket.SHUT_RDWR)
                _delivered(self.connection)
                server.sent.set()
            if path not in KEPT:  # the server closes after any other answer
                return


class Stub(socketserver.ThreadingTCPServer):
    """Reads each request's head, answers from CANNED by path; counts connections and requests."""

    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        if tls is not None:  # the handshake on the handler's first read, in its own thread
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self.server_address[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self.go, self.sent = threading.Event(), threading.Event()
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
    for name in ("large", "chunked-large", "length", "until-close-large"):
        assert reader.get(name) == (BODY if name == "length" else LARGE), name
    assert stub.connections == 2  # all on the second connection, which the last one ends


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


def test_bytes_with_a_body_are_a_framing_error_never_the_next_answer(stub: Stub) -> None:
    reader = _reader(stub)
    for name in ("stray-with", "chunked-stray"):
        with pytest.raises(NotPlain):  # the body is in doubt (a Content-Length too short?): the client reads it
            reader.get(name)
        assert reader.get("length") == BODY  # the right answer, on a new connection: not the stray one
    assert stub.connections == 3
    conn = Connection("http", f"127.0.0.1:{stub.port}", timeouts=(5, 5))
    with pytest.raises(WireError, match="after the answer"):
        conn.get("/bkt-wire/stray-with", {"Host": "stub"})
    assert conn.get("/bkt-wire/length", {"Host": "stub"}).body == BODY  # the connection itself was replaced
    assert stub.connections == 5


def test_bytes_after_an_answer_mean_a_new_connection_for_the_next(stub: Stub) -> None:
    reader = _reader(stub)
    assert reader.get("stray-later") == BODY  # read whole before the stray bytes came
    stub.go.set()
    assert stub.sent.wait(10)
    assert reader.get("length") == BODY  # not the stray answer waiting on the kept connection
    assert stub.connections == 2
    assert reader.get("length") == BODY  # and the new one is kept
    assert stub.connections == 2


def test_a_kept_connection_the_server_closed_is_replaced_not_left_to_the_client(stub: Stub) -> None:
    reader = _reader(stub)
    assert reader.get("closes") == BODY
    assert stub.sent.wait(10)  # closed by the server, between the two requests
    assert reader.get("length") == BODY  # sent on a new connection (a NotPlain would hand it to the client)
    assert stub.connections == 2 and len(stub.requests) == 2


def test_over_tls_a_kept_connection_is_reused_until_it_has_something_to_read(tmp_path: Path) -> None:
    ca, cert, key = make_tls_files(tmp_path)
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    stub = Stub(tls=server_side)
    try:
        conn = Connection("https", f"127.0.0.1:{stub.port}", timeouts=(5, 5),
                          context=ssl.create_default_context(cafile=str(ca)))
        for _ in range(3):  # what TLS itself sends after the handshake (session tickets) is not stray
            assert conn.get("/bkt-wire/length", {"Host": "stub"}).body == BODY
        assert stub.connections == 1
        assert conn.get("/bkt-wire/stray-later", {"Host": "stub"}).body == BODY
        stub.go.set()
        assert stub.sent.wait(10)
        assert conn.get("/bkt-wire/length", {"Host": "stub"}).body == BODY
        assert stub.connections == 2
        with pytest.raises(WireError, match="after the answer"):
            conn.get("/bkt-wire/stray-with", {"Host": "stub"})
        assert conn.get("/bkt-wire/length", {"Host": "stub"}).body == BODY
        assert stub.connections == 3
        conn.close()
    finally:
        stub.close()


# a listing moto never made: read as the answer to a LIST, it would name an object that is not there
PLANTED = (b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
           b"<Name>b</Name><Prefix>cassettes/</Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys>"
           b"<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated><Contents><Key>cassettes/planted</Key>"
           b'<LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>"e"</ETag><Size>1</Size></Contents>'
           b"</ListBucketResult>")
STRAY_LISTING = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(PLANTED), PLANTED)


class _Forward(socketserver.StreamRequestHandler):
    """Each request forwarded to moto as it came (its signed Host kept), the answer framed by
    a Content-Length on the kept connection, and a stray listing after the first one."""

    disable_nagle_algorithm = True

    def handle(self) -> None:
        proxy: StrayProxy = self.server  # type: ignore[assignment]
        proxy.connections += 1
        for head in _heads(self.rfile):
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ")
            upstream = http.client.HTTPConnection(*proxy.upstream, timeout=30)
            upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for line in head.decode("latin-1").split("\r\n")[1:]:
                if line:
                    name, _, value = line.partition(":")
                    upstream.putheader(name, value.strip())
            upstream.endheaders()
            answer = upstream.getresponse()
            body = answer.read()
            upstream.close()
            out = [f"HTTP/1.1 {answer.status} {answer.reason}\r\n".encode()]
            out += [f"{k}: {v}\r\n".encode("latin-1") for k, v in answer.getheaders()
                    if k.lower() not in ("content-length", "transfer-encoding", "connection")]
            out.append(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            first, proxy.answered = proxy.answered == 0, proxy.answered + 1
            if first and proxy.when == "with":
                out.append(STRAY_LISTING)  # in the same write as the body
            self.wfile.write(b"".join(out))
            if first and proxy.when == "later":
                proxy.go.wait(10)
                self.wfile.write(STRAY_LISTING)
                _delivered(self.connection)
                proxy.sent.set()


class StrayProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def __init__(self, upstream: str, when: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        host, port = upstream.split("://", 1)[1].rstrip("/").split(":")
        self.upstream, self.when = (host, int(port)), when
        self.connections = self.answered = 0
        self.go, self.sent = threading.Event(), threading.Event()
        threading.Thread(target=self.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.mark.parametrize("when", ["with", "later"])
def test_a_listing_after_stray_bytes_is_the_stores_own(s3_url: str, s3_server, when: str) -> None:  # type: ignore[no-untyped-def]
    bucket = fill(s3_url).split("/")[2]
    proxy = StrayProxy(s3_server.endpoint, when)
    try:
        reader = SignedReader.for_options(bucket, {"endpoint_url": f"http://127.0.0.1:{proxy.server_address[1]}"})
        assert reader is not None
        key, data = next(iter(KEYS.items()))
        if when == "with":
            with pytest.raises(NotPlain):  # bytes after the body: in doubt, the client reads it
                reader.get(f"cassettes/{key}")
        else:
            assert reader.get(f"cassettes/{key}") == data
            proxy.go.set()
            assert proxy.sent.wait(10)
        items, token = reader.list_page("cassettes/", None)
        assert token is None
        assert sorted(k for k, _ in items) == sorted(f"cassettes/{k}" for k in [*KEYS, "objects/empty"])  # moto's
        assert proxy.connections == 2 and proxy.answered == 2
    finally:
        proxy.close()
