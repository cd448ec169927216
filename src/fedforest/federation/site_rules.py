"""Rules on one site's table that the job would otherwise meet only when it runs.

:func:`check_site_table` runs inside
:func:`~fedforest.federation.config.check_job_against_sites`, so when the job
is built (for every site whose data file is readable there) and when a site
starts. Each rule refuses, with a :class:`~fedforest.errors.ConfigError`
naming the site's YAML, the key, the data file, the bad value and the fix:

* **names** (:func:`check_column_names`): a column (after ``renames``) whose
  name holds invisible characters or spaces around it, and two columns whose
  names read alike (``bmi`` and ``BMI``; a rename to ``BMI`` where ``bmi``
  exists), by :func:`fedforest.columns.name_problem` and
  :func:`fedforest.columns.look_alike_groups`, the rules the schema applies
  across sites;
* **features**: at least one feature column besides the target (a
  ``drop_columns`` that lists every feature leaves none);
* **label_map** (:func:`check_label_map_merges`): a map that sends two labels
  of the target to one class (it would merge two outcomes silently);
* **part sizes** (:func:`check_part_sizes`): ``validation_fraction`` and
  ``test_fraction`` must leave each of the training, validation and test rows
  at least one row per class (:data:`MIN_REGRESSION_PART_ROWS` in a regression
  job): a stratified split needs them, and the message gives the smallest
  fraction that works at this site's size; and a ``sigmoid`` or ``isotonic``
  calibration (the site's or the job's) needs
  :data:`~fedforest.prediction.calibration.MIN_CLASS_ROWS` validation rows of
  every class, whatever the seed. A site whose validation mode is ``oob``
  (:meth:`~fedforest.federation.config.SiteConfig.validation_mode`) has no
  validation rows: ``validation_fraction`` is not checked, and the calibration
  needs those rows of every class among its training rows (scored out of bag).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np

from ..columns import class_labels, clean_name, look_alike_groups, name_problem, spelled
from ..errors import ConfigError
from ..prediction.calibration import MIN_CLASS_ROWS
from ..validation import listing
from .csv_text import parse_csv, read_csv_text
from .splits import holdout_class_rows, part_class_rows, part_event_rows, split_sizes

logger = logging.getLogger(__name__)

#: The fewest rows of a regression site's training, validation and test parts (an R²
#: needs two test rows).
MIN_REGRESSION_PART_ROWS = 2
#: The fewest events of a survival site's training, validation and test parts: the trees
#: need events to split on, and a concordance or Brier score on fewer says nothing.
MIN_PART_EVENTS = 3
#: The step of the fractions the messages suggest.
STEP = 0.001
#: The largest validation_fraction + test_fraction (the site config's own rule).
MAX_HELD_OUT = 0.9


def check_site_table(job, site, summary, seed: int = 0) -> None:
    """Every rule of the module on one site's checked table.

    Parameters
    ----------
    job : JobConfig or None
        None at a site that starts without the job's file (server mode): the
        site's own keys are checked (its task, its own ``calibration``), and
        ``seed`` is the job's seed as the site knows it.
    site : SiteConfig
    summary : TableSummary
        The site's checked table (global columns, target after ``label_map``).
    """
    check_column_names(site, summary.columns)
    features = [c for c in summary.columns if c not in site.outcomes]
    if not features:
        key = "drop_columns" if site.drop_columns else "target"
        fix = (
            "remove some columns from drop_columns"
            if site.drop_columns
            else "a data file with feature columns besides the target (is data_path the right "
            "file?)"
        )
        raise ConfigError(
            f"{site.source}: key {key!r}: the data file {site.data_path} keeps no feature "
            f"column besides the target {site.target!r}"
            + (f" (drop_columns lists {listing(site.drop_columns)})" if site.drop_columns else "")
            + f"; allowed: at least one feature column: {fix}"
        )
    check_label_map_merges(site)
    check_part_sizes(job, site, summary.target, seed)
    if site.task == "survival":
        check_part_events(job, site, summary.target, seed)


def check_part_events(job, site, event, seed: int = 0) -> None:
    """A survival site's split must leave :data:`MIN_PART_EVENTS` events in each of its
    training, validation (``holdout`` only) and test rows: the trees, the concordance and
    the integrated Brier score of a part without events say nothing."""
    seed = job.seed if job is not None else seed
    held = site.held_validation_fraction
    events = part_event_rows(event, held, site.test_fraction, seed)
    parts = [("training", events[0]), ("test", events[2])]
    if held is not None:
        parts.insert(1, ("validation", events[1]))
    short = [(part, n) for part, n in parts if n < MIN_PART_EVENTS]
    if not short:
        return
    total = int(np.asarray(event).astype(np.int64).sum())
    found = ", ".join(f"{n} in the {part} rows" for part, n in short)
    raise ConfigError(
        f"{site.source}: key 'event': the event column {site.target!r} of the data file "
        f"{site.data_path} has {total} event(s) of {len(event)} rows, and the split "
        f"({site.held_out_text()}, seed {seed}) leaves {found}; allowed: at least "
        f"{MIN_PART_EVENTS} events in every part: more rows with events, or a larger "
        "test_fraction (validation_fraction) in this file"
    )


def _local(site, name: str) -> str:
    return {v: k for k, v in site.renames.items()}.get(name, name)


def _column_text(site, name: str) -> str:
    local = _local(site, name)
    return f"column {spelled(local)}" + (f" (renamed to {spelled(name)})" if local != name else "")


def check_column_names(site, columns: Sequence[str]) -> None:
    """Refuse a column name that cannot be matched as written, and two that read alike."""
    groups = look_alike_groups(columns)
    if groups:
        group = groups[0]
        shown = " and ".join(_column_text(site, name) for name in group)
        renamed = [n for n in group if _local(site, n) != n]
        other = renamed[0] if renamed else group[1]
        keep = next(n for n in group if n != other)
        local = _local(site, other)
        where = f"key {'renames.' + local!r}: " if renamed else ""
        other = spelled(clean_name(other) + "_2")
        fix = (
            f"give {spelled(local)} another global name in renames (e.g. {{{spelled(local)}: "
            f"{other}}}) or remove that entry"
            if renamed
            else f"rename {spelled(local)} (e.g. renames: {{{spelled(local)}: {other}}}) or drop "
            f"it with drop_columns: [{spelled(local)}]"
        )
        raise ConfigError(
            f"{site.source}: {where}data file {site.data_path}: {shown} have names that read "
            "alike (they differ only in case, spaces, invisible characters or Unicode form), "
            "so other sites and the predict command could not tell them apart; allowed: names "
            f"that read differently: {fix} (keeping {spelled(keep)})"
        )
    for name in columns:
        why = name_problem(name)
        if why is not None:
            local = _local(site, name)
            key = f"renames.{local}" if local != name else "renames"
            key = key if key.isprintable() else repr(key)
            raise ConfigError(
                f"{site.source}: data file {site.data_path}: {_column_text(site, name)} {why}; "
                f"allowed: names as they read: rename it with {key}: {{{spelled(local)}: "
                f"{spelled(clean_name(name))}}} in {site.source} (or correct the header)"
            )


def raw_class_labels(site) -> list | None:
    """The target's labels as the data file holds them (before ``label_map``), read by the
    one CSV reader (:mod:`~fedforest.federation.csv_text`), or None when the file cannot be
    read here."""
    local = _local(site, site.target)

    def fail(what: str, allowed: str) -> NoReturn:
        raise ValueError(what)

    try:
        text, header, _ = read_csv_text(Path(site.data_path), fail)
        column = parse_csv(text, header, [header.index(local)])[local]
    except (OSError, ValueError):
        return None
    return class_labels(column)


def check_label_map_merges(site) -> None:
    """Refuse a ``label_map`` that sends two labels of the target to one global label."""
    if not site.label_map or site.task == "regression":
        return
    raw = raw_class_labels(site)
    if raw is None:
        return
    lookup = {str(k): v for k, v in site.label_map.items()}
    onto: dict[str, list] = {}
    for label in raw:
        onto.setdefault(str(lookup.get(str(label), label)), []).append(label)
    merged = {k: v for k, v in onto.items() if len(v) > 1}
    if merged:
        target, labels = next(iter(merged.items()))
        raise ConfigError(
            f"{site.source}: key 'label_map' is {site.label_map}: it maps the labels "
            f"{listing(map(repr, labels))} of target {site.target!r} (data file "
            f"{site.data_path}) onto the one label {target!r}, which merges two outcomes; "
            "allowed: a map that gives every label of the target its own global label (map "
            "each label, or leave out the entry)"
        )


def _need(site, classes: int) -> int:
    if site.task == "survival":
        return MIN_PART_EVENTS
    return classes if site.task != "regression" else MIN_REGRESSION_PART_ROWS


def _smallest(n_rows: int, key: str, site, need: int) -> float | None:
    """The smallest value of ``key`` (the other fraction as in the file) leaving every part
    at least ``need`` rows, or None."""
    other = site.test_fraction if key == "validation_fraction" else site.validation_fraction
    for i in range(1, int(round((MAX_HELD_OUT - other) / STEP))):
        f = round(i * STEP, 3)
        val, test = (f, other) if key == "validation_fraction" else (other, f)
        if min(split_sizes(n_rows, val, test)) >= need:
            return f
    return None


def check_part_sizes(job, site, target, seed: int = 0) -> None:
    """Refuse fractions that leave a part fewer rows than the split and calibration need."""
    y = np.asarray(target)
    n = len(y)
    classes = len(np.unique(y)) if site.task != "regression" else 0
    need = _need(site, classes)
    held = site.held_validation_fraction
    n_train, n_val, n_test = split_sizes(n, held, site.test_fraction)
    what = (
        f"the {classes} classes of target {site.target!r} (a stratified split needs a row of "
        "each class in every part)"
        if site.task == "classification"
        else f"{_need(site, classes)}, the fewest a part needs"
    )
    parts = [("test_fraction", n_test, "test")]
    if held is not None:
        parts.append(("validation_fraction", n_val, "validation"))
    for key, rows, part in parts:
        if rows < need:
            value = getattr(site, key)
            best = _smallest(n, key, site, need)
            fix = (
                f"at least {best:g} for this site ({key} {best:g} leaves "
                f"{_part(n, site, key, best, part)} {part} rows)"
                if best is not None
                else "no value: the site has too few rows; add rows"
            )
            raise ConfigError(
                f"{site.source}: key {key!r} is {value:g}: of the {n} rows of the data file "
                f"{site.data_path} it leaves {rows} {part} row(s), fewer than {what}; "
                f"allowed: {fix}"
            )
    if n_train < need and held is None:
        raise ConfigError(
            f"{site.source}: key 'test_fraction' is {site.test_fraction:g} (validation: oob, "
            f"no validation rows): of the {n} rows of the data file {site.data_path} it leaves "
            f"{n_train} training row(s), fewer than {what}; allowed: a smaller test_fraction "
            "(or more rows)"
        )
    if n_train < need:
        raise ConfigError(
            f"{site.source}: key 'validation_fraction' is {site.validation_fraction:g} with "
            f"test_fraction {site.test_fraction:g}: of the {n} rows of the data file "
            f"{site.data_path} they leave {n_train} training row(s), fewer than {what}; "
            "allowed: smaller fractions (or more rows)"
        )
    if site.task == "classification":
        _check_calibration_rows(job, site, y, job.seed if job is not None else seed)


def _part(n: int, site, key: str, value: float, part: str) -> int:
    val, test = (
        (value, site.test_fraction)
        if key == "validation_fraction"
        else (site.validation_fraction, value)
    )
    sizes = split_sizes(n, val, test)
    return sizes[1] if part == "validation" else sizes[2]


def _check_calibration_rows(job, site, y: np.ndarray, seed: int) -> None:
    """A ``sigmoid`` or ``isotonic`` calibration needs validation rows of every class."""
    method = site.calibration or (job.calibration if job is not None else None)
    needed = MIN_CLASS_ROWS.get(method)
    if needed is None:
        return
    held = site.held_validation_fraction
    part = 1 if held is not None else 0  # oob: the training rows, scored out of bag
    rows = part_class_rows(y, held, site.test_fraction, seed)
    short = {label: r[part] for label, r in rows.items() if r[part] < needed}
    if not short:
        return
    labels, counts = np.unique(y, return_counts=True)
    class_rows = dict(zip(labels.tolist(), counts.tolist(), strict=True))
    key = "calibration" if site.calibration else "evaluation.calibration"
    where = site.source if site.calibration else f"{job.source} (for site {site.site!r})"
    if held is None:
        label, got = next(iter(short.items()))
        raise ConfigError(
            f"{where}: key {key!r} is {method!r}, which needs {needed} rows of every class "
            f"to fit on (validation: oob, the training rows out of bag), but test_fraction "
            f"{site.test_fraction:g} of the {len(y)} rows of {site.data_path} ({site.source}) "
            f"leaves class {_plain_label(label)!r} only {got} training row(s) (class counts "
            f"{class_rows}); allowed: more rows of class(es) {listing(map(repr, short))}, or "
            f"calibration: auto, prior or none in {site.source} (auto skips what it cannot fit)"
        )
    best = None
    for i in range(1, int(round((MAX_HELD_OUT - site.test_fraction) / STEP))):
        f = round(i * STEP, 3)
        guaranteed = holdout_class_rows(class_rows, f, site.test_fraction)
        if (
            min(g[1] for g in guaranteed.values()) >= needed
            and min(min(g) for g in guaranteed.values()) >= 1
        ):
            best = f
            break
    fix = (
        f"validation_fraction at least {best:g} in {site.source}, "
        if best is not None
        else f"more rows of class(es) {listing(map(repr, short))}, "
    )
    label, got = next(iter(short.items()))
    raise ConfigError(
        f"{where}: key {key!r} is {method!r}, which needs {needed} validation rows of every "
        f"class, but validation_fraction {site.validation_fraction:g} of the {len(y)} rows of "
        f"{site.data_path} ({site.source}) gives class {_plain_label(label)!r} only {got} "
        f"validation row(s) (class counts {class_rows}); allowed: {fix}or calibration: "
        f"auto, prior or none in {site.source} (auto skips what it cannot fit)"
    )


def _plain_label(label):
    return label.item() if isinstance(label, np.generic) else label
