"""Call identity: property tests (hypothesis) and the normalization rules."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.model.canonical import canonical_json
from casstore.model.identity import (
    canonical_value,
    diff_documents,
    http_identity,
    llm_api,
    normalize_http,
    tool_identity,
)

CHAT = "https://api.openai.com/v1/chat/completions"
MESSAGES = "https://api.anthropic.com/v1/messages"
JSON_HEADERS = {"content-type": "application/json"}
HEX64 = re.compile(r"^[0-9a-f]{64}$")

# JSON values; floats kept finite (JSON has no NaN) and non-integral-or-integral both ways
scalars = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.text(max_size=12) | st.floats(
    allow_nan=False, allow_infinity=False, width=64
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=6)


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def _dump(value: Any, rng: random.Random) -> bytes:
    style = rng.choice([{"indent": 2}, {"indent": None}, {"separators": (",", ":")}, {"indent": "\t"}])
    text = json.dumps(_shuffled(value, rng), ensure_ascii=rng.random() < 0.5, **style)
    return (" \n" * rng.randint(0, 2) + text + "\n" * rng.randint(0, 2)).encode()


@settings(max_examples=150, deadline=None)
@given(body=json_objects, seed=st.integers(0, 2**32 - 1))
def test_key_order_and_whitespace_never_change_the_identity(body: dict[str, Any], seed: int) -> None:
    rng = random.Random(seed)
    for url in ("http://127.0.0.1:8080/api/items", CHAT):
        a = http_identity("POST", url, JSON_HEADERS, _dump(body, rng))
        b = http_identity("POST", url, JSON_HEADERS, _dump(body, rng))
        assert a.identity == b.identity
        assert HEX64.match(a.identity)


chat_bodies = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["gpt-4o", "gpt-4o-mini", "o3"]),
        "messages": st.lists(
            st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant"]), "content": st.text(max_size=20)}),
            min_size=1,
            max_size=3,
        ),
    },
    optional={
        "temperature": st.floats(0, 2, allow_nan=False),
        "top_p": st.floats(0, 1, allow_nan=False),
        "max_tokens": st.integers(1, 4096),
        "stream": st.booleans(),
        "seed": st.integers(0, 1000),
        "tools": st.lists(
            st.fixed_dictionaries(
                {"type": st.just("function"), "function": st.fixed_dictionaries({"name": st.text(min_size=1, max_size=8)})}
            ),
            min_size=1,
            max_size=2,
        ),
    },
)


def _mutations(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each changes exactly one semantic field."""
    out: list[tuple[str, dict[str, Any]]] = []

    def changed(field: str, value: Any) -> None:
        new = json.loads(json.dumps(body))
        new[field] = value
        out.append((field, new))

    changed("model", body["model"] + "-next")
    msgs = json.loads(json.dumps(body["messages"]))
    msgs[-1]["content"] += "!"
    changed("messages", msgs)
    msgs2 = json.loads(json.dumps(body["messages"]))
    msgs2[0]["role"] = "developer"
    changed("messages", msgs2)
    changed("messages", body["messages"] + [{"role": "user", "content": "more"}])
    changed("temperature", body.get("temperature", 1.0) + 0.25)
    changed("top_p", 0.25 if body.get("top_p") != 0.25 else 0.75)  # always another value
    changed("max_tokens", body.get("max_tokens", 7) + 1)
    changed("stream", not body.get("stream", False))
    changed("seed", body.get("seed", 0) + 1)
    tools = json.loads(json.dumps(body.get("tools", [])))
    tools.append({"type": "function", "function": {"name": "extra_tool"}})
    changed("tools", tools)
    changed("response_format", {"type": "json_object"})
    return out


@settings(max_examples=100, deadline=None)
@given(body=chat_bodies)
def test_any_semantic_field_change_changes_the_identity(body: dict[str, Any]) -> None:
    base = http_identity("POST", CHAT, JSON_HEADERS, json.dumps(body)).identity
    for field, new in _mutations(body):
        assert http_identity("POST", CHAT, JSON_HEADERS, json.dumps(new)).identity != base, field


@settings(max_examples=100, deadline=None)
@given(body=json_objects, key=st.text(min_size=1, max_size=8), value=json_values)
def test_any_change_to_a_generic_json_body_changes_the_identity(body: dict[str, Any], key: str, value: Any) -> None:
    changed = dict(body)
    changed[key] = value
    same = canonical_json(canonical_value(changed)) == canonical_json(canonical_value(body))
    a = http_identity("POST", "http://127.0.0.1/x", JSON_HEADERS, json.dumps(body)).identity
    b = http_identity("POST", "http://127.0.0.1/x", JSON_HEADERS, json.dumps(changed)).identity
    assert (a == b) == same


