"""The Python examples of README.md and docs/*.md run as written.

Each page's ```python blocks run in order in one namespace (a later example may use
what an earlier one made), in a temporary working folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


WITH_EXAMPLES = [page for page in PAGES if python_blocks(page)]


def test_the_library_page_has_examples():
    assert ROOT / "docs" / "library.md" in WITH_EXAMPLES


@pytest.mark.parametrize("page", WITH_EXAMPLES, ids=lambda p: p.name)
def test_python_examples_run(page, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{page.stem}"}
    for block in python_blocks(page):
        exec(compile(block, str(page), "exec"), namespace)
    if page.name == "library.md":  # the classes of the two-hospital example
        assert "[0 1]" in capsys.readouterr().out
