"""Credentials in URLs: masked before any URL reaches a message, a log or a report (pure)."""

from __future__ import annotations

import re

__all__ = ["mask_url", "mask_options", "MASK"]

MASK = "***"

# patterns compiled on first use (re's cache): most commands never print a URL
_I = re.IGNORECASE
# an option whose name says it holds a credential (remote.options, nested tables included)
_SECRET_OPTION = r"key|secret|token|passw|pwd|credential|auth|sas|session|sig|connection_string"
_NOT_SECRET_OPTION = r"^(endpoint_url|region_name|region|profile|use_ssl|anon|requester_pays)$"
_KNOWN: set[str] = set()  # credential values seen in remote options, masked wherever they appear

# scheme://userinfo@ : userinfo runs to the last "@" before the path, query or fragment
_USERINFO = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s@]*(?:@[^/?#\s@]*)*)@"
# a query (or matrix) parameter: its value is masked when redaction's rules name it a
# credential (model/credentials.py, and the key rules' words)
_PARAM = r"(?P<lead>[?&;](?P<name>[A-Za-z0-9_.\-\[\]]{1,64})=)(?P<value>[^&#\s'\"]+)"


def mask_url(text: str) -> str:
    """``text`` with every URL's user information and the values of the query parameters
    redaction names credentials replaced by ``***`` (idempotent)."""
    for value in _KNOWN:
        if value in text:
            text = text.replace(value, MASK)
    if "@" in text:
        text = re.sub(_USERINFO, lambda m: m.group("scheme") + MASK + "@", text)
    if "=" in text:
        from .redaction_rules import builtin_rule  # only a text with a query needs the rules

        text = re.sub(_PARAM, lambda m: m.group("lead") + MASK if builtin_rule(m.group("name"), param=True)
                      else m.group(0), text)
    return text


def mask_options(options: object) -> None:
    """Remember the credential values of ``remote.options`` (an option whose name says it
    holds one, at any depth; 4 characters or more) so :func:`mask_url` masks them anywhere."""

    def walk(value: object, name: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, name)
        elif (isinstance(value, str) and len(value) >= 4 and re.search(_SECRET_OPTION, name, _I)
              and not re.match(_NOT_SECRET_OPTION, name, _I)):
            _KNOWN.add(value)

    walk(options, "")