@given(x=st.integers(-(10**9), 10**9))
def test_integral_floats_equal_ints(x: int) -> None:
    a = http_identity("POST", CHAT, JSON_HEADERS, json.dumps({"model": "m", "temperature": x}))
    b = http_identity("POST", CHAT, JSON_HEADERS, json.dumps({"model": "m", "temperature": float(x)}))
    assert a.identity == b.identity
    assert canonical_value(-0.0) == 0 and canonical_value(1e2) == 100 and canonical_value(0.5) == 0.5
    assert canonical_value(True) is True  # booleans are not numbers here


def test_volatile_headers_and_query_params_do_not_count() -> None:
    url = "https://example.com/v1/items?b=2&a=1"
    base = http_identity("GET", url, {"accept": "application/json"}, None)
    noisy = http_identity(
        "GET",
        "https://EXAMPLE.com:443/v1/items?a=1&api_key=abc&b=2&_=123",
        {
            "Accept": "application/json",
            "Authorization": "Bearer abc",
            "User-Agent": "x/1",
            "X-Request-Id": "r1",
            "Idempotency-Key": "k",
            "x-stainless-retry-count": "1",
            "Date": "Mon",
            "Cookie": "s=1",
            "Accept-Encoding": "gzip, br",
            "traceparent": "00-1-2-01",
        },
        None,
    )
    assert noisy.identity == base.identity
    assert base.target == "GET https://example.com/v1/items?a=1&b=2"
    assert http_identity("GET", url + "&c=3", {"accept": "application/json"}, None).identity != base.identity
    assert http_identity("GET", url, {"x-tenant": "b"}, None).identity != base.identity
    assert http_identity("POST", url, {"accept": "application/json"}, None).identity != base.identity
    assert http_identity("GET", url.replace("https", "http"), {"accept": "application/json"}, None).identity != base.identity


