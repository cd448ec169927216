"""Fill the generated blocks of README.md and docs/*.md (``make docs``).

A block is a pair of HTML comments, invisible on GitHub, around text this script writes:

``<!-- include benchmarks/results/quality.md#average-ranks-auprc-all-blocks -->``
    a benchmark's results file (without its title), or one section of it (the
    heading's GitHub anchor),
    followed by a link to it. ``table=2`` keeps only the section's second table,
    ``columns=sites;Local;WMP`` only those columns of it (of the first by default).
``<!-- generated config job -->`` (``site``, ``privacy``, ``local``)
    the reference table of a configuration file, from
    :mod:`fedforest.federation.config_docs` and the schema's defaults.
``<!-- generated runtime-size -->``
    the size of the code a job ships to every participant.

Each block ends with ``<!-- end include -->`` or ``<!-- end generated -->``.
``python docs/generate.py`` rewrites the blocks; ``--check`` changes nothing and
lists the blocks that differ from what they would be (exit status 1).

The README's excerpt of ``make demo``'s console (the block after ``<!-- make demo
output -->``) needs a simulator run: ``python docs/generate.py --demo`` runs ``make demo``
and writes it (``make docs-demo``); a test runs ``make demo`` and compares.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The pages whose blocks are generated.
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
BLOCK = re.compile(r"(<!-- (include|generated) (.+?) -->\n)(.*?)(<!-- end \2 -->)", re.S)
#: How far the measured runtime may drift from the page's numbers before the page is stale.
RUNTIME_TOLERANCE = 0.15


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def section(text: str, name: str, source: str) -> str:
    """The body of the heading whose anchor is ``name`` (up to the next heading as high)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"(#+)\s+(.*)", line)
        if match and anchor(match.group(2)) == name:
            level = len(match.group(1))
            body = []
            for following in lines[i + 1 :]:
                heading = re.match(r"(#+)\s", following)
                if heading and len(heading.group(1)) <= level:
                    break
                body.append(following)
            return "\n".join(body).strip()
    found = [anchor(m) for m in re.findall(r"^#+\s+(.*)$", text, re.M)]
    raise ValueError(f"{source} has no section #{name}; its sections: {', '.join(found)}")


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def tables_of(text: str) -> list[list[str]]:
    """The Markdown tables of ``text``, each a list of its lines."""
    tables: list[list[str]] = []
    previous = False
    for line in text.splitlines():
        is_row = line.startswith("|")
        if is_row and not previous:
            tables.append([])
        if is_row:
            tables[-1].append(line)
        previous = is_row
    return tables


def columns_of(table: list[str], wanted: list[str], source: str) -> str:
    """A table with only the ``wanted`` columns, in that order."""
    header = _cells(table[0])
    missing = [c for c in wanted if c not in header]
    if missing:
        raise ValueError(f"{source}: no column {missing} in the table's {header}")
    index = [header.index(c) for c in wanted]
    out = []
    for n, line in enumerate(table):
        if n == 1:
            out.append("|" + "|".join("---" for _ in index) + "|")
        else:
            cells = _cells(line)
            out.append("| " + " | ".join(cells[i] for i in index) + " |")
    return "\n".join(out)


def include(args: str, page: Path) -> str:
    """The text of an ``include`` block on ``page``."""
    target, _, rest = args.strip().partition(" ")
    # options are key=value; a value (a column's name) may hold spaces
    options = [o for o in re.split(r"\s+(?=\w+=)", rest.strip()) if o]
    path, _, name = target.partition("#")
    source = ROOT / path
    text = source.read_text()
    if name:
        body = section(text, name, path)
    else:  # the whole file, without its title: the page has its own headings
        body = re.sub(r"\A# [^\n]*\n", "", text.strip()).strip()
    settings = dict(option.partition("=")[::2] for option in options)
    unknown = set(settings) - {"columns", "table"}
    if unknown:
        raise ValueError(f"{page.name}: unknown include option {sorted(unknown)} in {args!r}")
    if settings:
        tables = tables_of(body)
        n = int(settings.get("table", 1))
        if not 1 <= n <= len(tables):
            raise ValueError(f"{target}: no table {n} (it has {len(tables)})")
        table = tables[n - 1]
        wanted = settings.get("columns")
        body = columns_of(table, wanted.split(";"), target) if wanted else "\n".join(table)
    link = os.path.relpath(source, page.parent).replace(os.sep, "/")
    return f"{body}\n\n(From [`{path}`]({link}{'#' + name if name else ''}).)"


def runtime_size() -> tuple[int, int, int, int]:
    """KB and files of the runtime a job ships, and of the package's files it leaves out."""
    import fedforest
    from fedforest.flare.job import _stage_package

    package = Path(fedforest.__file__).resolve().parent
    with tempfile.TemporaryDirectory() as tmp:
        staged = _stage_package(Path(tmp)) / "fedforest"
        shipped = {
            p.relative_to(staged): p.stat().st_size for p in staged.rglob("*") if p.is_file()
        }
    left = [
        p.stat().st_size for p in package.rglob("*.py") if p.relative_to(package) not in shipped
    ]
    return round(sum(shipped.values()) / 1024), len(shipped), round(sum(left) / 1024), len(left)


