"""The code map's layering rule (docs/design.md), checked on the source: every import of a
casstore module points down the layers (model <- config <- store <- project <- git <-
{ops, replay, interop} <- cli), and the imports form no cycle, those inside functions
and under ``if TYPE_CHECKING:`` included."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.commands import REPO

PACKAGE = REPO / "casstore"

# rank of each top-level part; a module may import parts of its own rank or lower
RANKS = {
    "errors": 0,
    "model": 1,
    "config": 2,
    "store": 3,
    "project": 4,
    "git": 5,
    "ops": 6, "replay": 6, "interop": 6,
    "cli": 7,
}
# the package front (and `python -m casstore`) re-export from any layer
EXEMPT = {"__init__", "__main__"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """``(imported casstore module, at module level)`` for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    top_level = {id(node) for node in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` blocks are not run
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            top_level -= {id(n) for n in ast.walk(node)}
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name == "casstore" or name.startswith("casstore."):
                out.append((name, id(node) in top_level))
    return out


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {p for name in _modules() if (p := _part(name)) is not None}
    assert parts - RANKS.keys() <= EXEMPT, f"parts without a layer in the code map: {sorted(parts - RANKS.keys() - EXEMPT)}"


def _resolve(target: str, modules: dict[str, Path]) -> str:
    """``from .pkg import name`` names a module or a name in one: the longest module."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target


def test_imports_point_down_the_layers() -> None:
    wrong = []
    modules = _modules()
    for name, path in modules.items():
        part = _part(name)
        if part is None or part in EXEMPT:
            continue
        for target, _ in _imports(path):
            other = _part(_resolve(target, modules))
            if other is None or other in EXEMPT:
                continue
            if RANKS[other] > RANKS[part]:
                wrong.append(f"{name} imports {target} (layer {other} is above {part})")
    assert not wrong, "\n".join(wrong)


# Cycles left in place on purpose, each with its reason; any other cycle fails.
KNOWN_CYCLES: list[set[str]] = []


def _graph() -> dict[str, set[str]]:
    """Module -> the casstore modules it imports anywhere: at module level, inside functions
    and under ``if TYPE_CHECKING:`` alike. A package's ``__init__`` importing its own modules
    re-exports them (the public front): those edges are not dependencies."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for target, _ in _imports(path):
            target = _resolve(target, modules)
            if not target or target == name:
                continue
            if path.name == "__init__.py" and target.startswith(name + "."):
                continue
            deps.add(target)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_imports_form_no_cycle() -> None:
    graph = _graph()
    wrong = []
    for component in _cycles(graph):
        if component in KNOWN_CYCLES:
            continue
        edges = [f"{a} -> {b}" for a in sorted(component) for b in sorted(graph[a] & component)]
        wrong.append("cycle: " + "; ".join(edges))
    assert not wrong, "\n".join(wrong)


def test_the_known_cycles_are_still_cycles() -> None:
    # a known cycle that is gone comes off the list, so the test guards it from then on
    assert all(known in _cycles(_graph()) for known in KNOWN_CYCLES)
