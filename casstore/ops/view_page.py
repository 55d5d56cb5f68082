"""The page of ``view`` and ``diff --html``: one self-contained HTML file, its style and script
inline. Recorded text reaches it only as JSON in a ``<script type="application/json">`` block
(``<``, ``>``, ``&``, U+2028/9 escaped: nothing can end it), put into the DOM by ``textContent``;
a Content-Security-Policy allows the page's own script (by hash) and inline style, nothing else."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

__all__ = ["render_page", "embed_json"]

# package data (pyproject.toml), read when this module loads
_ASSETS = files(__package__)
CSS = _ASSETS.joinpath("view_page.css").read_text(encoding="utf-8")
SCRIPT = _ASSETS.joinpath("view_page.js").read_text(encoding="utf-8")

_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{_SCRIPT_HASH}'"
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def embed_json(data: Any) -> str:
    """JSON that cannot end or comment out the ``<script>`` element holding it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    for char, escaped in _ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def _title(data: Mapping[str, Any]) -> str:
    if data.get("page") == "diff":
        return "casstore diff"
    if data.get("page") == "index":
        return "casstore: pinned cassettes"
    return "casstore: " + ", ".join(str(c.get("name")) for c in data.get("cassettes") or [])


SHARED_COLUMNS = ("kind", "what")  # row columns whose values repeat: written once, rows hold an index


def _split_details(data: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
    """The cassettes' ``details`` moved out of ``data``: one line of JSON each, in row order
    (a cassette's ``detail_at`` is the line of its first row); the values of
    :data:`SHARED_COLUMNS` listed once in ``row_values``, the rows holding their index."""
    if data.get("page") != "cassettes":
        return data, []
    fields = list(data.get("row_fields") or [])
    shared = {f: fields.index(f) for f in SHARED_COLUMNS if f in fields}
    values: dict[str, dict[Any, int]] = {f: {} for f in shared}
    lines: list[str] = []
    cassettes = []
    for c in data.get("cassettes") or []:
        rows = []
        for row in c.get("rows") or []:
            row = list(row)
            for f, i in shared.items():
                row[i] = values[f].setdefault(row[i], len(values[f]))
            rows.append(row)
        cassettes.append({**{k: v for k, v in c.items() if k != "details"}, "rows": rows, "detail_at": len(lines)})
        lines += [embed_json(d) for d in c.get("details") or []]  # no raw newline: JSON escapes it (embed_json U+2028)
    return {**data, "cassettes": cassettes, "row_values": {f: list(v) for f, v in values.items()}}, lines


def render_page(data: Mapping[str, Any]) -> str:
    """One self-contained page; the title and subtitle are set as text by escaping here."""
    from html import escape

    data, lines = _split_details(data)

    sub = f"{data.get('project', '')} · {data.get('rev', '')} · generated {data.get('generated', '')}" \
        if data.get("page") != "diff" else f"{data.get('old')} → {data.get('new')}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(_title(data))}</title><style>{CSS}</style></head><body>"
        f"<header class=\"top\"><h1>{escape(_title(data))}</h1><span class=\"sub\">{escape(sub)}</span>"
        "<input id=\"filter\" type=\"search\" placeholder=\"filter: text, model, status, identity…\" autocomplete=\"off\">"
        "</header><main id=\"main\"></main>"
        f"<script type=\"application/json\" id=\"casstore-data\">{embed_json(data)}</script>"
        f"<script type=\"application/json\" id=\"casstore-details\">{chr(10).join(lines)}</script>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
