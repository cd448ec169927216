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
    "survival_metrics": 0,
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


# ----------------------------------------------------------------- the strategy registry
RULES = PACKAGE / "rules"


def _strategy_names() -> set[str]:
    from fedforest import rules

    return set(rules.names())


def _other_choice_values() -> set[str]:
    """Values that are strategy names and also values of another choice list (``auto`` is
    an engine, a calibration and a guess weight too)."""
    from fedforest import vocabulary

    others = (*vocabulary.ENGINES, *vocabulary.CALIBRATIONS, *vocabulary.AUTO_METRICS)
    return _strategy_names() & set(others)


def _strategy_literals(node: ast.AST, names: set[str]) -> list[str]:
    return [
        sub.value
        for sub in ast.walk(node)
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value in names
    ]


def strategy_branches(path: Path) -> list[str]:
    """Comparisons (``==``, ``!=``, ``in``, ``not in``, ``match``) with a strategy-name literal.

    A name that is also another list's value (``auto``) counts only where the
    other side speaks of a strategy or a method.
    """
    names, ambiguous = _strategy_names(), _other_choice_values()
    where = path.relative_to(SRC) if SRC in path.parents else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops
        ):
            literals = _strategy_literals(node, names)
            text = ast.unparse(node).lower()
            if any(n not in ambiguous or "strateg" in text for n in literals):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match):
            for case in node.cases:
                if _strategy_literals(case.pattern, names):
                    found.append(f"{where}:{case.pattern.lineno}: match case")
    return found


def test_no_branch_on_a_strategy_name_outside_the_rules_package():
    branches = [
        line
        for path in sorted(PACKAGE.rglob("*.py"))
        if RULES not in path.parents
        for line in strategy_branches(path)
    ]
    assert not branches, "ask the rule (fedforest.rules) instead:\n" + "\n".join(branches)


def test_the_checker_sees_a_branch_on_a_strategy_name(tmp_path):
    sample = tmp_path / "sample_branches.py"
    sample.write_text(
        'def f(strategy, engine):\n    if strategy == "mp" or strategy in ("park",):\n'
        '        return engine == "auto"\n    match strategy:\n        case "fpv":\n'
        '            return strategy == "auto"\n'
    )
    found = strategy_branches(sample)
    assert len(found) == 4  # mp, park, the match case, strategy == "auto"; not the engine


def test_the_strategies_are_listed_once():
    # no collection literal outside the rules package names most of the strategies
    names = _strategy_names()
    lists = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if RULES in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                held = {i.value for i in items if isinstance(i, ast.Constant) and i.value in names}
                if len(held) > len(names) // 2:
                    lists.append(f"{path.relative_to(SRC)}:{node.lineno}: {sorted(held)}")
    assert not lists, "read the registry (fedforest.rules) instead:\n" + "\n".join(lists)
    # and each strategy is declared in one module of the rules package
    declared = {}
    for path in sorted(RULES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "name":
                if isinstance(node.value, ast.Constant) and node.value.value in names:
                    declared.setdefault(node.value.value, []).append(path.name)
    assert {n: len(v) for n, v in declared.items()} == dict.fromkeys(names, 1)


# ---------------------------------------------------------------- cyclomatic complexity
#: The highest cyclomatic complexity a function of ``prediction/`` may have.
MAX_COMPLEXITY = 15


def cyclomatic_complexity(function: ast.AST) -> int:
    """McCabe's number, counted as radon counts it: 1, plus one per ``if``, ``elif``,
    conditional expression, loop, ``except``, ``match`` case and comprehension clause, plus
    one per extra operand of ``and`` / ``or``. Nested functions and classes count apart."""
    n = 1
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        decisions = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler)
        if isinstance(node, (*decisions, ast.match_case)):
            n += 1
        elif isinstance(node, ast.comprehension):
            n += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        stack.extend(ast.iter_child_nodes(node))
    return n


#: The compiled hot loops, flat because a helper call with arrays at every node costs
#: numba 17x (the note of ``prediction/numba_kernels.py``).
FLAT_KERNELS = {"prediction/numba_kernels.py": {"_marginal_rows", "_route_rows"}}


