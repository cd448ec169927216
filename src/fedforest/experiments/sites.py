"""Natural sites: one CSV table per hospital, each with its own columns.

The paper's protocol simulates sites by splitting one table
(:mod:`~.partition`, :mod:`~.skew`). With real multi-site data each site's
table is a file of its own: :func:`load_site_files` reads them into one
:class:`~.datasets.Dataset` whose feature space is the union of the files'
columns (matched by name; a column a file lacks is absent at that site) and
which remembers each site's rows and columns. The experiment then repeats
stratified train/test (and validation) splits within every site, seeded by
the repetition, instead of dealing rows afresh (plain random splits for a
regression target, ``task="regression"``).

Each file is read as a site's data file is, by the one CSV reader
(:func:`~fedforest.federation.tables.read_site_csv`): UTF-8 text separated by
commas (another separator or decimal commas named), distinct names that read
as written, values as what they are (``True``/``yes`` are text, never 1 and
0), and no stray text in a column of numbers. Non-numeric columns, and the
columns named ``categorical``, are coded as
integers over all files together (:func:`~.datasets.code_categoricals`), so a level has
the same code at every site. The site names are the file stems; the
scenario's Jaccard overlap is the realised mean pairwise Jaccard similarity
of the files' feature sets (:func:`~.partition.pairwise_jaccard`).

Example
-------
>>> import tempfile, pathlib
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> pd.DataFrame({"age": [50, 60] * 10, "ward": ["a", "b"] * 10, "y": [0, 1] * 10}).to_csv(
...     tmp / "north.csv", index=False)
>>> pd.DataFrame({"age": [40, 70] * 10, "bmi": [20, 30] * 10, "y": [1, 0] * 10}).to_csv(
...     tmp / "south.csv", index=False)
>>> data = load_site_files([tmp / "north.csv", tmp / "south.csv"], "y")
>>> data.name, list(data.X.columns), data.sites.columns
('north+south', ['age', 'ward', 'bmi'], {'north': ['age', 'ward'], 'south': ['age', 'bmi']})
>>> data.sites.jaccard
0.333
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd

from ..columns import look_alike_note
from ..federation.tables import read_site_csv
from ..input_files import refuse_same_tables
from ..model.inputs import names_text
from .datasets import Dataset, NaturalSites, code_categoricals

logger = logging.getLogger(__name__)

__all__ = ["load_site_files"]


def _read_site(
    path: Path, target: str, categorical: Sequence[str] = (), task: str = "classification"
) -> pd.DataFrame:
    """A site file read as a site's data file is (:func:`~fedforest.federation.tables.read_site_csv`:
    the one CSV reader, booleans as text, names as they read, no stray text among numbers),
    then its target and classes checked."""

    def fail(what: str, allowed: str) -> NoReturn:
        raise ValueError(f"site file {path}: {what}; allowed: {allowed}")

    try:
        frame = read_site_csv(path, fail, exempt=[target, *categorical])
    except OSError as err:
        raise ValueError(f"site file {path}: cannot read it ({err.strerror or err})") from err
    if target not in frame.columns:
        raise ValueError(
            f"site file {path}: the target (--target) {target!r} is not a column"
            f"{look_alike_note(target, frame.columns)}; columns: {names_text(list(frame.columns))}; "
            "allowed: the target column, in every site file"
        )
    if frame.shape[1] < 2:
        raise ValueError(
            f"site file {path}: no feature column besides the target {target!r}; allowed: the "
            "target and at least one feature column"
        )
    if frame.empty:
        raise ValueError(
            f"site file {path}: no rows below the header; allowed: a header and the site's rows"
        )
    missing = int(frame[target].isna().sum())
    if missing:
        raise ValueError(
            f"site file {path}: the target {target!r} is missing in {missing} rows; allowed: a "
            "target value on every row (drop the rows without one first)"
        )
    for name in frame.columns:
        if name != target and frame[name].isna().all():
            logger.warning(
                "site file %s: column %r is empty in every row: this site has no value of it, "
                "as if it lacked the column",
                path,
                name,
            )
    classes = frame[target].value_counts(sort=False).sort_index()
    if task == "classification" and len(classes) < 2:
        found = ", ".join(f"{label}: {count}" for label, count in classes.items())
        raise ValueError(
            f"site file {path}: the target {target!r} has a single class ({found} rows); "
            "allowed: at least two classes at every site (add the site's rows of the other "
            "classes, or leave the file out)"
        )
    return frame


def check_with_job_rules(
    frames: Sequence[pd.DataFrame],
    paths: Sequence[Path],
    target: str,
    categorical: Sequence[str] = (),
    task: str = "classification",
) -> None:
    """Refuse site files the job would refuse for the same reasons, by the job's functions.

    Each file described as a site describes its table
    (:class:`~fedforest.federation.schema.SiteSchema`: columns whose names
    read alike in one file are refused, :func:`fedforest.columns.look_alike_groups`),
    and the files joined by the schema phase's rules
    (:meth:`~fedforest.federation.schema.GlobalSchema.build`): a column numeric
    in one file and categorical in another, names, levels and class labels
    that read alike across files (``bmi``/``BMI``, ``never``/``NEVER``), class
    labels of two types (0/1 in one file, no/yes in another) or two codings.
    Unlike the job, files that share no column are allowed: the experiment
    measures that scenario. Errors are ``ValueError`` naming the file(s).
    """
    from ..errors import SchemaError
    from ..federation.schema import GlobalSchema, SiteSchema

    schemas = []
    for path, frame in zip(paths, frames, strict=True):
        listed = [c for c in categorical if c in frame.columns]
        try:
            schemas.append(SiteSchema.from_frame(path.stem, frame, target, listed, task))
        except SchemaError as err:
            raise ValueError(
                f"site file {path}: {err} (for a site file: correct its header)"
            ) from None
    try:
        GlobalSchema.build(schemas)
    except SchemaError as err:
        files = ", ".join(str(p) for p in paths)
        raise ValueError(
            f"site files {files}: {err} (for site files: correct the files named)"
        ) from None


def load_site_files(
    paths: Sequence,
    target: str,
    categorical: Sequence[str] = (),
    name: str | None = None,
    task: str = "classification",
):
    """Read one CSV table per site into a :class:`~.datasets.Dataset` of natural sites.

    Parameters
    ----------
    paths : sequence of path-like
        Two or more CSV files, one per site; the site names are the file
        stems, which must be distinct.
    target : str
        The target column, in every file.
    categorical : sequence of str
        Columns to treat as categorical (non-numeric columns always are);
        each must be a column of at least one file.
    name : str, optional
        The dataset's name in the results (default: the stems joined by ``+``).
    task : {"classification", "regression"}
        What the target is (the dataset's ``task``): class labels, or numbers
        (a site may then hold a single value; :func:`~.datasets.check_dataset`
        checks that the target is numeric).

    Returns
    -------
    Dataset
        ``X`` holds every file's rows (in file order) over the union of the
        columns (in order of first appearance), NaN where a site lacks a
        column; ``sites`` (:class:`~.datasets.NaturalSites`) gives each site's rows,
        columns and file.

    Raises
    ------
    ValueError
        Naming the file: fewer than two files, a missing or unreadable file,
        repeated stems, a repeated header, no target column or a missing
        target value, a single class (classification), no feature column; a ``categorical``
        column no file has, or a target named as categorical.
    """
    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise ValueError(
            f"site files (--site-files): give at least two, one per site; got {len(paths)}"
        )
    for path in paths:
        if not path.is_file():
            raise ValueError(f"site file {path}: no such file; allowed: an existing CSV file")
    stems = [p.stem for p in paths]
    repeated = sorted({s for s in stems if stems.count(s) > 1})
    if repeated:
        clash = ", ".join(str(p) for p in paths if p.stem in repeated)
        raise ValueError(
            f"site files {clash}: the site names are the file stems and must be distinct; "
            f"{', '.join(repeated)} repeats; allowed: distinct file names (rename the files)"
        )
    if target in categorical:
        raise ValueError(f"site files: --categorical names the target {target!r}")
    refuse_same_tables(
        [("site file", path) for path in paths], "give each site's own CSV file once"
    )
    frames = [_read_site(path, target, categorical, task) for path in paths]
    check_with_job_rules(frames, paths, target, categorical, task)
    union = list(dict.fromkeys(c for f in frames for c in f.columns if c != target))
    unknown = [c for c in categorical if c not in union]
    if unknown:
        raise ValueError(
            f"site files: the categorical columns (--categorical) "
            f"{', '.join(map(repr, unknown))} are columns of no file"
            f"{look_alike_note(unknown[0], union)}; columns: {names_text(union)}; allowed: "
            "columns of at least one file"
        )
    both = pd.concat(frames, ignore_index=True, sort=False)
    y = both.pop(target).to_numpy()
    X = both[union].copy()
    cats = code_categoricals(X, categorical)
    ends = np.cumsum([0] + [len(f) for f in frames])
    sites = NaturalSites(
        rows={s: np.arange(ends[k], ends[k + 1]) for k, s in enumerate(stems)},
        columns={
            s: [c for c in union if c in f.columns] for s, f in zip(stems, frames, strict=True)
        },
        files={s: str(p) for s, p in zip(stems, paths, strict=True)},
    )
    logger.info(
        "site files: %d sites (%s), %d columns in all, %d shared, Jaccard %.3f",
        len(stems),
        ", ".join(f"{s}: {len(sites.rows[s])} rows" for s in stems),
        len(union),
        sum(all(c in cols for cols in sites.columns.values()) for c in union),
        sites.jaccard,
    )
    return Dataset(name or "+".join(stems), X.astype(float), y, cats, sites=sites, task=task)
