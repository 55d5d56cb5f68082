"""Credentials in URLs: masked before any URL reaches a message, a log or a report (pure).

A remote URL may carry a secret: ``s3://KEY:SECRET@bucket/prefix``, an ``endpoint_url``
like ``https://user:token@minio.internal``, a pre-signed or SAS query
(``?X-Amz-Signature=…``, ``?sig=…``, ``?token=…``). :func:`mask_url` replaces the user
information and the values of credential-like query parameters with ``***`` in every URL
inside a text, so one call covers a bare URL, an error message quoting one, or a backend
error that embeds its endpoint. It is idempotent and leaves text without URLs unchanged.
"""

from __future__ import annotations

import re

__all__ = ["mask_url", "MASK"]

MASK = "***"

# scheme://userinfo@ : userinfo runs to the last "@" before the path, query or fragment
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s@]*(?:@[^/?#\s@]*)*)@")
# a query (or matrix) parameter whose name says it holds a credential
_SECRET_PARAM = re.compile(
    r"(?P<lead>[?&;](?P<name>[A-Za-z0-9_.\-]*(?:sig|signature|token|secret|passw|pwd|key|credential|auth|sas|session)"
    r"[A-Za-z0-9_.\-]*)=)(?P<value>[^&#\s'\"]+)",
    re.IGNORECASE,
)


def mask_url(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``.

    >>> mask_url("s3://AKIA:secret@bucket/cassettes")
    's3://***@bucket/cassettes'
    >>> mask_url("GET https://h/x?X-Amz-Signature=abc&part=1")
    'GET https://h/x?X-Amz-Signature=***&part=1'
    """
    if "@" in text:
        text = _USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    if "=" in text:
        text = _SECRET_PARAM.sub(lambda m: m.group("lead") + MASK, text)
    return text
