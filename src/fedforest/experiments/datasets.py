"""Experiment datasets: loading a table, and checking that the sites can use it.

A :class:`Dataset` is a table of features and a target: one of the synthetic
sets (:mod:`~.synthetic`), a table bundled with scikit-learn
(:mod:`~.bundled`), a CSV file (:func:`load_table`) or natural sites, one CSV
file per site (:func:`~.sites.load_site_files`). Every dataset declares its
task (:data:`~fedforest.vocabulary.TASKS`): class labels (classification)
or numbers (regression); the named sets have their own (:func:`dataset_task`),
a CSV file takes the experiment's.

:func:`check_dataset` refuses, before anything runs, a dataset of the other
task, and one whose sites could not be split into training, test (and
validation) rows: for classification rows that hold every class, for the
paper's even deal (:func:`rows_per_class`), a skewed deal
(:func:`class_floor` rows of every class per site) and natural sites alike;
for regression :func:`regression_floor` rows at every site, so that each
part has :data:`MIN_REGRESSION_PART_ROWS` rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd

from ..federation.splits import split_sizes
from ..model.inputs import FLOAT32_MAX
from ..rules import validation_methods
from ..vocabulary import REGRESSION_METRICS, TASKS
from .partition import pairwise_jaccard


def code_categoricals(frame: pd.DataFrame, categorical: Sequence[str] = ()) -> list[str]:
    """Code non-numeric and named columns as integers 0..K-1 in place (missing stays NaN).

    Levels are sorted, so the codes do not depend on row order. Returns the
    categorical columns: those named first, then the non-numeric ones found.

    Examples
    --------
    >>> frame = pd.DataFrame({"x": [1.5, 2.0], "c": ["b", "a"]})
    >>> code_categoricals(frame), frame["c"].tolist()
    (['c'], [1.0, 0.0])
    """
    cats = list(categorical)
    for col in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[col]) or col in cats:
            codes, _ = pd.factorize(frame[col], sort=True)
            frame[col] = np.where(codes < 0, np.nan, codes)
            if col not in cats:
                cats.append(col)
    return cats


@dataclass
class NaturalSites:
    """Where each natural site's data sits in its :class:`Dataset`.

    Attributes
    ----------
    rows : dict of str to numpy.ndarray
        Site name (file stem) -> row positions in ``Dataset.X``.
    columns : dict of str to list of str
        Site name -> the feature columns of its file, in the union's order.
    files : dict of str to str
        Site name -> the file it was read from.
    """

    rows: dict[str, np.ndarray]
    columns: dict[str, list[str]]
    files: dict[str, str]

    @property
    def names(self) -> list[str]:
        """The site names, in file order."""
        return list(self.rows)

    @property
    def jaccard(self) -> float:
        """Mean pairwise Jaccard similarity of the sites' feature sets, to 3 decimals."""
        return round(pairwise_jaccard(self.columns.values()), 3)


@dataclass
class Dataset:
    """A table for experiments: features, target and which columns are categorical.

    Natural sites (:func:`~.sites.load_site_files`) also say which rows and
    columns are each site's (``sites``); a single table has ``None`` there and
    is split over simulated sites. ``task`` says what the target is: class
    labels (``"classification"``) or numbers (``"regression"``).
    """

    name: str
    X: pd.DataFrame
    y: np.ndarray
    categorical: list[str] = field(default_factory=list)
    sites: NaturalSites | None = None
    task: str = "classification"

    @property
    def categories(self) -> dict[str, list[str]]:
        """Levels of the categorical columns (integer codes 0..K-1)."""
        out = {}
        for c in self.categorical:
            k = int(np.nanmax(self.X[c].to_numpy(dtype=float))) + 1
            out[c] = [str(i) for i in range(k)]
        return out


