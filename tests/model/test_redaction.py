"""Redaction rules: a corpus of real-shaped FAKE credentials (built at run time) is caught and
redacted, a corpus of ordinary cassette content produces no finding, and findings never
carry the secret.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import random
import string
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.errors import ConfigError
from casstore.model.redaction import RuleSet, key_words, mask, redact, scan
from tests.helpers.fakes import ALNUM, rnd, upper


def pem(kind: str) -> str:
    dashes = "-" * 5
    body = "\n".join(rnd(64, ALNUM + "+/") for _ in range(6))
    return f"{dashes}BEGIN {kind}PRIVATE KEY{dashes}\n{body}\n{dashes}END {kind}PRIVATE KEY{dashes}\n"


def jwt() -> str:
    def seg(d: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return seg({"alg": "HS256", "typ": "JWT"}) + "." + seg({"sub": rnd(10), "iat": 1700000000}) + "." + rnd(43, ALNUM + "-_")


def fake_credentials() -> list[tuple[str, str, object, str]]:
    """(label, secret text, object holding it the way a cassette would, expected rule)."""
    c: list[tuple[str, str, object, str]] = []

    def in_text(label: str, secret: str, rule: str, fmt: str = "here is my key {} ok") -> None:
        c.append((label, secret, {"response": {"body": {"text": fmt.format(secret)}}}, rule))

    in_text("openai legacy", "sk-" + rnd(48), "openai-key")
    in_text("openai project", "sk-" + "proj-" + rnd(156, ALNUM + "-_"), "openai-key")
    in_text("openai service account", "sk-" + "svcacct-" + rnd(74, ALNUM + "-_"), "openai-key")
    in_text("openai admin", "sk-" + "admin-" + rnd(60, ALNUM + "-_"), "openai-key")
    in_text("anthropic api", "sk-" + "ant-api03-" + rnd(93, ALNUM + "-_") + "AA", "anthropic-key")
    in_text("anthropic admin", "sk-" + "ant-admin01-" + rnd(93, ALNUM + "-_") + "AA", "anthropic-key")
    in_text("aws access key id", "AKIA" + upper(16), "aws-access-key-id")
    in_text("aws temporary key id", "ASIA" + upper(16), "aws-access-key-id", "creds={}")
    aws_secret = rnd(40, ALNUM + "/+")
    c.append(("aws secret in ini text", aws_secret,
              {"body_text": f"[default]\naws_secret_access_key = {aws_secret}\n"}, "aws-secret-key"))
    sts_secret = rnd(40, ALNUM + "/+")
    c.append(("aws secret next to its id (STS response)", sts_secret,
              {"Credentials": {"AccessKeyId": "ASIA" + upper(16), "Secret": sts_secret}}, "aws-secret-key"))
    c.append(("aws secret under its key name", aws_secret[::-1],
              {"env": {"AWS_SECRET_ACCESS_KEY": aws_secret[::-1]}}, "aws-secret-key"))
    in_text("github classic pat", "ghp_" + rnd(36), "github-token")
    in_text("github oauth", "gho_" + rnd(36), "github-token")
    in_text("github app server", "ghs_" + rnd(36), "github-token")
    in_text("github user-to-server", "ghu_" + rnd(36), "github-token")
    in_text("github fine-grained pat", "github_pat_" + rnd(22) + "_" + rnd(59), "github-token")
    in_text("slack bot", "xoxb-" + rnd(12, string.digits) + "-" + rnd(24), "slack-token")
    in_text("slack user", "xoxp-" + rnd(12, string.digits) + "-" + rnd(32), "slack-token")
    in_text("slack webhook", "https://hooks.slack.com/services/T" + upper(10) + "/B" + upper(10) + "/" + rnd(24),
            "slack-webhook", "post to {}")
    in_text("google api key", "AIza" + rnd(35, ALNUM + "-_"), "google-api-key", "url?k={}")
    in_text("jwt", jwt(), "jwt", "id {}")
    in_text("rsa private key", pem("RSA "), "pem-private-key", "{}")
    in_text("ec private key", pem("EC "), "pem-private-key", "key:\n{}")
    in_text("openssh private key", pem("OPENSSH "), "pem-private-key", "{}")
    in_text("pkcs8 private key", pem(""), "pem-private-key", "{}")
    in_text("bearer in a raw header line", rnd(40, ALNUM + "._-"), "bearer-token", "Authorization: Bearer {}\r\n")
    in_text("stripe live key", "sk_" + "live_" + rnd(24), "stripe-key")
    in_text("huggingface token", "hf_" + rnd(34, string.ascii_letters), "huggingface-token")
    in_text("password in a database url", rnd(16), "url-credentials", "postgres://app:{}@db.internal:5432/x")

    def in_obj(label: str, secret: str, obj: object, rule: str) -> None:
        c.append((label, secret, obj, rule))

    tok = rnd(32)
    in_obj("authorization header", tok, {"request": {"headers": {"authorization": f"Bearer {tok}"}}}, "authorization")
    ck = "session=" + rnd(40)
    in_obj("cookie header", ck, {"request": {"headers": {"Cookie": ck}}}, "cookie")
    sc = "__Secure-sid=" + rnd(30) + "; Path=/; HttpOnly"
    in_obj("set-cookie list", sc, {"response": {"headers": {"set-cookie": ["a=b1234567", sc]}}}, "cookie")
    xk = rnd(28)
    in_obj("x-api-key header", xk, {"request": {"headers": {"X-Api-Key": xk}}}, "api-key")
    qk = rnd(24)
    in_obj("api_key in a query string", qk, {"request": {"url": f"https://api.example.com/v1/search?q=cats&api_key={qk}"}}, "api-key")
    pw = "hunter2-" + rnd(10)
    in_obj("password in a json body", pw, {"request": {"body": {"user": "ana", "password": pw}}}, "password")
    cs = rnd(32)
    in_obj("client_secret in a form body", cs,
           {"request": {"body": f"grant_type=client_credentials&client_id=abc&client_secret={cs}"}}, "secret")
    rt = rnd(48)
    in_obj("refresh_token inside json text", rt,
           {"response": {"body_text": '{\n  "refresh_token": "' + rt + '",\n  "token_type": "bearer"\n}'}}, "token")
    at = rnd(40)
    in_obj("sessionToken (camelCase)", at, {"body": {"sessionToken": at}}, "token")
    hv = "the hidden answer is " + rnd(12)
    in_obj("holdout field (deny list)", hv, {"body": {"holdout": {"answer": hv}}}, "holdout")
    vv = "s.vault-" + rnd(20)
    in_obj("vault field (deny list)", vv, {"body": {"vault": vv}}, "vault")
    av = rnd(24)
    in_obj("auth field (deny list)", av, {"body": {"auth": av}}, "auth")
    sv = rnd(24)
    in_obj("secret field (deny list)", sv, {"body": {"secret": sv}}, "secret")
    hk = rnd(32)
    in_obj("HAR-style header", hk, {"headers": [{"name": "x-api-key", "value": hk}]}, "api-key")
    pk = rnd(32)
    in_obj("header as a (name, value) pair", pk, {"headers": [["Authorization", "Token " + pk]]}, "authorization")
    return c


CORPUS = fake_credentials()


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 30
    assert len({label for label, *_ in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("label,secret,obj,rule", CORPUS, ids=[c[0] for c in CORPUS])
def test_fake_credential_is_found_and_redacted(label: str, secret: str, obj: object, rule: str) -> None:
    rs = RuleSet()
    findings = scan(obj, rs)
    assert rule in {f.rule for f in findings}, f"{label}: {findings}"
    # a finding never carries the secret: not in the preview, not in the path
    for f in findings:
        assert secret not in json.dumps(f.to_dict())
        assert secret[4:] not in f.preview
    original = copy.deepcopy(obj)
    new, hits = redact(obj, rs)
    assert obj == original, "redact must not modify its input"
    dumped = json.dumps(new)
    assert secret not in dumped and json.dumps(secret)[1:-1] not in dumped
    assert hits.get(rule, 0) >= 1
    assert f"[REDACTED:{rule}]" in dumped
    # a redacted object scans clean, and redacting again changes nothing
    assert scan(new, rs) == []
    assert redact(new, rs) == (new, {})


def test_only_the_token_inside_a_string_is_replaced() -> None:
    key = "sk-" + rnd(48)
    new, hits = redact({"content": f"Use {key} to call the API."})
    assert new == {"content": "Use [REDACTED:openai-key] to call the API."}
    assert hits == {"openai-key": 1}


def test_authorization_keeps_its_scheme() -> None:
    new, _ = redact({"authorization": "Bearer " + rnd(30), "proxy-authorization": "Basic " + rnd(20)})
    assert new == {"authorization": "Bearer [REDACTED:authorization]",
                   "proxy-authorization": "Basic [REDACTED:authorization]"}


def test_query_string_keeps_other_params() -> None:
    new, _ = redact({"url": "https://x.test/v1?q=1&api_key=" + rnd(20) + "&page=2"})
    assert new == {"url": "https://x.test/v1?q=1&api_key=[REDACTED:api-key]&page=2"}


def ordinary_content() -> dict:
    """What cassettes are full of: ids, hashes, base64 images, UUIDs, token counts, model names."""
    r = random.Random(7)
    png = base64.b64encode(bytes(r.getrandbits(8) for _ in range(150_000))).decode()
    png_url = base64.urlsafe_b64encode(bytes(r.getrandbits(8) for _ in range(30_000))).decode()
    return {
        "request": {
            "method": "POST", "url": "https://api.openai.com/v1/chat/completions?api-version=2024-06-01",
            "headers": {"content-type": "application/json", "user-agent": "OpenAI/Python 1.54.0",
                        "x-stainless-lang": "python", "openai-organization": "org-" + "abcdefghij" * 2,
                        "idempotency-key": str(uuid.UUID(int=r.getrandbits(128))), "x-ratelimit-limit-tokens": "150000"},
            "body": {
                "model": "gpt-4o-2024-08-06", "max_tokens": 512, "max_completion_tokens": 900, "temperature": 0.2,
                "messages": [
                    {"role": "system", "content": "You are a careful assistant. Ask-me-anything mode is off."},
                    {"role": "user", "content": [
                        {"type": "text", "text": "Describe this image; the author is Jane. Risk-free-returns-2024."},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png}},
                    ]},
                ],
                "tools": [{"type": "function", "function": {"name": "lookup_order", "parameters": {
                    "type": "object", "properties": {"order_id": {"type": "integer"}}}}}],
                "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 2,
            },
        },
        "response": {
            "status": 200,
            "headers": {"x-request-id": "req_" + hashlib.md5(b"x").hexdigest(), "openai-processing-ms": "431",
                        "x-ratelimit-remaining-tokens": "149488", "x-ratelimit-reset-tokens": "204ms",
                        "anthropic-ratelimit-tokens-remaining": "39000", "cf-ray": "8f2b3c4d5e6f7a8b-AMS",
                        "etag": 'W/"' + hashlib.sha1(b"y").hexdigest() + '"'},
            "body": {
                "id": "chatcmpl-" + "AbCdEfGhIjKlMnOpQrStUvWxYz12", "object": "chat.completion",
                "created": 1732200000, "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_45cf54deae",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "The image shows a cat. Bearer of good news: it is fine.",
                    "tool_calls": [{"id": "call_" + "Xy7Zq2Lm9Np4Rs6Tu8Vw1Ab3", "type": "function",
                                    "function": {"name": "lookup_order", "arguments": "{\"order_id\": 7}"}}]},
                    "logprobs": {"content": [{"token": " The image", "logprob": -0.01, "bytes": [32, 84],
                                              "top_logprobs": [{"token": " A", "logprob": -4.2}]}]}}],
                "usage": {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
                          "prompt_tokens_details": {"cached_tokens": 0},
                          "completion_tokens_details": {"reasoning_tokens": 0}},
            },
        },
        "anthropic": {"id": "msg_01" + "XFDUDYJgAACzvnptvVoYEL", "type": "message", "model": "claude-3-5-sonnet-20241022",
                      "stop_reason": "end_turn", "stop_sequence": None,
                      "content": [{"type": "tool_use", "id": "toolu_01" + "A09q90qw90lq917835lq9", "name": "get_weather",
                                   "input": {"location": "San Francisco"}}],
                      "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 0}},
        "embedding": {"model": "text-embedding-3-small", "data": [{"embedding": [r.uniform(-1, 1) for _ in range(64)]}]},
        "oauth_metadata": {"token_type": "bearer", "expires_in": 3600, "token_endpoint": "https://auth.example.com/token",
                           "authorization_endpoint": "https://auth.example.com/authorize", "scope": "read write"},
        "pagination": {"next_page_token": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA3", "has_more": True},
        "tokenizer_config": {"tokenizer": "cl100k_base", "eos_token": "</s>", "pad_token": "<pad>", "bos_token_id": 1},
        "meta": {"author": "Jane Doe", "authors": ["a", "b"], "secret_name": "prod/db", "api_key_name": "default",
                 "auth_method": "oauth2", "password_required": True, "has_secret": False, "token_count": 1234,
                 "tokens": 99, "authentication": "required", "auth_type": "none"},
        "hashes": {"sha256": hashlib.sha256(b"z").hexdigest(), "digest": "sha256:" + hashlib.sha256(b"w").hexdigest(),
                   "git": hashlib.sha1(b"v").hexdigest(), "identity": hashlib.sha256(b"u").hexdigest()},
        "ids": [str(uuid.UUID(int=r.getrandbits(128))) for _ in range(20)],
        "blob_urlsafe": png_url,
        "redacted_already": {"authorization": "Bearer [REDACTED:authorization]", "x-api-key": "***",
                             "password": "<redacted>", "cookie": ""},
        "redaction": {"rules": RuleSet().describe(), "hits": {"token": 3, "authorization": 1}},
        "prose": "A tokenizer splits text into tokens; the secret of good tests is replayable recordings.",
    }


def test_ordinary_cassette_content_has_no_finding() -> None:
    content = ordinary_content()
    assert scan(content) == []
    new, hits = redact(content)
    assert hits == {} and new == content


def test_no_false_positives_on_key_names() -> None:
    for key in ("max_tokens", "prompt_tokens", "total_tokens", "author", "tokenizer", "token_type",
                "authorization_endpoint", "secret_name", "x-ratelimit-remaining-tokens", "next_page_token"):
        assert scan({key: "Abcdef123456789xyz"}) == [], key
    for key in ("token", "access_token", "x-auth-token", "client_secret", "Authorization", "apiKey", "x-api-key",
                "api_key", "password", "set-cookie", "holdout", "vault", "auth"):
        assert scan({key: "Abcdef123456789xyz"}), key


def test_key_words() -> None:
    assert key_words("X-Api-Key") == ("x", "api", "key")
    assert key_words("sessionToken") == ("session", "token")
    assert key_words("AWSSecretKey") == ("aws", "secret", "key")
    assert key_words("max_tokens") == ("max", "tokens")


def test_mask_never_shows_more_than_four_characters() -> None:
    s = rnd(40)
    assert mask(s) == f"{s[:4]}…(40 chars)"
    assert mask("hunter2") == "…(7 chars)"


def test_paths_are_json_paths_with_entry_index() -> None:
    key = "AKIA" + upper(16)
    cas = {"entries": [{"response": {"body": {"x": 1}}}, {"response": {"headers": {"x-amz-thing": key}}}]}
    (f,) = scan(cas)
    assert f.path == '$.entries[1].response.headers["x-amz-thing"]'
    assert f.entry == 1 and f.rule == "aws-access-key-id"


def test_config_rules_paths_keys_patterns_allow_placeholder() -> None:
    rs = RuleSet.from_config({
        "paths": ["customer.email", "order.*.card"],
        "keys": ["ssn"],
        "patterns": [r"ACME-(?P<secret>[0-9]{6})"],
        "allow": [r"^AKIAEXAMPLE"],
        "placeholder": "<{rule}>",
    })
    obj = {
        "customer": {"email": "ana@example.com", "name": "Ana"},
        "order": {"a1": {"card": 4111111111111111}},
        "profile": {"SSN": "123-45-6789"},
        "note": "ticket ACME-123456 filed",
        "example_key": "AKIAEXAMPLE" + "ABCDEFGHI",
    }
    new, hits = redact(obj, rs)
    assert new == {
        "customer": {"email": "<path:customer.email>", "name": "Ana"},
        "order": {"a1": {"card": "<path:order.*.card>"}},
        "profile": {"SSN": "<key:ssn>"},
        "note": "ticket ACME-<pattern:ACME-(?P<secret>[0-9]{6})> filed",
        "example_key": obj["example_key"],
    }
    assert hits == {"key:ssn": 1, "path:customer.email": 1, "path:order.*.card": 1,
                    "pattern:ACME-(?P<secret>[0-9]{6})": 1}
    assert "path:customer.email" in rs.describe() and "key:ssn" in rs.describe()
    assert scan(new, rs) == []


def test_allow_list_matches_the_json_path_too() -> None:
    rs = RuleSet.from_config({"allow": [r"\.fixtures\.fake_key$"]})
    key = "sk-" + rnd(48)
    assert scan({"fixtures": {"fake_key": key}}, rs) == []
    assert scan({"fixtures": {"other": key}}, rs)


def test_from_config_accepts_the_whole_config_and_rejects_bad_tables() -> None:
    assert RuleSet.from_config({"redaction": {"keys": ["ssn"]}}).describe()[-1] == "key:ssn"
    assert RuleSet.from_config(None).describe() == RuleSet().describe()
    with pytest.raises(ConfigError, match=r"redaction.patterns\[0\]"):
        RuleSet.from_config({"patterns": ["("]})
    with pytest.raises(ConfigError, match="dot-path"):
        RuleSet.from_config({"paths": ["a..b"]})
    with pytest.raises(ConfigError, match="list of strings"):
        RuleSet.from_config({"keys": "ssn"})


def test_secret_in_a_key_name_is_withheld_from_the_path() -> None:
    key = "ghp_" + rnd(36)
    findings = scan({"tokens_by_value": {key: 1}})
    assert findings and all(key not in f.path and key[4:] not in f.preview for f in findings)


SAFE_TEXT = st.text(alphabet=string.ascii_lowercase + " ,.", max_size=40)
SAFE_KEYS = st.sampled_from(["model", "content", "role", "max_tokens", "author", "id", "index", "text", "n"])
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | SAFE_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(SAFE_KEYS, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(JSONISH)
def test_redact_is_identity_on_content_without_secrets(obj: object) -> None:
    assert redact(obj) == (obj, {})
    assert scan(obj) == []


def test_the_built_in_rules_compile_on_first_use_and_behave_as_compiled_patterns() -> None:
    """The built-in rules' regexes are compiled when first used (issue #19: ~3 ms of every
    add and check before its first file); each answers as ``re.compile`` of its source."""
    import re
    import subprocess
    import sys

    from casstore.model.redaction_rules import BUILTIN_VALUE_RULES, lazy_pattern

    code = ("import re, casstore.model.redaction, casstore.model.redaction_rules as r; "
            "print(sum('search' in vars(v.regex) for v in r.BUILTIN_VALUE_RULES))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "0\n"
    text = "key sk-" + rnd(48) + " and AKIA" + upper(16) + " at https://u:" + rnd(12) + "@h.test/ Bearer " + rnd(30)
    for rule in BUILTIN_VALUE_RULES:
        rx = re.compile(rule.regex.pattern)
        assert [m.span() for m in rule.regex.finditer(text)] == [m.span() for m in rx.finditer(text)]
        assert rule.regex.sub("#", text) == rx.sub("#", text) and rule.regex.groupindex == rx.groupindex
    lazy = lazy_pattern(r"(?P<secret>a+)b", re.I)
    assert lazy == re.compile(r"(?P<secret>a+)b", re.I) and repr(lazy) == repr(re.compile(r"(?P<secret>a+)b", re.I))
    assert hash(lazy) == hash(re.compile(r"(?P<secret>a+)b", re.I)) and lazy == lazy_pattern(r"(?P<secret>a+)b", re.I)
    assert lazy.fullmatch("AAB") is not None and lazy.flags == re.compile("x", re.I).flags


@pytest.mark.parametrize("header, kept", [
    ("csrftoken={v}; expires=Sat, 27 Nov 2027 02:00:00 GMT; Max-Age=31449600; Path=/; SameSite=Lax",
     "csrftoken=[REDACTED:cookie]; expires=Sat, 27 Nov 2027 02:00:00 GMT; Max-Age=31449600; Path=/; SameSite=Lax"),
    # a folded header (two Set-Cookie joined by ", "), one of them already redacted
    ("a=[REDACTED:cookie]; Path=/, sid={v}; HttpOnly; Secure",
     "a=[REDACTED:cookie]; Path=/, sid=[REDACTED:cookie]; HttpOnly; Secure"),
    ("theme=dark; sid={v}", "theme=[REDACTED:cookie]; sid=[REDACTED:cookie]"),  # a Cookie request header
    ("{v}", "[REDACTED:cookie]"),  # a value with no name
    # an attribute out of its shape is a value too
    ("sid=1; Path=/; Domain={v} evil", "sid=[REDACTED:cookie]; Path=/; Domain=[REDACTED:cookie]"),
])
def test_cookie_names_and_attributes_are_kept_each_value_redacted(header: str, kept: str) -> None:
    value = rnd(24)
    doc = {"response": {"headers": {"Set-Cookie": [header.format(v=value)]}}}
    new, hits = redact(doc)
    assert new["response"]["headers"]["Set-Cookie"] == [kept] and "cookie" in hits
    assert value not in json.dumps(new) and scan(new) == []
    found = scan(doc)
    assert found and {f.rule for f in found} == {"cookie"}
    assert not [f for f in found if value in json.dumps(f.to_dict())]


def test_a_request_cookie_named_like_an_attribute_is_a_cookie() -> None:
    # a request's Cookie header holds only cookies: `path=/…` there is a cookie's value
    value = "/" + rnd(24)
    for headers in ({"Cookie": f"sid=1; path={value}"}, [["cookie", f"sid=1; path={value}"]]):
        new, _hits = redact({"request": {"headers": headers}})
        assert value not in json.dumps(new) and "path=[REDACTED:cookie]" in json.dumps(new)
    # in a Set-Cookie, the same piece is the attribute Path, kept
    new, _hits = redact({"response": {"headers": {"Set-Cookie": f"sid=1; path={value}"}}})
    assert f"path={value}" in json.dumps(new)
