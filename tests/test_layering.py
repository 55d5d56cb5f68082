"""The code map's layering rule (docs/design.md), checked on the source: every import of a
casstore module points down the layers (model <- config <- signing <- store <- project <-
{git, ops, replay, interop} <- cli), and the module-level imports form no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.commands import REPO

PACKAGE = REPO / "casstore"

# rank of each top-level part; a module may import parts of its own rank or lower
RANKS = {
    "errors": 0, "fsutil": 0, "forking": 0,
    "model": 1,
    "config": 2,
    "signing": 3,
    "store": 4,
    "project": 5,
    "git": 6, "ops": 6, "replay": 6, "interop": 6,
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
            names = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
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


def test_module_level_imports_form_no_cycle() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for target, top in _imports(path):
            target = _resolve(target, modules)
            if top and target and target != name:
                deps.add(target)
        graph[name] = deps
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    # a package's __init__ that re-exports its own modules is not a cycle of two jobs
    real = [c for c in cycles if not all(m == "casstore" or m.count(".") == 0 for m in c.split(" -> "))]
    assert not real, "\n".join(real)