def dataset_task(spec: str) -> str | None:
    """The task of a named dataset (synthetic or bundled), ``None`` for anything else.

    A file of the same name as a bundled dataset is read as the file, so it has no task
    of its own.

    Examples
    --------
    >>> dataset_task("wine"), dataset_task("diabetes"), dataset_task("F-500-Num")
    ('classification', 'regression', 'regression')
    """
    from .bundled import BUNDLED_TASKS
    from .synthetic import DATASET_TASKS

    if spec in DATASET_TASKS:
        return DATASET_TASKS[spec]
    if spec in BUNDLED_TASKS and not Path(spec).is_file():
        return BUNDLED_TASKS[spec]
    return None


def task_datasets(task: str) -> list[str]:
    """The named datasets (synthetic, then bundled) of ``task``, for a message.

    Examples
    --------
    >>> task_datasets("regression")
    ['F-500-Num', 'F-500-Mix', 'diabetes']
    """
    from .bundled import BUNDLED_TASKS
    from .synthetic import DATASET_TASKS

    return [n for n, t in {**DATASET_TASKS, **BUNDLED_TASKS}.items() if t == task]


def load_table(
    spec: str,
    target: str | None = None,
    categorical: Sequence[str] = (),
    random_state: int = 0,
    task: str = "classification",
) -> Dataset:
    """A synthetic dataset by name (``S-500-Mix``, ``F-500-Num`` ...), a dataset bundled with
    scikit-learn (``breast_cancer``, ``wine``, ``digits``, ``diabetes``) or a CSV file with a
    target column.

    A named dataset has its own task (:func:`dataset_task`); a CSV file's is
    ``task`` (:func:`check_dataset` refuses a named dataset of another task).
    A CSV file is read as a site's data file is
    (:func:`~fedforest.federation.tables.read_site_csv`); its non-numeric
    columns are coded as integers and treated as categorical.
    A file of the same name as a bundled dataset is read as the file.
    """
    from .bundled import BUNDLED, load_bundled_table
    from .synthetic import DATASETS, REGRESSION_DATASETS, load_dataset

    if task not in TASKS:
        raise ValueError(f"task={task!r} must be one of {', '.join(TASKS)}")
    named = dataset_task(spec)
    if spec in DATASETS or spec in REGRESSION_DATASETS:
        X, y, cats = load_dataset(spec, random_state=random_state)
        return Dataset(spec, X, np.asarray(y), list(cats), task=named)
    path = Path(spec)
    if named is not None:
        X, y, cats = load_bundled_table(spec)
        return Dataset(spec, X, y, cats, task=named)
    if not path.is_file():
        synthetic = [*DATASETS, *REGRESSION_DATASETS]
        raise ValueError(
            f"dataset {spec!r} is neither a known synthetic set {sorted(synthetic)}, a dataset "
            f"bundled with scikit-learn {sorted(BUNDLED)} nor a CSV file"
        )
    if not target:
        raise ValueError(f"dataset {spec}: give the target column (--target)")
    from ..federation.tables import read_site_csv

    def fail(what: str, allowed: str) -> NoReturn:
        raise ValueError(f"dataset {spec}: {what}; allowed: {allowed}")

    try:  # the one CSV reader, with a data file's own rules (booleans are text)
        frame = read_site_csv(path, fail, exempt=[target, *categorical])
    except OSError as err:
        raise ValueError(f"dataset {spec}: cannot read it ({err.strerror or err})") from err
    from ..columns import look_alike_note
    from ..model.inputs import names_text

    columns = names_text(list(frame.columns))
    if target not in frame.columns:
        raise ValueError(
            f"dataset {spec}: the target (--target) {target!r} is not a column"
            f"{look_alike_note(target, frame.columns)}; columns: {columns}; allowed: a column "
            "of the file"
        )
    unknown = [c for c in categorical if c not in frame.columns]
    if unknown:
        raise ValueError(
            f"dataset {spec}: the categorical columns (--categorical) "
            f"{', '.join(map(repr, unknown))} are not columns"
            f"{look_alike_note(unknown[0], frame.columns)}; columns: {columns}; allowed: "
            "columns of the file"
        )
    if target in categorical:
        raise ValueError(f"dataset {spec}: --categorical names the target {target!r}")
    missing = int(frame[target].isna().sum())
    if missing:
        raise ValueError(
            f"dataset {spec}: the target {target!r} is missing in {missing} rows; allowed: a "
            "target value on every row (drop the rows without one first)"
        )
    y = frame.pop(target).to_numpy()
    cats = code_categoricals(frame, categorical)
    return Dataset(path.stem, frame.astype(float), y, cats, task=task)


