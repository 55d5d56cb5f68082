"""The one YAML reader (pure): PyYAML's safe loader plus the benign Python tags vcrpy writes,
nothing that runs code, and bounds on depth and node count."""

from __future__ import annotations

import functools
import re
from typing import Any

from ..errors import UsageError

__all__ = ["MAX_YAML_DEPTH", "MAX_YAML_NODES", "load_yaml", "yaml_module"]

MAX_YAML_NODES = 2_000_000  # aliases can make a small file expand without bound
MAX_YAML_DEPTH = 200


def _construct_str(loader: Any, node: Any) -> Any:
    return loader.construct_scalar(node)


def _construct_tuple(loader: Any, node: Any) -> Any:
    return list(loader.construct_sequence(node))


def _construct_bytesio(loader: Any, node: Any) -> Any:
    mapping = loader.construct_mapping(node, deep=True)
    state = mapping.get("state") or [b""]
    data = state[0] if isinstance(state, (list, tuple)) and state else b""
    return data.encode("utf-8") if isinstance(data, str) else (data or b"")


def _construct_iter(loader: Any, node: Any) -> Any:
    mapping = loader.construct_mapping(node, deep=True)
    args = mapping.get("args") or [[]]
    return list(args[0]) if isinstance(args, (list, tuple)) and args else []


def _construct_unknown(loader: Any, node: Any) -> Any:
    """Any other tag (``!!python/object:...`` would run code): refused in casstore's words,
    naming the tag only when it is a Python one (a custom tag is the file's own text)."""
    tag = node.tag if re.fullmatch(r"tag:yaml\.org,2002:python/[\w/.:]{1,80}", node.tag or "") else "a custom tag"
    raise yaml_module().constructor.ConstructorError(
        None, None, f"unsupported YAML tag ({tag}); casstore reads data tags only", node.start_mark)


def yaml_module() -> Any:
    """PyYAML, imported on first use (vcrpy depends on it, casstore itself does not)."""
    try:
        import yaml
    except ImportError:
        raise UsageError("reading or writing YAML cassettes needs PyYAML: pip install pyyaml") from None
    return yaml


@functools.lru_cache(maxsize=1)
def _loader_class() -> Any:
    yaml = yaml_module()
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: same marks, faster
    loader: Any = type("_CassetteLoader", (base,), {})
    for tag, fn in (
        ("python/str", _construct_str),
        ("python/unicode", _construct_str),
        ("python/tuple", _construct_tuple),
        ("python/object/new:_io.BytesIO", _construct_bytesio),
        ("python/object/apply:builtins.iter", _construct_iter),
    ):
        loader.add_constructor("tag:yaml.org,2002:" + tag, fn)
    loader.add_constructor(None, _construct_unknown)
    return loader


def _count_nodes(yaml: Any, root: Any) -> None:
    stack, seen = [root], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            raise ValueError(f"more than {MAX_YAML_NODES} YAML nodes (aliases expand too far)")
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                stack.append(k)
                stack.append(v)


def _check_depth(yaml: Any, text: str | bytes) -> None:
    """Refuse deep nesting from the event stream (libyaml's parser is iterative; its
    composer recurses, and a very deep document would crash it)."""
    events = _loader_class()(text)
    try:
        depth = 0
        while events.check_event():
            event = events.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    mark = event.start_mark
                    raise yaml.MarkedYAMLError(problem=f"nested deeper than {MAX_YAML_DEPTH} levels", problem_mark=mark)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    finally:
        events.dispose()


def load_yaml(text: str | bytes) -> tuple[Any, Any]:
    """``(value, root node)`` of one YAML document (``(None, None)`` when empty). Raises
    ``yaml.MarkedYAMLError`` for invalid YAML, an unknown tag or nesting past
    :data:`MAX_YAML_DEPTH`; ``ValueError`` past :data:`MAX_YAML_NODES`; UsageError without PyYAML."""
    yaml = yaml_module()
    loader = _loader_class()(text)
    try:
        _check_depth(yaml, text)
        node = loader.get_single_node()
        if node is None:
            return None, None
        _count_nodes(yaml, node)
        return loader.construct_document(node), node
    finally:
        loader.dispose()