def test_no_function_of_prediction_is_too_complex():
    complex_ = {}
    for path in sorted((PACKAGE / "prediction").rglob("*.py")):
        flat = FLAT_KERNELS.get(path.relative_to(PACKAGE).as_posix(), set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in flat:
                if (n := cyclomatic_complexity(node)) > MAX_COMPLEXITY:
                    complex_[f"{path.relative_to(SRC)}:{node.lineno} {node.name}"] = n
    assert not complex_, f"split these (complexity above {MAX_COMPLEXITY}): {complex_}"


def test_the_complexity_count():
    source = (
        "def f(a, b):\n    if a and b:\n        return 1\n    elif a:\n        return 2\n"
        "    for x in [y for y in b if y]:\n        pass\n    return 3 if b else 4\n"
    )
    assert cyclomatic_complexity(ast.parse(source).body[0]) == 8


# ----------------------------------------------------------------- tests mirror src/
TESTS = Path(__file__).resolve().parent
#: The files of a package that are no module of their own here: what a package's
#: ``__init__.py`` gathers is tested with the modules it comes from (the command's
#: ``fedforest.cli`` in tests/test_cli.py), and ``__main__.py`` only calls it.
NOT_MIRRORED = ("__init__.py", "__main__.py")
#: Modules whose mirrored test module is still to come (path under src/fedforest), with why.
#: Modules whose mirrored test module is still to be written (module -> its test path).
MIRROR_PENDING: dict[str, str] = {}


def mirrored_test(path: Path) -> Path:
    """The test module of ``src/fedforest/a/b.py``: ``tests/a/test_b.py`` (``_b.py``:
    ``test_b.py``; a top-level module's in ``tests/``)."""
    rel = path.relative_to(PACKAGE)
    return TESTS.joinpath(*rel.parts[:-1], f"test_{rel.stem.lstrip('_')}.py")


def source_modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.name not in NOT_MIRRORED]


def test_every_module_has_its_mirrored_test_module():
    missing = [
        f"{path.relative_to(SRC.parent)} -> {mirrored_test(path).relative_to(TESTS.parent)}"
        for path in source_modules()
        if path.relative_to(PACKAGE).as_posix() not in MIRROR_PENDING
        and not mirrored_test(path).is_file()
    ]
    assert not missing, "modules without their test module (add it):\n" + "\n".join(missing)


def test_the_pending_mirrors_are_still_pending():
    modules = {p.relative_to(PACKAGE).as_posix(): p for p in source_modules()}
    done = [
        f"{name} (its module is gone)" if name not in modules else f"{name} (it has {test})"
        for name, test in MIRROR_PENDING.items()
        if name not in modules or mirrored_test(modules[name]).is_file()
    ]
    assert not done, "remove from MIRROR_PENDING: " + ", ".join(done)
    for name, test in MIRROR_PENDING.items():
        assert mirrored_test(modules[name]) == TESTS.parent / test


def test_the_mirror_of_a_module():
    assert mirrored_test(PACKAGE / "flare" / "_compat.py") == TESTS / "flare" / "test_compat.py"
    assert mirrored_test(PACKAGE / "columns.py") == TESTS / "test_columns.py"
    assert mirrored_test(PACKAGE / "cli" / "job.py") == TESTS / "cli" / "test_job.py"


def test_every_folder_of_tests_is_a_package():
    # test modules of one name in two folders (tests/cli/test_job.py, tests/flare/test_job.py)
    # import as cli.test_job and flare.test_job: every folder holding tests is a package
    folders = {p.parent for p in TESTS.rglob("test_*.py")} - {TESTS}
    loose = sorted(
        str(f.relative_to(TESTS.parent)) for f in folders if not (f / "__init__.py").is_file()
    )
    assert not loose, f"add an empty __init__.py to {loose}"


def _print_calls(source: str) -> list[int]:
    """Lines of the calls to the builtin ``print`` in ``source`` (docstrings are not code)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
    ]


def test_only_the_command_line_prints():
    """Library and FLARE code log (``logging``); only ``cli/`` writes to the terminal."""
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "cli" not in path.relative_to(PACKAGE).parts
        for line in _print_calls(path.read_text())
    ]
    assert not found, "print() outside fedforest/cli (use logging): " + ", ".join(found)


def test_the_print_checker_sees_a_call_and_not_a_docstring():
    assert _print_calls('"""\n>>> print(1)\n"""\nx = 1\nprint(x)\n') == [5]