#: Share of each site's rows held out for testing (paper: 75/25).
TEST_FRACTION = 0.25
#: Share of each site's rows held out for validation when a method needs them (as in a job).
VALIDATION_FRACTION = 0.2


def rows_per_class(n_sites: int, test_fraction: float = TEST_FRACTION) -> int:
    """Rows of every class a dataset needs so that each of ``n_sites`` sites can be scored.

    A site's stratified split (test share ``f``) gives a class with ``k`` rows
    at most ``ceil(k (1 - f))`` training rows, so at least one test row when
    ``k >= 1 / f``, and then at least one training row too. With
    ``ceil(1 / f)`` rows of every class (4 for f = 0.25) at a site, its
    training and its test rows hold every class and every metric is defined.
    :func:`~.partition.split_rows` deals each class evenly, so the worst site
    gets ``floor(count / n_sites)`` rows of it: a class needs
    ``n_sites * ceil(1 / f)`` rows.

    Examples
    --------
    >>> rows_per_class(3)
    12
    """
    return n_sites * math.ceil(1 / test_fraction - 1e-9)


def class_floor(
    n_classes: int, test_fraction: float = TEST_FRACTION, validation_fraction: float | None = None
) -> int:
    """Rows of every class a skewed or natural site needs to be split, trained and scored.

    ``ceil(1 / f)`` rows of every class (:func:`rows_per_class` for one
    site) leave every class in the site's training and test rows; with
    ``validation_fraction``, the fewest rows per class above that for which
    :func:`validation_split_problem` finds the splits possible (a site with
    more rows splits too: every part of the split grows with the rows).

    Examples
    --------
    >>> class_floor(2), class_floor(2, validation_fraction=0.2), class_floor(5, 0.25, 0.2)
    (4, 4, 5)
    """
    floor = rows_per_class(1, test_fraction)
    if validation_fraction:
        if validation_fraction / (1 - test_fraction) >= 1:
            raise ValueError(
                f"validation_fraction={validation_fraction} leaves no training rows next to "
                f"the test share {test_fraction}"
            )
        while validation_split_problem(
            np.full(n_classes, floor), test_fraction, validation_fraction
        ):
            floor += 1
    return floor


#: Rows every part of a regression site's rows (training, validation, test) needs: R² needs two
#: test rows, and a tree two training rows to split.
MIN_REGRESSION_PART_ROWS = 2


def regression_floor(
    test_fraction: float = TEST_FRACTION, validation_fraction: float | None = None
) -> int:
    """Rows a regression site needs so that each part of its split has
    :data:`MIN_REGRESSION_PART_ROWS` rows.

    The site splits as :func:`~.runner.run_repetition` does (a plain random
    split: test rows, then validation rows out of the rest, each rounded up,
    :func:`~fedforest.federation.splits.split_sizes`); a site with more rows
    splits too.

    Examples
    --------
    >>> regression_floor(), regression_floor(validation_fraction=0.2)
    (5, 6)
    """
    if validation_fraction and validation_fraction / (1 - test_fraction) >= 1:
        raise ValueError(
            f"validation_fraction={validation_fraction} leaves no training rows next to "
            f"the test share {test_fraction}"
        )
    n = MIN_REGRESSION_PART_ROWS
    while True:
        if validation_fraction:
            parts = split_sizes(n, validation_fraction, test_fraction)
        else:
            n_test = math.ceil(test_fraction * n)
            parts = (n - n_test, n_test)
        if min(parts) >= MIN_REGRESSION_PART_ROWS:
            return n
        n += 1


