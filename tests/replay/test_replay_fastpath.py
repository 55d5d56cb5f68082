"""The replay fast paths compute exactly what the straightforward code computes.

Identities are pinned: rule 1 to values computed before the fast paths existed (cassettes
recorded under it must keep matching), rule 2 to the values it gave when introduced; and the fast identity path is compared with the reference path
(parse as sent, ``canonical_value`` deep copy, stdlib canonical JSON) on generated bodies.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.errors import IntegrityError
from casstore.model import identity, jsonvalues
from casstore.model.canonical import canonical_json
from casstore.model.identity import canonical_value, http_identity, normalize_http, tool_identity

H = [("Content-Type", "application/json"), ("Authorization", "Bearer x"), ("Anthropic-Version", "2023-06-01")]
CHAT = "https://api.openai.com/v1/chat/completions"

# (method, url, headers, body) -> identity, as computed by casstore before the fast paths
GOLDEN = [
    (("POST", CHAT, H, json.dumps({
        "model": "gpt-4o-mini", "temperature": 1.0, "top_p": 0.95, "max_tokens": None, "stream": 1,
        "messages": [{"role": "user", "content": "h\u00e9llo \u2028 \U0001F600 \x7f \x01"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"x": 1e-7, "y": 2.5e20, "z": -0.0}}}],
    })), "7e0dbb18e50452743994b29fa1c588bcf626b452d2437545fc0a031872ecdaf1"),
    (("POST", CHAT, H,
      '{"model":"m","temperature":NaN,"n":Infinity,"seed":-Infinity,"big":123456789012345678901234567890,'
      '"f":1e400,"g":1E-5,"h":3.0e2}'), "5d878c6f29d6250e7578661f52da82d45f4636ae6876808a481122a84dafbb1e"),
    (("POST", "https://Example.COM:443/api/x?b=2&a=1&api_key=k&_=3#frag",
      [("Content-Type", "application/json"), ("X-Custom", "v1"), ("x-custom", "v2"), ("User-Agent", "ua")],
      '{"a": [1.5, 2.0, {"b": null}], "c": "\u00ff"}'), "656a9456bce8fa17b58be78eeee1fee4a3abaf0dd009cc3c49125e5dfaf52e52"),
    (("GET", "http://h:8080/p", [("Accept", "*/*")], b""), "03feea624d8a31777a30483885b1aefaa5600efc28d92a51c54748187e8b5842"),
    (("POST", "http://h/form", [("Content-Type", "application/x-www-form-urlencoded")], "b=2&a=1&a=0"),
     "607dea0207914a7cbba3abf10891ae2fa616fae5925e2fd15c077b620a890e1a"),
    (("POST", "http://h/mp", [("Content-Type", 'multipart/form-data; boundary="abc123"')],
      b"--abc123\r\nContent-Disposition: form-data; name=x\r\n\r\n1\r\n--abc123--"),
     "811a051f9db9665225fdb30e3fc7999b949ad9d0933119f1d4ee0801c0ae250d"),
    (("POST", "http://h/bin", [("Content-Type", "application/octet-stream")], b"\xff\xfe\x00"),
     "c4835bb10e7be4146824dda66b9f14f573230016387aef94eafb9d7676365e51"),
    (("POST", "http://h/nojson", [], '  [1, 2.0, "x"]'), "86d4105b6a7e56ba88e39b8579c6135a644299c0767be949d70bcc76ef2f8800"),
    (("POST", "https://api.anthropic.com/v1/messages", H, json.dumps(
        {"model": "claude", "max_tokens": 1024, "messages": [{"role": "user", "content": "x"}], "temperature": 0.7})),
     "73afe7bbf9bae485acdc6b218acd3b5a68e37ba15e898d6dd1072f84c6ce507a"),
    (("POST", "https://api.openai.com/v1/embeddings", H, "[1,2]"),
     "29b9954dae46035ea3d2de74560a7ecca6544cac2083af0e2b751c8a24682225"),
    (("POST", "http://h/t", [("Content-Type", "text/plain")], "plain text \u00e9"),
     "eb74003bbf56f4217a31b579d89dd261a457c91a0b7f593e9c66c4092af0a4b9"),
    (("POST", "http://h/j", [("Content-Type", "application/json")], '{"x": 1.0, "x": 2.5}'),
     "4cdf04acfcdac0fa0c17ffa676d06eeeb0876f7224bff3538a5ca866db7e6714"),
    (("POST", "http://h/bom", [("Content-Type", "application/json")], '\ufeff{"x": 1}'),
     "91cba722597a88a243fbb2e6627f9a7da3c5756346b19e04f7f3ae19b11c8a1c"),
]


# the same requests under rule 2 (client default headers and the LLM host left out)
GOLDEN_RULE2 = [
    "a217bf845f747fd63932127de2d6cb6b8166cd1e858180648b7ffadd0d55dbe9",
    "f8b131017b24336140b18ab1c827dc107b2b20692526561222b1ca7d4b683718",
    "656a9456bce8fa17b58be78eeee1fee4a3abaf0dd009cc3c49125e5dfaf52e52",
    "8a73865775684e6afb12c028365c6ad680166937239d131553dc968a4f000918",
    "607dea0207914a7cbba3abf10891ae2fa616fae5925e2fd15c077b620a890e1a",
    "811a051f9db9665225fdb30e3fc7999b949ad9d0933119f1d4ee0801c0ae250d",
    "c4835bb10e7be4146824dda66b9f14f573230016387aef94eafb9d7676365e51",
    "86d4105b6a7e56ba88e39b8579c6135a644299c0767be949d70bcc76ef2f8800",
    "dd7f4b53f0da2c8d62c30bfa91fe7de32ad4d0cda21005fa4b62da3963a34e5d",
    "29b9954dae46035ea3d2de74560a7ecca6544cac2083af0e2b751c8a24682225",
    "eb74003bbf56f4217a31b579d89dd261a457c91a0b7f593e9c66c4092af0a4b9",
    "4cdf04acfcdac0fa0c17ffa676d06eeeb0876f7224bff3538a5ca866db7e6714",
    "91cba722597a88a243fbb2e6627f9a7da3c5756346b19e04f7f3ae19b11c8a1c",
]


@pytest.mark.parametrize(("request_", "expected"), GOLDEN, ids=[f"golden{i}" for i in range(len(GOLDEN))])
def test_identities_unchanged(request_, expected):
    method, url, headers, body = request_
    assert http_identity(method, url, headers, body, rule=1).identity == expected
    # twice: caches must not change the answer
    assert http_identity(method, url, headers, body, rule=1).identity == expected
    rule2 = GOLDEN_RULE2[GOLDEN.index((request_, expected))]
    assert http_identity(method, url, headers, body).identity == rule2
    assert http_identity(method, url, headers, body, rule=2).identity == rule2


def test_tool_identity_unchanged():
    ident = tool_identity("lookup", (1, 2.0, "x"), {"k": [1.5, None]})
    assert ident.identity == "3cbd20ba8ce540a68c50434fc6e056b5d3a2912ced9324f8389087499bc32539"


def _reference(method, url, headers, body):
    """The identity as the plain code computes it: display form, canonical_value, stdlib JSON."""
    doc = normalize_http(method, url, headers, body, normalizer=lambda d: d)  # the normalizer path
    data = json.dumps(canonical_value(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")
    return doc, hashlib.sha256(data).hexdigest()


def test_lone_surrogate_still_refused():
    with pytest.raises(IntegrityError):
        http_identity("POST", CHAT, H, '{"model": "\\ud800"}')
    with pytest.raises(IntegrityError):
        http_identity("POST", "http://h/j", H, '{"a": "\\ud800"}')


json_scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(body=st.dictionaries(st.text(max_size=8), json_values, max_size=6), llm=st.booleans(),
       ascii_only=st.booleans())
def test_fast_identity_equals_reference(body, llm, ascii_only):
    url = CHAT if llm else "https://example.com/api/x?z=1&a=2"
    text = json.dumps(body, ensure_ascii=ascii_only)
    fast = http_identity("POST", url, H, text)
    doc, digest = _reference("POST", url, H, text)
    if fast.salt is not None:  # rule 3 sealed a value redaction replaces (a "Cookie" key): not the plain hash
        assert fast.identity != digest and fast.document != canonical_value(doc)
        return
    assert fast.identity == digest
    assert fast.document == canonical_value(doc)
    assert fast.kind == doc["kind"]


@pytest.mark.parametrize("text", ["1.0", "-0.0", "1e400", "-1e400", "0.1", "1e-05", "2.5e+20", "123456789.125",
                                  "NaN", "Infinity", "-Infinity", "1E2", "5e-324", "1.7976931348623157e308"])
def test_number_forms_equal_reference(text):
    body = '{"model": "m", "temperature": %s, "tools": [{"p": %s}], "x": [%s]}' % (text, text, text)
    for url in (CHAT, "https://example.com/x"):
        fast = http_identity("POST", url, H, body)
        _doc, digest = _reference("POST", url, H, body)
        assert fast.identity == digest


def test_normalizer_sees_numbers_as_sent():
    seen = {}

    def norm(doc):
        seen["t"] = doc["input"]["temperature"]
        return doc

    http_identity("POST", CHAT, H, '{"model": "m", "temperature": 1.0}', normalizer=norm)
    assert isinstance(seen["t"], float)


def test_every_code_point_written_as_the_standard_library_writes_it():
    """canonical_json and the identity fast writer escape and sort keys exactly like json.dumps."""
    writers = [canonical_json, jsonvalues._dumps_checked] if jsonvalues._orjson is not None else [canonical_json]
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(chars), 4096):
        block = chars[i:i + 4096]
        value = {"".join(block[j:j + 3]): "".join(block[j:j + 64]) for j in range(0, len(block), 61)}
        value["n"] = [1, -2, 0.5, True, None, 2**63, -(2**63)]
        expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False).encode("utf-8")
        for write in writers:
            assert write(value) == expected


def test_every_path_gives_the_same_identity(monkeypatch):
    """orjson path, the float/int fallbacks, and the standard-library-only path agree."""
    bodies = [
        '{"model": "m", "temperature": 0.2, "top_p": 0.95, "messages": [{"role": "user", "content": "x"}]}',
        '{"model": "m", "temperature": 1e-05}',  # orjson writes 1e-5: standard path
        '{"model": "m", "seed": 123456789012345678901234567890}',  # beyond 64 bits: standard writer
        '{"model": "m", "tools": [{"x": 2.5e+20, "y": 0.5}]}',
    ]
    fast = [http_identity("POST", CHAT, H, b).identity for b in bodies]
    refs = [_reference("POST", CHAT, H, b)[1] for b in bodies]
    assert fast == refs
    if jsonvalues._orjson is not None:
        assert jsonvalues._FAST is not None
        doc = identity._normalize_http("POST", CHAT, identity._header_items(H), bodies[0], None, True, jsonvalues._FAST)
        assert jsonvalues._dumps_checked(doc) == canonical_json(canonical_value(doc))
        with pytest.raises(jsonvalues._NotOrjsonSafe):
            identity._normalize_http("POST", CHAT, identity._header_items(H), bodies[1], None, True, jsonvalues._FAST)
    monkeypatch.setattr(identity, "_FAST", None)
    assert [http_identity("POST", CHAT, H, b).identity for b in bodies] == refs
    for ((method, url, headers, body), expected), rule2 in zip(GOLDEN, GOLDEN_RULE2, strict=True):
        assert http_identity(method, url, headers, body, rule=1).identity == expected
        assert http_identity(method, url, headers, body).identity == rule2


def test_transport_header_pairs_as_before(monkeypatch):
    """The interception reads header pairs exactly as begin_http(multi_items()/items()) did."""
    import httpx
    import requests

    from casstore.replay import httpx as replay_httpx

    seen = []

    class FakeSession:
        def begin_http_lowered(self, method, url, items, body):
            seen.append(items)
            return "serve", None

    for value in (b"plain", "caf\u00e9".encode("latin-1"), "\u6f22\u5b57".encode("utf-8")):
        request = httpx.Request("POST", CHAT, headers=[("X-Mixed-Case", value), ("x-mixed-case", "2"),
                                                      ("Content-Type", "application/json")], content=b"{}")
        replay_httpx._begin(FakeSession(), request)
        assert seen[-1] == [(str(k).lower(), str(v)) for k, v in request.headers.multi_items()]

    prepared = requests.Request("POST", CHAT, headers={"X-Mixed-Case": "a", "Content-Type": "application/json"},
                                data=b"{}").prepare()
    prepared.headers["X-Bytes"] = b"raw"
    expected = [(str(k).lower(), str(v)) for k, v in prepared.headers.items()]
    got = [(str(k), str(v)) for k, v in prepared.headers.lower_items()]
    assert got == expected
