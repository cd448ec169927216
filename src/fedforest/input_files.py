"""The tables a command reads: one table, one site.

``job build`` (the data files of the site YAMLs), ``fedforest elect`` and
``fedforest experiment --site-files`` each take several tables, one per site.
Two of them that are one table would count the same patients twice: as two
sites that agree on every feature, and in the pooled model as twice the
evidence. :func:`refuse_same_tables` refuses two paths to the same file (the
same path once links are resolved, or the same device and inode: a hard
link, a symbolic link, a bind mount) and two files with the same bytes (a
copy), naming both paths. Contents are compared by SHA-256 digest, and only
between files of the same size.

This module imports only the standard library and :mod:`fedforest.errors`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path

from .errors import ConfigError

_CHUNK = 1 << 20


def content_digest(path) -> str:
    """The SHA-256 digest of a file's bytes (read in chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def same_tables(entries: Sequence[tuple[str, object]]) -> list[tuple[int, int, str]]:
    """The pairs of ``entries`` (label, path) that are one table, each with why.

    Returns ``[(i, j, why), ...]`` with ``i < j`` indices into ``entries``;
    ``why`` says whether the two paths are one file or two files with the
    same bytes. Paths that do not exist (or cannot be read) are left out.
    """
    stats: dict[int, os.stat_result] = {}
    for i, (_, path) in enumerate(entries):
        try:
            stats[i] = os.stat(path)
        except OSError:
            continue
    found = []
    digests: dict[int, str | None] = {}

    def digest(i: int) -> str | None:
        if i not in digests:
            try:
                digests[i] = content_digest(entries[i][1])
            except OSError:
                digests[i] = None
        return digests[i]

    for i, j in combinations(sorted(stats), 2):
        a, b = stats[i], stats[j]
        if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
            pa, pb = Path(entries[i][1]), Path(entries[j][1])
            how = (
                "the same path"
                if os.path.abspath(pa) == os.path.abspath(pb)
                else "a symbolic link to the other"
                if pa.is_symlink() or pb.is_symlink() or pa.resolve() == pb.resolve()
                else "a hard link to the other"
            )
            found.append((i, j, f"are one file ({how})"))
        elif a.st_size == b.st_size and digest(i) is not None and digest(i) == digest(j):
            found.append((i, j, "hold the same bytes (one is a copy of the other)"))
    return found


def refuse_same_tables(entries: Sequence[tuple[str, object]], fix: str) -> None:
    """Refuse two entries (label, path) that are one table (:func:`same_tables`).

    Parameters
    ----------
    entries : sequence of (str, path-like)
        Each table with what names it in the message (``site_configs/site-2.yaml:
        key 'data_path'``, ``site table``).
    fix : str
        What to do, for the message (``give each site its own data file``).

    Raises
    ------
    ConfigError
        Naming both labels and both paths, why they are one table and the fix.
    """
    pairs = same_tables(entries)
    if not pairs:
        return
    i, j, why = pairs[0]
    (label_a, path_a), (label_b, path_b) = entries[i], entries[j]
    more = f" ({len(pairs) - 1} more such pair(s))" if len(pairs) > 1 else ""
    raise ConfigError(
        f"{label_b} ({os.fspath(path_b)}) and {label_a} ({os.fspath(path_a)}) {why}: one table "
        f"would count as two sites{more}; allowed: one table per site: {fix}"
    )
