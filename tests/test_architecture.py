"""The package's layers: no import cycle, no import of a higher layer.

Every ``import`` in ``src/fedforest`` (at module level or inside a function) is
read from the source, resolved to the fedforest module it names and checked
against the layer order documented in ``fedforest/__init__.py`` and
``docs/architecture.md``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "fedforest"

#: Layer of each top-level part of the package; a module may import its own
#: layer and lower ones only.
LAYERS = {
    "errors": 0,
    "rules": 0,
    "vocabulary": 0,
    "protocol": 0,
    "validation": 0,
    "metrics": 0,
    "intervals": 0,
    "outputs": 0,
    "columns": 0,
    "yaml_files": 0,
    "input_files": 0,
    "model": 1,
    "prediction": 2,
    "election": 3,
    "privacy": 3,
    "federation": 4,
    "flare": 5,
    "experiments": 5,
    "cli": 6,
    "__init__": 6,
}
#: Layers whose parts never import each other: election and privacy; flare and experiments.
INDEPENDENT = {LAYERS["election"], LAYERS["flare"]}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def internal_imports(path: Path) -> set[str]:
    """The fedforest modules imported by the file at ``path``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "fedforest"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "fedforest":
                continue
            for alias in node.names:  # `from . import protocol` names a module
                candidate = f"{target}.{alias.name}"
                found.add(candidate if module_exists(candidate) else target)
    return {m for m in found if m != name}


def module_exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    return {module_name(p): internal_imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_part_of_the_package_has_a_layer():
    parts = {part_of(m) for m in graph()}
    assert parts <= set(LAYERS), f"give these a layer: {sorted(parts - set(LAYERS))}"


def test_no_module_imports_a_higher_layer():
    upward = []
    for module, imports in graph().items():
        for target in imports:
            if target == "fedforest" and LAYERS[part_of(module)] < LAYERS["__init__"]:
                upward.append(f"{module} imports the package root (import the module instead)")
            elif LAYERS[part_of(target)] > LAYERS[part_of(module)]:
                upward.append(f"{module} -> {target}")
            elif LAYERS[part_of(target)] == LAYERS[part_of(module)] in INDEPENDENT and part_of(
                target
            ) != part_of(module):
                upward.append(
                    f"{module} -> {target} ({part_of(module)} and {part_of(target)} are "
                    "independent)"
                )
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_no_import_cycle():
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt in edges and nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


@pytest.mark.parametrize(
    ("library", "allowed"),
    [("nvflare", {"flare"}), ("matplotlib", {"experiments"}), ("numba", {"prediction"})],
)
def test_heavy_dependencies_stay_in_their_layer(library, allowed):
    users = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n.split(".")[0] == library for n in names):
                users.add(part_of(module_name(path)))
    assert users <= allowed, f"{library} is imported by {sorted(users - allowed)}"


def test_the_checker_sees_imports_and_cycles():
    # the walk above resolves relative imports: a known edge must be found
    edges = graph()
    assert "fedforest.model.traversal" in edges["fedforest.prediction.routing"]
    assert "fedforest.protocol" in edges["fedforest.model.forest"]


#: The longest a module of the package may be (docs/architecture.md, §1).
MAX_MODULE_LINES = 800


def test_no_module_is_longer_than_the_limit():
    long = {
        str(path.relative_to(SRC)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concern): {long}"
