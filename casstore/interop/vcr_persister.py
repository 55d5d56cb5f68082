"""casstore's store behind vcrpy: a persister around the cassette's own. Load: a vcrpy file at
the path, else the pin or working copy of that path's name. Save: in a casstore project with
no vcrpy file there, the working copy; elsewhere the cassette's own persister writes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..model.cassette import Cassette
from ..model.vcr_names import vcr_file_name
from ..project import Project
from .export import to_vcr_dict
from .vcr import interaction_entry, is_casstore_file

__all__ = ["CasstorePersister", "vcr_requests_responses"]


def _project(path: Path) -> Project | None:
    """The casstore project holding ``path`` (a folder with casstore.toml, [tool.casstore] or
    casstore.lock), else ``None``."""
    project = Project.discover(path.parent)
    if project.config.source == "defaults" and not project.lock_path.is_file():
        return None
    return project


def _name(project: Project, path: Path) -> str | None:
    return vcr_file_name(path, cassette_dir=project.cassette_dir, root=project.root)


def _vcr_file(path: Path) -> bool:
    """A cassette file of vcrpy's at ``path`` (a casstore working copy there is not one:
    vcrpy's JSON serializer names its files as casstore names working copies)."""
    return path.is_file() and not is_casstore_file(path)


def vcr_requests_responses(cassette: Cassette) -> tuple[list[Any], list[dict[str, Any]]]:
    """``(requests, responses)`` of a casstore cassette, as vcrpy's persisters return them."""
    from vcr.request import Request
    from vcr.serializers.compat import convert_to_bytes

    data, _ = to_vcr_dict(cassette)
    interactions = data["interactions"]
    return ([Request._from_dict(i["request"]) for i in interactions],
            [convert_to_bytes(i["response"]) for i in interactions])


def _body(value: Any) -> Any:
    """A request body as the file holds it: a file-like body or an iterator's chunks read
    (any other value, an aiohttp ``json=`` mapping say, as vcrpy keeps it)."""
    if hasattr(value, "read"):
        return value.read()
    if isinstance(value, Iterator):
        return b"".join(x if isinstance(x, bytes) else str(x).encode("utf-8") for x in value)
    return value


def _entries(cassette_dict: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for request, response in zip(cassette_dict["requests"], cassette_dict["responses"], strict=False):
        item = {"request": {"method": request.method, "uri": request.uri, "body": _body(request.body),
                            "headers": {k: [v] for k, v in request.headers.items()}},
                "response": response}
        out.append(interaction_entry(item))
    return out


# pytest-recording's ``--record-mode=rewrite`` (new_episodes on a deleted file): the store's
# copy is not loaded either, so the cassette is recorded afresh (set by the pytest plugin)
REWRITE = {"on": False}


class CasstorePersister:
    """A vcrpy persister over ``inner``; ``record_mode``: the cassette's (a working copy
    re-recorded since its pin is what ``new_episodes`` and ``all`` build on)."""

    def __init__(self, inner: Any, record_mode: Callable[[], Any] = lambda: None) -> None:
        self.inner = inner
        self._record_mode = record_mode

    def __getattr__(self, item: str) -> Any:  # a custom persister's own attributes
        return getattr(self.inner, item)

    def _stored(self, path: Path) -> tuple[list[Any], list[dict[str, Any]]] | None:
        project = _project(path)
        name = _name(project, path) if project is not None else None
        if project is None or name is None:
            return None
        mode = str(getattr(self._record_mode(), "value", self._record_mode()) or "")
        if REWRITE["on"] and mode == "new_episodes":
            return None
        cassette = project.resolve_cassette(name, prefer_working_copy=mode in ("new_episodes", "all"))
        return None if cassette is None else vcr_requests_responses(cassette)

    def load_cassette(self, cassette_path: Any, serializer: Any) -> Any:
        from vcr.persisters.filesystem import CassetteNotFoundError
        from vcr.serialize import deserialize

        path = Path(cassette_path)
        if _vcr_file(path):
            return self.inner.load_cassette(cassette_path, serializer)
        requests: list[Any] = []
        responses: list[Any] = []
        # pytest-recording's extra cassettes (@pytest.mark.vcr("shared.yaml")): each from its
        # file, or from casstore once migrated
        extra: Sequence[Any] = getattr(self.inner, "extra_paths", None) or ()
        for i, each in enumerate(dict.fromkeys([str(path), *map(str, extra)])):
            p = Path(each)
            if i and _vcr_file(p):
                found = deserialize(p.read_text(encoding="utf-8"), serializer)[:2]
            else:
                found = self._stored(p)
            if found is not None:
                requests += found[0]
                responses += found[1]
        if not requests:
            raise CassetteNotFoundError(f"{path}: no vcrpy file, and no casstore cassette of that name")
        return requests, responses

    def save_cassette(self, cassette_path: Any, cassette_dict: dict[str, Any], serializer: Any) -> None:
        path = Path(cassette_path)
        project = None if _vcr_file(path) else _project(path)
        name = _name(project, path) if project is not None else None
        if project is None or name is None:
            self.inner.save_cassette(cassette_path, cassette_dict, serializer=serializer)
            return
        from ..replay.writer import write_cassette

        write_cassette(project.working_copy_path(name), name=name, mode="record", cassette=None, base=[],
                       new=_entries(cassette_dict), path_stamp=None, exercised=set(),
                       redaction_config=project.config.redaction, git_root=project.root,
                       meta_extra={"recorder": "vcrpy (casstore persister)"})
