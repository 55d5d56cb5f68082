"""The one list of credential names (headers, fields, query parameters), read by redaction,
URL masking and the identity rules. A name added here is redacted at once but leaves identity
only from :data:`NEXT_IDENTITY_RULE` on, so older cassettes keep replaying."""

from __future__ import annotations

__all__ = ["NAMES", "PARAMS", "PARAM_MIN_LEN", "KEY_OWNERS", "NEXT_IDENTITY_RULE", "identity_names", "identity_params"]

NEXT_IDENTITY_RULE = 3  # a name with this "since" is not left out of identity by rules 1 and 2

# name -> (redaction rule, the identity rule from which identity leaves it out): headers,
# JSON keys, form fields, query parameters
NAMES: dict[str, tuple[str, int]] = {
    "authorization": ("authorization", 1),
    "proxy-authorization": ("authorization", 1),
    "cookie": ("cookie", 1),
    "set-cookie": ("cookie", 1),
    "x-api-key": ("api-key", 1),
    "api-key": ("api-key", 1),
    "apikey": ("api-key", 1),
    "x-goog-api-key": ("api-key", 1),
    # services whose key header says nothing but the service's name
    "x-rapidapi-key": ("api-key", NEXT_IDENTITY_RULE),
    "x-mashape-key": ("api-key", NEXT_IDENTITY_RULE),
    "x-apisports-key": ("api-key", NEXT_IDENTITY_RULE),
    "x-honeycomb-team": ("api-key", NEXT_IDENTITY_RULE),
    "x-access-key": ("api-key", NEXT_IDENTITY_RULE),
    "x-functions-key": ("api-key", NEXT_IDENTITY_RULE),
    "dd-api-key": ("api-key", NEXT_IDENTITY_RULE),
    "dd-application-key": ("api-key", NEXT_IDENTITY_RULE),
    "ocp-apim-subscription-key": ("api-key", NEXT_IDENTITY_RULE),
}

# query (and form) parameters -> (redaction rule, identity rule from which it is left out);
# a name the key rules do not find by its words ("key", "sig", "code") is a credential only
# as a parameter or a [name, value] pair: as a JSON key it means other things (the
# "signature" of a thinking block, an error "code"), and needs PARAM_MIN_LEN characters
PARAMS: dict[str, tuple[str, int]] = {
    "api_key": ("api-key", 1),
    "apikey": ("api-key", 1),
    "api-key": ("api-key", 1),
    "key": ("api-key", 1),
    "access_token": ("token", 1),
    "token": ("token", 1),
    "auth": ("auth", 1),
    "sig": ("signature", 1),  # Azure SAS
    "signature": ("signature", 1),
    "x-amz-signature": ("signature", 1),
    "x-amz-credential": ("credential", 1),
    "x-amz-security-token": ("token", 1),
    "x-goog-signature": ("signature", 2),
    "x-goog-credential": ("credential", 2),
    "code": ("api-key", NEXT_IDENTITY_RULE),  # Azure Functions' key, an OAuth authorization code
    "pwd": ("password", NEXT_IDENTITY_RULE),
    "session": ("token", NEXT_IDENTITY_RULE),
}
PARAM_MIN_LEN = 16  # "?key=value", "code=200": shorter values are no credentials

# "<word> key" is a credential's name for these words (``access_key``, ``x-functions-key``,
# ``DD-APPLICATION-KEY``); ``primary_key``, ``public_key``, ``sort_key`` are not
KEY_OWNERS = frozenset(
    "api apis subscription access application app functions function master license consumer account "
    "admin service client signing encryption shared storage ingest ingestion developer".split()
)


def identity_names(rule: int) -> frozenset[str]:
    """The header names of :data:`NAMES` that identity rule ``rule`` leaves out."""
    return frozenset(n for n, (_r, since) in NAMES.items() if since <= rule)


def identity_params(rule: int) -> frozenset[str]:
    """The query parameters of :data:`PARAMS` that identity rule ``rule`` leaves out."""
    return frozenset(n for n, (_r, since) in PARAMS.items() if since <= rule)