def runtime_text() -> str:
    from fedforest.flare.job import NOT_SHIPPED

    kb, files, left_kb, left_files = runtime_size()
    parts = [f"`{p}/`" if "." not in p else f"`{p}`" for p in NOT_SHIPPED if "*" not in p]
    parts = [p for p in parts if "__pycache__" not in p]
    return (
        f"A job ships **{kb} KB of Python in {files} files** in each app's `custom/` folder: "
        f"the package without {', '.join(parts[:-1])} and {parts[-1]} ({left_kb} KB in "
        f"{left_files} files that no site or server runs; they also keep matplotlib off the "
        "sites)."
    )


def generated(args: str, page: Path) -> str:
    """The text of a ``generated`` block."""
    kind, *rest = args.split()
    if kind == "config":
        from fedforest.federation.config_docs import render

        return render(rest[0])
    if kind == "runtime-size":
        return runtime_text()
    raise ValueError(f"{page.name}: unknown generated block {args!r}")


def expected(kind: str, args: str, page: Path) -> str:
    return include(args, page) if kind == "include" else generated(args, page)


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def same(kind: str, args: str, old: str, new: str) -> bool:
    """Whether a block's text is current (the runtime's size within the tolerance)."""
    if old.strip() == new.strip():
        return True
    if kind == "generated" and args.strip() == "runtime-size":
        a, b = _numbers(old), _numbers(new)
        return len(a) == len(b) and all(
            abs(x - y) <= RUNTIME_TOLERANCE * max(y, 1) for x, y in zip(a, b, strict=True)
        )
    return False


def blocks(page: Path):
    """(kind, arguments, current text, expected text) of every block of ``page``."""
    for match in BLOCK.finditer(page.read_text()):
        kind, args, body = match.group(2), match.group(3), match.group(4)
        yield kind, args, body, expected(kind, args, page)


def stale(pages=PAGES) -> list[str]:
    """The blocks whose text is not what this script would write, as 'page: block'."""
    out = []
    for page in pages:
        for kind, args, body, new in blocks(page):
            if not same(kind, args, body, new):
                out.append(f"{page.relative_to(ROOT)}: {kind} {args}")
    return out


def write(pages=PAGES) -> list[Path]:
    """Rewrite every block; returns the pages changed."""
    changed = []
    for page in pages:
        text = page.read_text()

        def fill(match: re.Match, page=page) -> str:
            kind, args = match.group(2), match.group(3)
            return f"{match.group(1)}{expected(kind, args, page)}\n{match.group(5)}"

        new = BLOCK.sub(fill, text)
        if new != text:
            page.write_text(new)
            changed.append(page)
    return changed


# --------------------------------------------------------------------------- make demo
DEMO_MARKER = "<!-- make demo output -->"
DEMO_BLOCK = re.compile(re.escape(DEMO_MARKER) + r"\n```\n(.*?)```", re.S)


def demo_excerpt(console: str) -> str:
    """What the README shows of ``make demo``'s console: from the first line of the run,
    without the Brier table and the lines of test rows and phase seconds."""
    lines = console.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("running the job"))
    out, skipping = [], False
    for line in lines[start:]:
        if line.startswith("Brier score"):
            skipping = True
        elif skipping and " deploys " in line:
            skipping = False
        if not skipping and not line.startswith(("test rows:", "phase seconds:")):
            out.append(line.rstrip())
    return "\n".join(out).strip() + "\n"


def readme_demo_block(readme: Path = ROOT / "README.md") -> str:
    """The README's block of ``make demo``'s console."""
    match = DEMO_BLOCK.search(readme.read_text())
    if not match:
        raise ValueError(f"{readme.name} has no block after {DEMO_MARKER}")
    return match.group(1)


def write_demo(console: str, readme: Path = ROOT / "README.md") -> None:
    block = f"{DEMO_MARKER}\n```\n{demo_excerpt(console)}```"
    readme.write_text(DEMO_BLOCK.sub(lambda _: block, readme.read_text(), count=1))


def run_demo() -> str:
    import subprocess

    done = subprocess.run(
        ["make", "--no-print-directory", "demo"], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"make demo failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done.stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list stale blocks")
    parser.add_argument("--demo", action="store_true", help="run make demo; write its excerpt")
    args = parser.parse_args(argv)
    if args.demo:
        write_demo(run_demo())
        print("updated README.md (make demo's console)")
        return 0
    if args.check:
        found = stale()
        for line in found:
            print(f"stale: {line}")
        return 1 if found else 0
    for page in write():
        print(f"updated {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
