"""Every credential shape in every channel (issue #29, items 2 and 3), as an attacker tries them.

Fake credentials built at run time, sent by the real httpx and requests clients to the
loopback stub: a token as the URL's user (``http://TOKEN@host``, ``http://TOKEN:x-oauth-basic@host``),
headers whose names say nothing but the service's (``X-RapidAPI-Key``, ``x-functions-key``,
``DD-APPLICATION-KEY`` ...), an Azure SAS ``sig=`` and an Azure Functions ``code=`` in the
query, the same names in a JSON body, and a key wrapped in base64 inside JSON and a query.
None may appear in the working copy, the cache or the S3 bucket after ``add`` and ``push``;
``add`` and ``check`` refuse a hand-made copy holding any of them (exit 1, one line naming
the file, the field and the rule, never the secret); ``import vcr``, ``import jsonl`` and
``fork --set`` write none of them. One list (model/credentials.py) serves redaction, the
scan, URL masking and identity, and identity rules 1 and 2 are unchanged by it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.helpers.cassettes import make_cassette
from tests.helpers.fakes import ago, rnd
from tests.helpers.figures import record
from tests.reliability.test_secret_channels import bucket_objects, files_under, leaked, project  # noqa: F401 - a fixture

SECTION = "credential shapes (attacker)"

HEADERS = ["X-RapidAPI-Key", "x-rapidapi-key", "X-Access-Key", "x-functions-key", "DD-API-KEY", "DD-APPLICATION-KEY",
           "Ocp-Apim-Subscription-Key", "X-Goog-Api-Key", "x-honeycomb-team"]


def shapes() -> dict[str, str]:
    """One fake credential per shape and channel (no value rule knows the neutral ones)."""
    wrapped = "sk-" + "proj-" + rnd(48)
    out = {f"header {h}": rnd(40) for h in HEADERS}
    out |= {
        "url user": rnd(40),
        "url user with x-oauth-basic": rnd(40),
        "sas sig": base64.b64encode(bytes.fromhex(rnd(64, "0123456789abcdef"))).decode(),
        "functions code": rnd(54) + "==",
        "json x_functions_key": rnd(40),
        "json access_key": rnd(40),
        "wrapped key": wrapped,
        "wrapped key, base64": base64.b64encode(f"Authorization: Bearer {wrapped}".encode()).decode(),
        "wrapped key, base64url": base64.urlsafe_b64encode(wrapped.encode()).decode().rstrip("="),
    }
    out["sas sig, encoded"] = quote(out["sas sig"], safe="")
    return out


def send_every_shape(base: str, fakes: dict[str, str]) -> None:
    """httpx and requests, each shape through its channel."""
    import httpx
    import requests

    host = base.split("://", 1)[1]
    httpx.get(f"http://{fakes['url user']}@{host}/echo")
    requests.get(f"http://{fakes['url user with x-oauth-basic']}:x-oauth-basic@{host}/echo", timeout=10)
    for i, h in enumerate(HEADERS):
        send = httpx.get if i % 2 else (lambda url, headers: requests.get(url, headers=headers, timeout=10))
        send(f"{base}/echo?h={i}", headers={h: fakes[f"header {h}"]})
    httpx.get(f"{base}/echo", params={"sv": "2022-11-02", "sr": "b", "sig": fakes["sas sig"]})
    requests.get(f"{base}/echo", params={"code": fakes["functions code"]}, timeout=10)
    requests.post(f"{base}/echo", json={"x_functions_key": fakes["json x_functions_key"],
                                        "access_key": fakes["json access_key"]}, timeout=10)
    httpx.post(f"{base}/echo", json={"blob": fakes["wrapped key, base64"], "n": 1})
    httpx.get(f"{base}/echo", params={"data": fakes["wrapped key, base64url"]})


def test_every_shape_recorded_by_httpx_and_requests_reaches_no_file_cache_or_bucket(
        project: Path, casstore, llm_server, s3_server, s3_url: str, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    import casstore as cs

    fakes = shapes()
    with cs.use("shapes", mode="record"):
        send_every_shape(llm_server.url, fakes)
    sent = "".join(repr(s) for s in llm_server.seen)
    assert fakes["wrapped key, base64"] in sent and fakes["functions code"][:-2] in sent, "the stub saw no secret"
    wc = project / "tests" / "cassettes" / "shapes.json"
    problems = leaked("the working copy", wc.read_bytes(), fakes)
    hits = json.loads(wc.read_text())["redaction"]["hits"]
    assert {"url-credentials", "api-key", "signature", "openai-key"} <= set(hits), hits
    r = casstore("add", str(wc))
    assert r.exit_code == 0, r.stdout + r.stderr
    assert casstore("push").exit_code == 0
    for p in files_under(isolated_user / "cache"):
        problems += leaked(f"cache {p.name}", p.read_bytes(), fakes)
    for key, data in bucket_objects(s3_server, s3_url).items():
        problems += leaked(f"bucket {key}", data, fakes)
    r = casstore("check")
    assert r.exit_code == 0, r.stdout + r.stderr
    record(SECTION, shapes_recorded=len(fakes))
    assert not problems, problems
    # redaction never changes identity: the calls replay offline from the redacted cassette
    before = llm_server.count
    with cs.use("shapes", mode="replay"):
        send_every_shape(llm_server.url, fakes)
    assert llm_server.count == before


# -- add and check refuse a copy that holds one ------------------------------------------------
def _hand_made(fakes: dict[str, str]) -> list[tuple[str, dict, str, str]]:
    """(label, cassette, field, rule): each shape put back, unredacted, where a recording keeps it."""
    out = []

    def case(label: str, field: str, rule: str, edit) -> None:  # type: ignore[no-untyped-def]
        doc = make_cassette(label.replace(" ", "_").replace(",", ""), recorded_at=ago(1))
        edit(doc["entries"][1])
        out.append((label, doc, field, rule))

    def url(u: str):  # type: ignore[no-untyped-def]
        return lambda e: e["request"].__setitem__("url", u)

    case("url user", "$.entries[1].request.url", "url-credentials", url(f"http://{fakes['url user']}@127.0.0.1/x"))
    case("url user with password", "$.entries[1].request.url", "url-credentials",
         url(f"http://{fakes['url user with x-oauth-basic']}:x-oauth-basic@127.0.0.1/x"))
    # what an older casstore wrote: the password redacted, the user (the token) kept
    case("url user redacted before", "$.entries[1].request.url", "url-credentials",
         url(f"http://{fakes['url user']}:[REDACTED:url-credentials]@127.0.0.1/x"))
    for h in ("x-functions-key", "DD-APPLICATION-KEY", "X-Access-Key", "x-rapidapi-key"):
        case(f"header {h}", f'$.entries[1].request.headers["{h}"]', "api-key",
             lambda e, h=h: e["request"]["headers"].__setitem__(h, fakes[f"header {h}"]))
    case("sas sig", "$.entries[1].request.url?sig", "signature",
         url(f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={fakes['sas sig, encoded']}"))
    case("functions code", "$.entries[1].request.url?code", "api-key",
         url(f"https://fn.azurewebsites.net/api/x?code={fakes['functions code']}"))
    case("json key", "$.entries[1].response.body.x_functions_key", "api-key",
         lambda e: e["response"].__setitem__("body", {"x_functions_key": fakes["json x_functions_key"]}))
    case("wrapped in json", "$.entries[1].response.body.blob", "openai-key",
         lambda e: e["response"].__setitem__("body", {"blob": fakes["wrapped key, base64"]}))
    case("wrapped in a query", "$.entries[1].request.url", "openai-key",
         url(f"http://127.0.0.1/x?data={fakes['wrapped key, base64url']}"))
    return out


def _refused(r, file: str, field: str, rule: str, fakes: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    out = r.stdout + r.stderr
    assert r.exit_code == 1, (r.exit_code, out)
    assert "Traceback" not in out
    assert any(file in ln and field in ln and f"({rule})" in ln for ln in out.splitlines()), (file, field, rule, out)
    assert not leaked("the refusal", out, fakes)
    assert not [s for s in fakes.values() if s[4:14] in out]


def test_add_and_check_refuse_a_copy_holding_any_shape(project: Path, casstore) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    fakes = shapes()
    cases = _hand_made(fakes)
    for _label, doc, field, rule in cases:
        path = project / "tests" / "cassettes" / f"{doc['name']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2))
        file = f"tests/cassettes/{doc['name']}.json"
        _refused(casstore("add", str(path)), file, field, rule, fakes)
        _refused(casstore("check"), file, field, rule, fakes)
        path.unlink()
        record(SECTION, refused=1)
    assert not (project / "casstore.lock").exists() or "url_user" not in (project / "casstore.lock").read_text()


# -- imports and fork --set -------------------------------------------------------------------
def test_import_vcr_and_jsonl_and_fork_set_write_no_shape(project: Path, casstore, llm_server,  # type: ignore[no-untyped-def]  # noqa: F811
                                                           tmp_path: Path, isolated_user: Path) -> None:
    import yaml

    import casstore as cs

    fakes = shapes()
    uri = (f"http://{fakes['url user']}@api.example.test/v1/things?sig={fakes['sas sig, encoded']}"
           f"&code={fakes['functions code']}&data={fakes['wrapped key, base64url']}")
    vcr = {"version": 1, "interactions": [{
        "request": {"method": "GET", "uri": uri, "body": None,
                    "headers": {"X-Functions-Key": [fakes["header x-functions-key"]],
                                "DD-APPLICATION-KEY": [fakes["header DD-APPLICATION-KEY"]]}},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": {"Content-Type": ["application/json"]},
                     "body": {"string": json.dumps({"blob": fakes["wrapped key, base64"],
                                                    "access_key": fakes["json access_key"]})}},
    }]}
    (tmp_path / "legacy.yaml").write_text(yaml.safe_dump(vcr))
    r = casstore("import", "vcr", "--add", str(tmp_path / "legacy.yaml"))
    assert r.exit_code == 0, r.stdout + r.stderr
    problems = leaked("import vcr", r.stdout + r.stderr, fakes)

    line = {"kind": "http", "timestamp": "2026-11-01T10:00:00Z",
            "request": {"method": "GET", "url": f"http://{fakes['url user with x-oauth-basic']}:x-oauth-basic@"
                                                f"api.example.test/v1/x?code={fakes['functions code']}",
                        "headers": {"x-rapidapi-key": fakes["header x-rapidapi-key"]}},
            "response": {"status": 200, "body": {"note": fakes["wrapped key, base64"]}}}
    (tmp_path / "calls.jsonl").write_text(json.dumps(line) + "\n")
    r = casstore("import", "jsonl", str(tmp_path / "calls.jsonl"), "--name", "prod", "--add")
    assert r.exit_code == 0, r.stdout + r.stderr
    problems += leaked("import jsonl", r.stdout + r.stderr, fakes)

    with cs.use("parent", mode="record"):
        import httpx

        httpx.get(f"{llm_server.url}/echo")
    r = casstore("fork", "parent", "--at", "0",
                 "--set", f"response.headers.x-functions-key={fakes['header x-functions-key']}",
                 "--set", f"response.json.next=http://{fakes['url user']}@example.test/x",
                 "--set", f"response.json.blob={fakes['wrapped key, base64']}", "--as", "forked")
    assert r.exit_code == 0, r.stdout + r.stderr
    problems += leaked("fork", r.stdout + r.stderr, fakes)

    for p in files_under(project / "tests" / "cassettes"):
        problems += leaked(f"working copy {p.name}", p.read_bytes(), fakes)
    for p in files_under(isolated_user / "cache"):
        problems += leaked(f"cache {p.name}", p.read_bytes(), fakes)
    assert {p.name for p in files_under(project / "tests" / "cassettes")} >= {"legacy.json", "prod.json", "forked.json"}
    assert not problems, problems


# -- one list ---------------------------------------------------------------------------------
def test_one_list_serves_redaction_masking_and_identity() -> None:
    """Every credential name identity leaves out is redacted and masked; identity rules 1 and
    2 leave out exactly what they did before the list (their cassettes keep replaying)."""
    from casstore.model import credentials, identity_rules
    from casstore.model.redaction_rules import builtin_rule
    from casstore.model.urls import mask_url

    for name in credentials.NAMES:
        assert builtin_rule(name) is not None, name
        assert mask_url(f"https://h/x?{name}=v4lue") == f"https://h/x?{name}=***", name
    for name in credentials.PARAMS:
        assert builtin_rule(name, param=True) is not None, name
        assert mask_url(f"https://h/x?{name}=v4lue") == f"https://h/x?{name}=***", name
    for rule in (1, 2):
        for name in credentials.identity_names(rule):
            assert identity_rules.is_volatile_header(name, rule), (rule, name)
        for name in credentials.identity_params(rule):
            assert identity_rules.is_volatile_query_param(name, rule), (rule, name)
    # the names the list added count towards identity under rules 1 and 2, as before it
    for table, volatile in ((credentials.NAMES, identity_rules.is_volatile_header),
                            (credentials.PARAMS, identity_rules.is_volatile_query_param)):
        for name, (_rule, since) in table.items():
            if since == credentials.NEXT_IDENTITY_RULE and not any(w in name for w in ("api-key", "apikey")):
                assert not volatile(name, 1) and not volatile(name, 2), name
    # rule 1's query parameters, as frozen before the list existed
    frozen = {"api_key", "apikey", "api-key", "key", "access_token", "token", "auth", "sig", "signature", "timestamp",
              "ts", "_", "nonce", "cachebuster", "x-amz-signature", "x-amz-date", "x-amz-credential",
              "x-amz-security-token"}
    assert all(identity_rules.is_volatile_query_param(n, 1) for n in frozen)
    assert not any(identity_rules.is_volatile_query_param(n, 1) for n in ("code", "pwd", "session", "x-goog-signature"))


@pytest.mark.parametrize("text", [
    '{"signature": "EqQBCkYIBRgCIkD' + "x" * 40 + '"}',  # a thinking block's signature
    '{"code": "def main(): return 1  # a long enough snippet"}',
    '{"primary_key": "id", "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI", "sort_key": "created_at_desc"}',
    "https://example.com/?key=short&code=200",
])
def test_names_that_are_credentials_only_as_parameters_stay_in_json(text: str) -> None:
    from casstore.model.redaction import scan

    assert scan({"body_text": text}) == [] and scan(json.loads(text) if text.startswith("{") else text) == []
