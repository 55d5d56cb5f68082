"""Provenance of a recording beyond git: the platform, and the versions of the client
packages loaded in the recording process (never fails).
"""

from __future__ import annotations

import platform
import sys
from typing import Any

__all__ = ["CLIENT_PACKAGES", "platform_meta", "package_versions", "runtime_meta"]

# distribution name -> the module whose presence in sys.modules means it is loaded
CLIENT_PACKAGES: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "httpx": "httpx",
    "httpx2": "httpx2",
    "requests": "requests",
    "urllib3": "urllib3",
    "aiohttp": "aiohttp",
    "boto3": "boto3",
    "botocore": "botocore",
    "google-genai": "google.genai",
}


def platform_meta() -> dict[str, str]:
    """``{"os": "linux", "arch": "x86_64", "python": "3.12.3", "implementation": "CPython"}``."""
    return {
        "os": sys.platform,
        "arch": platform.machine() or "unknown",
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }


def package_versions() -> dict[str, str]:
    """Versions of the client packages loaded in this process (sorted by name)."""
    from importlib import metadata  # a recording's (not loaded by a replay)

    out: dict[str, str] = {}
    for dist, module in sorted(CLIENT_PACKAGES.items()):
        if module not in sys.modules:
            continue
        try:
            out[dist] = metadata.version(dist)
        except Exception:  # noqa: BLE001 - a vendored or odd install: use what the module says
            version = getattr(sys.modules[module], "__version__", None)
            if isinstance(version, str):
                out[dist] = version
    return out


def runtime_meta() -> dict[str, Any]:
    """What :func:`casstore.replay.writer.write_cassette` puts in ``meta``."""
    try:
        return {"platform": platform_meta(), "packages": package_versions()}
    except Exception:  # noqa: BLE001 - provenance is optional
        return {}
