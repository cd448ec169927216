"""README.md and docs/ stay true: generated blocks current, links and code names that exist.

* Every generated block (docs/generate.py: the configuration reference, the included
  benchmark results, the runtime's size) holds what ``make docs`` would write.
* Every relative link points to a file of the repository, and an anchor to a heading of
  the page it names.
* Every results file of benchmarks/results/ is linked from the docs.
* A file path (``federation/config.py``) or a module's name (``engines.load_kernels``) in
  backticks names a file that exists and a name that module defines.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "fedforest"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_generate", module)
    spec.loader.exec_module(module)
    return module


def test_generated_blocks_are_current():
    stale = _generator().stale()
    assert not stale, "stale generated blocks (run `make docs`):\n" + "\n".join(stale)


def test_an_include_block_holds_the_section_it_names(tmp_path):
    gen = _generator()
    page = ROOT / "docs" / "experiments.md"
    text = gen.include("benchmarks/results/quality.md#average-ranks-auprc-all-blocks", page)
    section = (ROOT / "benchmarks/results/quality.md").read_text().split("## Average ranks")[1]
    assert text.split("\n\n(From")[0] in section
    assert "](../benchmarks/results/quality.md#average-ranks-auprc-all-blocks)" in text
    with pytest.raises(ValueError, match="has no section"):
        gen.include("benchmarks/results/quality.md#no-such-section", page)


def _without_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


@cache
def _anchors(path: Path) -> set[str]:
    gen = _generator()
    headings = re.findall(r"^#+\s+(.*)$", _without_code(path.read_text()), re.M)
    return {gen.anchor(h) for h in headings}


def _links(page: Path):
    for target in re.findall(r"\]\(([^)\s]+)\)", _without_code(page.read_text())):
        if not re.match(r"[a-z]+:", target):
            yield target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_point_to_files_and_headings(page):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


def test_every_benchmark_results_file_is_linked_from_the_docs():
    linked = set()
    for page in PAGES:
        for target in _links(page):
            linked.add((page.parent / target.partition("#")[0]).resolve())
    results = sorted((ROOT / "benchmarks" / "results").glob("*.md"))
    missing = [p.name for p in results if p.resolve() not in linked]
    assert not missing, f"results files no page links to: {missing}"


# --------------------------------------------------------------------------- code names
@cache
def _defined(module: Path) -> set[str]:
    """Names a module defines at its top level or in its classes (not what it imports)."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            names |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@cache
def _modules() -> dict[str, list[Path]]:
    """The package's modules by their last name (``engines`` -> prediction/engines.py)."""
    out: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            out.setdefault(path.stem, []).append(path)
    return out


#: Where a path in backticks starts when it names a file of the repository (or of the package).
REPO_DIRS = ("src", "tests", "docs", "benchmarks", "data_prep", "deploy", "jobs", "site_configs")
PACKAGE_DIRS = tuple(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
#: First parts of dotted names that are keys of the configuration files or of payloads and
#: results, not modules (``job.seed``, ``forest.max_features``, ``settings.owner_weights``).
NOT_MODULES = (
    "job",
    "evaluation",
    "pooling",
    "forest",
    "surrogates",
    "election",
    "survival",
    "site",
    "privacy",
    "share",
    "threshold_grid",
    "inputs",
    "settings",
    "deployment",
)
EXTENSIONS = ("py", "md", "json", "yaml", "yml", "txt", "toml", "csv", "png", "npz", "log", "gz")


def _file_exists(name: str) -> bool:
    first = name.split("/")[0]
    if first in REPO_DIRS:
        return (ROOT / name).exists()
    return (PACKAGE / name).exists()


def _code_names(page: Path):
    for code in re.findall(r"`([^`\n]+)`", _without_code(page.read_text())):
        yield code.strip()


def _wrong(code: str) -> bool:
    """Whether ``code`` names a repository file or a module's name that does not exist."""
    file = re.fullmatch(r"([\w.-]+/)*[\w.-]+\.(\w+)", code)
    if file and file.group(2) in EXTENSIONS:
        first = code.split("/")[0]
        if "/" in code and first in REPO_DIRS + PACKAGE_DIRS:
            return not _file_exists(code)
        if "/" not in code and file.group(2) == "py":  # a module's file name
            return (
                code != "__init__.py"
                and Path(code).stem not in _modules()
                and not list(ROOT.glob(f"*/{code}"))
            )
        return False
    match = re.fullmatch(r"(?:[\w/]+[./])?([a-z_][a-z0-9_]*)\.([A-Za-z_]\w*)", code)
    if not match:
        return False
    module, name = match.groups()
    paths = _modules().get(module)
    if not paths or module in NOT_MODULES:
        return False
    return not any(name in _defined(p) for p in paths)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_code_names_in_the_docs_exist(page):
    wrong = sorted({code for code in _code_names(page) if _wrong(code)})
    assert not wrong, f"{page.name}: names no module defines, or files that do not exist: {wrong}"