def test_llm_identity_ignores_sdk_headers_but_not_api_version_headers() -> None:
    body = json.dumps({"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    a = http_identity("POST", MESSAGES, {**JSON_HEADERS, "anthropic-version": "2023-06-01", "x-api-key": "k1"}, body)
    b = http_identity(
        "POST", MESSAGES, {**JSON_HEADERS, "anthropic-version": "2023-06-01", "x-api-key": "k2", "accept": "*/*"}, body
    )
    c = http_identity("POST", MESSAGES, {**JSON_HEADERS, "anthropic-version": "2024-01-01"}, body)
    assert a.identity == b.identity != c.identity
    assert a.kind == "llm" and a.models == ["claude"]
    assert a.document["api"] == "anthropic.messages"


def test_llm_nulls_are_defaults_and_tools_are_hashed() -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    a = http_identity("POST", CHAT, JSON_HEADERS, json.dumps({"model": "m", "messages": [], "tools": tools}))
    b = http_identity(
        "POST", CHAT, JSON_HEADERS, json.dumps({"model": "m", "messages": [], "tools": tools, "user": None, "stream": False})
    )
    assert a.identity == b.identity
    assert a.document["input"]["tools"].startswith("sha256:")
    display = normalize_http("POST", CHAT, JSON_HEADERS, json.dumps({"model": "m", "tools": tools}), for_identity=False)
    assert display["input"]["tools"] == tools


def test_recognized_llm_endpoints() -> None:
    assert llm_api("POST", "https://api.openai.com/v1/chat/completions") == "openai.chat"
    assert llm_api("POST", "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=1") == "openai.chat"
    assert llm_api("POST", "https://api.openai.com/v1/responses") == "openai.responses"
    assert llm_api("POST", "https://api.openai.com/v1/embeddings") == "openai.embeddings"
    assert llm_api("POST", "https://api.anthropic.com/v1/messages") == "anthropic.messages"
    assert llm_api("GET", "https://api.openai.com/v1/responses") is None
    assert llm_api("POST", "https://api.anthropic.com/v1/messages/count_tokens") is None
    assert http_identity("POST", CHAT, JSON_HEADERS, b"not json").kind == "http"


def test_form_multipart_and_bytes_bodies() -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert http_identity("POST", "http://h/f", form, "a=1&b=2").identity == http_identity("POST", "http://h/f", form, "b=2&a=1").identity
    assert http_identity("POST", "http://h/f", form, "a=1&b=2").identity != http_identity("POST", "http://h/f", form, "a=1&b=3").identity

    def multipart(boundary: str, payload: str) -> tuple[dict[str, str], bytes]:
        body = f'--{boundary}\r\nContent-Disposition: form-data; name="f"\r\n\r\n{payload}\r\n--{boundary}--\r\n'
        return {"content-type": f"multipart/form-data; boundary={boundary}"}, body.encode()

    h1, b1 = multipart("abc123", "hello")
    h2, b2 = multipart("zzz999", "hello")
    h3, b3 = multipart("zzz999", "hullo")
    assert http_identity("POST", "http://h/u", h1, b1).identity == http_identity("POST", "http://h/u", h2, b2).identity
    assert http_identity("POST", "http://h/u", h2, b2).identity != http_identity("POST", "http://h/u", h3, b3).identity
    raw = bytes(range(256))
    octet = {"content-type": "application/octet-stream"}
    assert http_identity("PUT", "http://h/b", octet, raw).identity != http_identity("PUT", "http://h/b", octet, raw[::-1]).identity
    # text bodies are not JSON: whitespace there is meaningful
    text = {"content-type": "text/plain"}
    assert http_identity("POST", "http://h/t", text, "a b").identity != http_identity("POST", "http://h/t", text, "a  b").identity


def test_user_normalizer_hook() -> None:
    def drop_session(doc: dict[str, Any]) -> dict[str, Any]:
        doc["body"]["json"].pop("session", None)
        return doc

    a = http_identity("POST", "http://h/x", JSON_HEADERS, json.dumps({"q": 1, "session": "s1"}), normalizer=drop_session)
    b = http_identity("POST", "http://h/x", JSON_HEADERS, json.dumps({"q": 1, "session": "s2"}), normalizer=drop_session)
    c = http_identity("POST", "http://h/x", JSON_HEADERS, json.dumps({"q": 2, "session": "s2"}), normalizer=drop_session)
    assert a.identity == b.identity != c.identity
    in_place = http_identity("POST", "http://h/x", JSON_HEADERS, "{}", normalizer=lambda d: None)
    assert in_place.identity == http_identity("POST", "http://h/x", JSON_HEADERS, "{}").identity


def test_tool_identity() -> None:
    a = tool_identity("lookup_order", (7,), {"verbose": True})
    assert a.kind == "tool" and a.target == "lookup_order" and HEX64.match(a.identity)
    assert a.identity == tool_identity("lookup_order", (7.0,), {"verbose": True}).identity
    assert a.identity != tool_identity("lookup_order", (8,), {"verbose": True}).identity
    assert a.identity != tool_identity("lookup_order", (), {"order_id": 7, "verbose": True}).identity
    assert a.identity != tool_identity("cancel_order", (7,), {"verbose": True}).identity
    assert tool_identity("t", ({"b": 1, "a": 2},)).identity == tool_identity("t", ({"a": 2, "b": 1},)).identity


def test_identity_documents_are_distinct_per_kind() -> None:
    http = http_identity("POST", "http://h/lookup_order", JSON_HEADERS, json.dumps([7]))
    tool = tool_identity("lookup_order", (7,))
    assert http.identity != tool.identity


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({"temperature": 0.0}, {"temperature": 0.7}, "temperature: 0.0 → 0.7"),
        ({"model": "a"}, {"model": "b"}, 'model: "a" → "b"'),
        ({}, {"seed": 1}, "seed: (absent) → 1"),
    ],
)
def test_diff_documents_reads_like_a_changelog(old: dict[str, Any], new: dict[str, Any], expected: str) -> None:
    a = normalize_http("POST", CHAT, JSON_HEADERS, json.dumps({"messages": [], **old}), for_identity=False)
    b = normalize_http("POST", CHAT, JSON_HEADERS, json.dumps({"messages": [], **new}), for_identity=False)
    assert diff_documents(a, b) == [expected]
    same = normalize_http("POST", CHAT, JSON_HEADERS, json.dumps({"messages": [], "temperature": 0}), for_identity=False)
    zero = normalize_http("POST", CHAT, JSON_HEADERS, json.dumps({"messages": [], "temperature": 0.0}), for_identity=False)
    assert diff_documents(same, zero) == []