def _partition_name(partition: str) -> str:
    return {"dirichlet": "Dirichlet label skew", "quantity": "Dirichlet quantity skew"}[partition]


def check_dataset(
    data: Dataset,
    n_sites: Sequence[int],
    test_fraction: float = TEST_FRACTION,
    validation_fraction: float | None = None,
    partition: str = "jaccard",
    alphas: Sequence[float] = (),
    task: str | None = None,
) -> None:
    """Refuse a dataset the sites cannot learn from and be scored on, naming what is lacking.

    ``task`` (default: the dataset's own) is the experiment's; a dataset of
    the other task is refused, naming the ``--task`` to use. A regression
    dataset is checked by :func:`_check_regression`; the rest of this
    description is classification's.

    For the even deal (``partition="jaccard"``), every class needs
    :func:`rows_per_class` rows for the largest number of sites (and, with
    validation rows, enough at the smallest site). A skewed deal gives each
    site :func:`class_floor` rows of every class first, so every class needs
    that many per site. Natural sites (``data.sites``) are checked one by
    one: each needs :func:`class_floor` rows of every class of the dataset.

    Raises
    ------
    ValueError
        If the dataset is of the other task, has no feature, a single class, fewer rows of a
        class than the partition needs, or, with ``validation_fraction``, too
        few rows at the smallest site to split off validation rows
        (:func:`validation_split_problem`). The message names the dataset
        (the site's file), the partition and ``alphas``, and what to change.
    """
    task = data.task if task is None else task
    if task not in TASKS:
        raise ValueError(f"task={task!r} must be one of {', '.join(TASKS)}")
    if data.task != task:
        _refuse_other_task(data, task)
    if data.X.shape[1] < 1:
        raise ValueError(f"dataset {data.name}: no feature column besides the target")
    _check_float32(data)
    if task == "regression":
        _check_regression(data, n_sites, test_fraction, validation_fraction, partition)
        return
    if task == "survival":
        _check_survival(data, n_sites, test_fraction, validation_fraction, partition)
        return
    y = np.asarray(data.y)
    if y.dtype.kind == "f" and (y != np.round(y)).any():
        example = float(y[y != np.round(y)][0])
        raise ValueError(
            f"dataset {data.name}: the target holds non-integer numbers such as {example!r} "
            f"({len(np.unique(y))} distinct values in {len(y)} rows): a measurement, not a class "
            "label. For a measurement use --task regression (metrics "
            f"{', '.join(REGRESSION_METRICS)}); --task classification (the default) needs a "
            "column of class labels (integers or text), e.g. a measurement cut into bands. Or "
            "check that --target names the right column"
        )
    labels, counts = np.unique(y, return_counts=True)
    found = class_counts_text(labels, counts)
    if len(labels) < 2:
        raise ValueError(
            f"dataset {data.name}: the target has a single class ({found} rows); "
            "an experiment needs at least two classes"
        )
    if data.sites is not None:
        _check_natural_sites(data, labels, test_fraction, validation_fraction)
        return
    most = max(n_sites)
    if partition != "jaccard":
        floor = class_floor(len(labels), test_fraction, validation_fraction)
        need = most * floor
        short = [str(label) for label, count in zip(labels, counts, strict=True) if count < need]
        if short:
            raise ValueError(
                f"dataset {data.name}: {len(data.y)} rows, class counts {{{found}}}; "
                f"{_partition_name(partition)} (alpha {', '.join(f'{a:g}' for a in alphas)}) "
                f"over {most} sites first gives every site {floor} rows of every class (so that "
                "its training, test"
                f"{' and validation' if validation_fraction else ''} rows hold every class), "
                f"which needs {need} rows of every class; too few rows of class "
                f"{_first(short)}. Use fewer sites (--sites)"
                f"{', a smaller --validation-fraction' if validation_fraction else ''} or more "
                "rows"
            )
        return
    need = rows_per_class(most, test_fraction)
    short = [str(label) for label, count in zip(labels, counts, strict=True) if count < need]
    if short:
        per_site = need // most
        raise ValueError(
            f"dataset {data.name}: {len(data.y)} rows, class counts {{{found}}}; {most} sites "
            f"need at least {need} rows of every class ({per_site} per site, so that each "
            f"site's {1 - test_fraction:.0%}/{test_fraction:.0%} split leaves every class in "
            f"its training and its test rows); too few rows of class {_first(short)}. "
            "Use fewer sites (--sites) or more rows"
        )
    if validation_fraction:
        for n in sorted(set(n_sites)):
            problem = validation_split_problem(counts // n, test_fraction, validation_fraction)
            if problem:
                raise ValueError(
                    f"dataset {data.name}: with validation rows (for "
                    f"{', '.join(validation_methods())}), {problem} at {n} sites. Use fewer sites "
                    "(--sites), a smaller --validation-fraction or more rows"
                )


def _refuse_other_task(data: Dataset, task: str) -> None:
    """Refuse a named dataset of the other task, naming the ``--task`` it takes."""
    if data.task == "survival" or task == "survival":
        raise ValueError(
            f"dataset {data.name}: a {data.task} dataset, not one for --task {task}; "
            f"--task survival runs {', '.join(task_datasets('survival'))}; run {data.name} with "
            f"--task {data.task}"
        )
    if data.task == "regression":
        raise ValueError(
            f"dataset {data.name}: a regression dataset (its target is a number, "
            f"{len(np.unique(data.y))} distinct values in {len(data.y)} rows), not one of class "
            "labels; run it with --task regression (metrics "
            f"{', '.join(REGRESSION_METRICS)})"
        )
    raise ValueError(
        f"dataset {data.name}: a classification dataset ({len(np.unique(data.y))} classes), "
        f"not one of numbers; --task {task} needs a numeric target: "
        f"{', '.join(task_datasets(task))} or a CSV file with a numeric --target. Run "
        f"{data.name} with --task classification (the default)"
    )


def _check_regression(
    data: Dataset,
    n_sites: Sequence[int],
    test_fraction: float,
    validation_fraction: float | None,
    partition: str,
) -> None:
    """Refuse a regression target that is not numbers, not finite or constant, a label-skew
    partition, and sites too small for :func:`regression_floor` rows (the smallest site of
    the even deal, the floor every site of the quantity skew gets first, or a natural site)."""
    y = np.asarray(data.y)
    if y.dtype.kind not in "iuf":
        text = pd.Series(y)
        numeric = pd.to_numeric(text, errors="coerce")
        example = text[numeric.isna()].iloc[0] if numeric.isna().any() else text.iloc[0]
        raise ValueError(
            f"dataset {data.name}: the target holds text such as {example!r}: class labels, "
            "not numbers. --task regression needs a numeric target: use --task classification "
            "for class labels, or check that --target names the right column"
        )
    y = y.astype(float)
    if not np.isfinite(y).all():
        row = int(np.flatnonzero(~np.isfinite(y))[0])
        raise ValueError(
            f"dataset {data.name}: the target is {y[row]:g} in row {row + 1} of the table; "
            "--task regression needs finite numbers: drop the row or fix the value"
        )
    if len(np.unique(y)) < 2:
        raise ValueError(
            f"dataset {data.name}: the target is {y[0]:g} in every row; a regression "
            "experiment needs a target that varies"
        )
    if partition == "dirichlet":
        raise ValueError(
            f"dataset {data.name}: --partition dirichlet (label skew) shares each class's rows "
            "among the sites, and a regression target has no classes; under --task regression "
            "use --partition jaccard (the even deal) or quantity (skewed site sizes)"
        )
    floor = regression_floor(test_fraction, validation_fraction)
    parts = "training, test and validation" if validation_fraction else "training and test"
    if data.sites is not None:
        for site, rows in data.sites.rows.items():
            if len(rows) < floor:
                raise ValueError(
                    f"site file {data.sites.files[site]}: {len(rows)} rows; every site needs at "
                    f"least {floor} (so that its {parts} rows hold "
                    f"{MIN_REGRESSION_PART_ROWS} rows each). Add rows to that site or leave it "
                    f"out{' (or use a smaller --validation-fraction)' if validation_fraction else ''}"
                )
        return
    most = max(n_sites)
    need = most * floor
    if len(y) < need:
        why = f"so that its {parts} rows hold {MIN_REGRESSION_PART_ROWS} rows each"
        if partition == "jaccard":
            deal = (
                f"the even deal over {most} sites gives the smallest {len(y) // most} rows, but "
                f"a site needs at least {floor} ({why}): {need} rows in all"
            )
        else:
            deal = (
                f"{_partition_name(partition)} over {most} sites first gives every site {floor} "
                f"rows ({why}), which needs {need} rows in all"
            )
        raise ValueError(
            f"dataset {data.name}: {len(y)} rows; {deal}. Use fewer sites (--sites)"
            f"{', a smaller --validation-fraction' if validation_fraction else ''} or more rows"
        )


#: Events every part of a survival site's rows (training, validation, test) needs: a
#: concordance needs comparable pairs, and each part is stratified by event.
MIN_SURVIVAL_PART_EVENTS = 2


def survival_floor(
    test_fraction: float = TEST_FRACTION, validation_fraction: float | None = None
) -> int:
    """Events a survival site needs so that each part of its split, stratified by event,
    holds :data:`MIN_SURVIVAL_PART_EVENTS` events (each part's share rounded down).

    Examples
    --------
    >>> survival_floor(), survival_floor(validation_fraction=0.2)
    (8, 10)
    """
    n = MIN_SURVIVAL_PART_EVENTS
    while True:
        test = math.floor(test_fraction * n)
        val = math.floor(validation_fraction * n) if validation_fraction else None
        train = n - test - (val or 0)
        if min(p for p in (test, val, train) if p is not None) >= MIN_SURVIVAL_PART_EVENTS:
            return n
        n += 1


def _check_survival(
    data: Dataset,
    n_sites: Sequence[int],
    test_fraction: float,
    validation_fraction: float | None,
    partition: str,
) -> None:
    """Refuse a target that is not a valid survival target
    (:func:`~fedforest.survival_metrics.check_survival_target`), a skewed partition or
    natural sites, and too few events for :func:`survival_floor` events at every site of
    the even deal (stratified by event)."""
    from ..survival_metrics import check_survival_target

    try:
        event, _ = check_survival_target(data.y, "the target")
    except ValueError as err:
        raise ValueError(f"dataset {data.name}: {err}") from err
    if partition != "jaccard" or data.sites is not None:
        what = (
            "natural sites (--site-files)"
            if data.sites is not None
            else (f"--partition {partition}")
        )
        raise ValueError(
            f"dataset {data.name}: {what} under --task survival; allowed: --partition jaccard "
            "(the even deal of one table, stratified by event)"
        )
    floor = survival_floor(test_fraction, validation_fraction)
    parts = "training, test and validation" if validation_fraction else "training and test"
    most = max(n_sites)
    events = int(np.sum(event))
    if events // most < floor:
        raise ValueError(
            f"dataset {data.name}: {events} events in {len(event)} rows; the even deal over "
            f"{most} sites gives the smallest {events // most} events, but a site needs at "
            f"least {floor} (so that its {parts} rows hold {MIN_SURVIVAL_PART_EVENTS} events "
            f"each). Use fewer sites (--sites)"
            f"{', a smaller --validation-fraction' if validation_fraction else ''} or more rows"
        )


def _check_float32(data: Dataset) -> None:
    """Refuse a feature value the trees cannot split on (infinite, or beyond float32)."""
    values = data.X.to_numpy(dtype=np.float64, na_value=np.nan)
    beyond = ~np.isnan(values) & ~(np.abs(values) <= FLOAT32_MAX)
    if beyond.any():
        row, col = (int(i[0]) for i in np.nonzero(beyond))
        raise ValueError(
            f"dataset {data.name}: column {data.X.columns[col]!r} holds {values[row, col]:g} "
            f"(row {row + 1} of the table): infinite or beyond float32's range; allowed: finite "
            f"numbers of magnitude at most {FLOAT32_MAX:.7g} (the trees split on float32 "
            "values): rescale the column, or leave the value empty to mark it missing"
        )


#: At most this many classes are listed in a message; the others are counted.
SHOWN_CLASSES = 10


def class_counts_text(labels, counts) -> str:
    """``label: count`` pairs for a message, the rarest classes first when there are more than
    :data:`SHOWN_CLASSES` (the rest are counted, with a hint when the classes are many).

    Examples
    --------
    >>> class_counts_text([0, 1], [90, 10])
    '0: 90, 1: 10'
    """
    pairs = list(zip(labels, counts, strict=True))
    if len(pairs) <= SHOWN_CLASSES:
        return ", ".join(f"{label}: {count}" for label, count in pairs)
    rare = sorted(pairs, key=lambda p: (p[1], str(p[0])))[:SHOWN_CLASSES]
    return (
        ", ".join(f"{label}: {count}" for label, count in rare)
        + f", and {len(pairs) - SHOWN_CLASSES} more classes (the rarest are shown; "
        f"{len(pairs)} classes in all: is the target a class label? For a number use "
        "--task regression)"
    )


def _first(labels: list[str]) -> str:
    """Labels for a message: at most :data:`SHOWN_CLASSES`, the others counted."""
    shown = ", ".join(labels[:SHOWN_CLASSES])
    more = len(labels) - SHOWN_CLASSES
    return shown + (f" and {more} more" if more > 0 else "")


def _check_natural_sites(
    data: Dataset, labels, test_fraction: float, validation_fraction: float | None
) -> None:
    """Every natural site holds enough rows of every class (:func:`class_floor`)."""
    floor = class_floor(len(labels), test_fraction, validation_fraction)
    y = np.asarray(data.y)
    for site, rows in data.sites.rows.items():
        counts = np.array([(y[rows] == label).sum() for label in labels])
        if counts.min() < floor:
            found = class_counts_text(labels, counts)
            raise ValueError(
                f"site file {data.sites.files[site]}: class counts {{{found}}}; every site needs "
                f"at least {floor} rows of every class of the sites' data (so that its training, "
                f"test{' and validation' if validation_fraction else ''} rows hold every "
                f"class). Add rows to that site or leave it out"
                f"{' (or use a smaller --validation-fraction)' if validation_fraction else ''}"
            )


def validation_split_problem(
    per_class: np.ndarray, test_fraction: float, validation_fraction: float
) -> str | None:
    """Why a site with ``per_class`` rows of each class cannot split off validation rows.

    The site's rows are split as :func:`run_repetition` does (test rows, then
    validation rows out of the rest, both stratified when every class has two
    rows), and a stratified split needs at least one row of every class on
    each side, as scikit-learn requires. ``None`` when the splits work.

    Examples
    --------
    >>> validation_split_problem(np.array([4, 4, 4, 4, 4]), 0.25, 0.2) is None
    False
    >>> validation_split_problem(np.array([6, 7, 5]), 0.25, 0.2) is None
    True
    """
    per_class = np.asarray(per_class)
    n, classes = int(per_class.sum()), int((per_class > 0).sum())
    n_test = math.ceil(test_fraction * n)
    rest = n - n_test
    n_val = math.ceil(validation_fraction / (1 - test_fraction) * rest)
    need = classes if per_class[per_class > 0].min() >= 2 else 1
    if n_test < need or rest - n_val < need or n_val < need:
        return (
            f"the smallest site has {n} rows ({classes} classes): {n_test} test, {n_val} "
            f"validation and {rest - n_val} training rows, and each part needs at least "
            f"{need} (one of every class when the split is stratified)"
        )
    return None
