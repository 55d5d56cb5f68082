"""AWS Signature Version 4 of an S3 GET (empty body): pure functions, no I/O, no botocore.

What botocore's ``S3SigV4Auth`` computes for the same request — the same canonical request
(the path as sent, S3 does not normalize it; the query pairs sorted as they appear in the
URL; every header but the ones botocore leaves out, plus ``host`` without a default port;
the body's sha256 in ``X-Amz-Content-SHA256``), string to sign, derived key and
``Authorization`` line. ``tests/test_s3_signed.py`` signs requests both ways and compares.
Importing any botocore module costs a fresh process ~0.15 s of CPU (urllib3 and
botocore.compat compile their regular expressions), as much as a 1k pull's own work.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime

__all__ = ["EMPTY_SHA256", "canonical_host", "sign_get"]

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
# botocore's SIGNED_HEADERS_BLACKLIST (and the Authorization header itself)
_UNSIGNED = frozenset({"expect", "transfer-encoding", "user-agent", "x-amzn-trace-id", "authorization"})


def canonical_host(scheme: str, netloc: str) -> str:
    """The ``host`` header botocore signs: the URL's host, without the scheme's default port."""
    default = {"http": ":80", "https": ":443"}.get(scheme)
    return netloc[: -len(default)] if default and netloc.endswith(default) else netloc


def _canonical_query(query: str) -> str:
    if not query:
        return ""
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&"))
    return "&".join(f"{k}={v}" for k, v in pairs)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def sign_get(host: str, path: str, query: str, headers: dict[str, str], *, access_key: str, secret_key: str,
             token: str | None, region: str, now: datetime) -> dict[str, str]:
    """``headers`` plus the ones a signed S3 GET carries (``now`` in UTC; ``path`` and
    ``query`` already percent-encoded as sent)."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    out = dict(headers)
    out["X-Amz-Date"] = stamp
    if token:
        out["X-Amz-Security-Token"] = token
    out["X-Amz-Content-SHA256"] = EMPTY_SHA256
    signed = {k.lower(): " ".join(v.split()) for k, v in out.items() if k.lower() not in _UNSIGNED}
    signed.setdefault("host", host)
    names = sorted(signed)
    canonical = "\n".join([
        "GET", path or "/", _canonical_query(query), "".join(f"{n}:{signed[n]}\n" for n in names),
        ";".join(names), EMPTY_SHA256,
    ])
    scope = f"{stamp[:8]}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret_key}".encode(), stamp[:8]), region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, "
                            f"Signature={signature}")
    return out
