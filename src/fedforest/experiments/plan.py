"""What an experiment runs: :class:`ExperimentPlan`, its checks, and the task's metrics.

The plan is validated before anything is loaded or trained
(:meth:`ExperimentPlan.validate`), each refusal naming the option and what
is allowed; :mod:`~.runner` runs it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..federation.config_tasks import TASK_RULES
from ..vocabulary import (
    AUTO_METRICS,
    CALIBRATIONS,
    EXPERIMENT_METHODS,
    PAPER_METHODS,
    POOLING_WEIGHTS,
    SURVIVAL_AUTO_METRICS,
    TASKS,
    VALIDATIONS,
    VOTING,
)
from .datasets import TEST_FRACTION, VALIDATION_FRACTION
from .skew import PARTITIONS

#: The nine methods of the paper's comparison (the default).
METHODS = PAPER_METHODS
#: Every method the runner can score.
ALL_METHODS = EXPERIMENT_METHODS
PAPER_SITES = (2, 3, 4, 6)
PAPER_JACCARDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: The metrics each task can score (:data:`~fedforest.vocabulary.TASKS`).
TASK_METRICS = {task: rules.metrics for task, rules in TASK_RULES.items()}
#: The metrics scored when none are named: the paper's, RMSE for regression, Harrell's C and
#: the integrated Brier score for survival.
DEFAULT_METRICS = {
    "classification": ("auprc", "auc", "mcc"),
    "regression": ("rmse",),
    "survival": ("cindex", "ibs"),
}


def check_task_metrics(task: str, metrics: Sequence[str]) -> None:
    """Refuse metrics of the other task (or unknown ones), naming what ``task`` scores.

    Examples
    --------
    >>> check_task_metrics("regression", ["rmse", "r2"])
    >>> check_task_metrics("regression", ["auc"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: metrics ['auc'] (--metrics) are classification metrics; --task regression ...
    """
    allowed = TASK_METRICS[task]
    bad = [m for m in metrics if m not in allowed]
    if not bad:
        return
    for other in TASK_METRICS:
        if other != task and all(m in TASK_METRICS[other] for m in bad):
            raise ValueError(
                f"metrics {bad} (--metrics) are {other} metrics; --task {task} scores "
                f"{', '.join(allowed)}"
                + ("; for a numeric target use --task regression" if other == "regression" else "")
            )
    raise ValueError(f"metrics {bad} are not among {list(allowed)} (--task {task})")


def check_validation(validation: str) -> None:
    """Refuse an unknown validation mode, naming the ones there are.

    ``holdout`` fits ``wmp``'s weight, ``auto``'s choice and the calibration on
    validation rows held out of training (the paper's protocol); ``oob`` on the
    training rows scored out of bag (a job's default).

    Examples
    --------
    >>> check_validation("oob")
    >>> check_validation("cross")
    Traceback (most recent call last):
    ...
    ValueError: validation='cross' must be one of oob, holdout
    """
    if validation not in VALIDATIONS:
        raise ValueError(f"validation={validation!r} must be one of {', '.join(VALIDATIONS)}")


@dataclass
class ExperimentPlan:
    """What to run. See :func:`run_experiment`.

    ``partition`` deals a dataset's rows over the simulated sites: the paper's
    even stratified deal (``"jaccard"``, the default) or a skew of
    :mod:`~.skew` (``"dirichlet"``, ``"quantity"``), run once per value of
    ``alphas``. ``site_files`` (instead of ``datasets``) are natural sites,
    one CSV file each with the ``target`` column (:func:`~.sites.load_site_files`,
    named ``name`` or the joined file stems); ``n_sites`` and ``jaccards``
    then do not apply: the scenario has as many sites as files and their
    realised overlap.

    ``task`` is what the targets are (:data:`~fedforest.vocabulary.TASKS`):
    ``"regression"`` runs numeric targets with regression forests
    (:func:`run_repetition`); a named dataset of the other task is refused.
    ``metrics`` default to the task's (:data:`DEFAULT_METRICS`).

    ``pooled_reference`` adds the pooled-data reference to every repetition's
    rows (method ``pooled_data``: one scikit-learn forest on every site's
    training and validation rows pooled, :mod:`~.reference`); it changes no
    other row.

    ``validation`` is what the methods fitted on validation rows (``wmp``,
    ``auto``) and the calibration are fitted on: ``holdout`` (the default, the
    paper's protocol) holds out ``validation_fraction`` of each site's rows
    from training and fits them there; ``oob`` (a job's default,
    ``evaluation.validation: oob``) holds out no validation rows, trains on
    every row but the test rows and fits them on the training rows scored out
    of bag (:func:`~.runner.run_repetition`).
    """

    datasets: list[str]
    n_sites: list[int] = field(default_factory=lambda: list(PAPER_SITES))
    jaccards: list[float] = field(default_factory=lambda: list(PAPER_JACCARDS))
    reps: int = 100
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    metrics: list[str] | None = None
    voting: str = "soft"
    n_estimators: int = 100
    depth_threshold: int = 2
    target: str | None = None
    categorical: list[str] = field(default_factory=list)
    n_jobs: int = 1
    validation_fraction: float = VALIDATION_FRACTION
    partition: str = "jaccard"
    alphas: list[float] = field(default_factory=list)
    site_files: list[str] = field(default_factory=list)
    name: str | None = None
    calibration: str = "none"
    pooling_weights: str = "equal"
    auto_metric: str | None = None
    task: str = "classification"
    pooled_reference: bool = False
    validation: str = "holdout"

    def __post_init__(self) -> None:
        if self.metrics is None:  # the task's default (classification's for an unknown task)
            self.metrics = list(DEFAULT_METRICS.get(self.task, DEFAULT_METRICS["classification"]))

    def validate(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r} must be one of {', '.join(TASKS)}")
        if not isinstance(self.pooled_reference, bool):
            raise ValueError(f"pooled_reference={self.pooled_reference!r} must be True or False")
        if self.site_files:
            if self.datasets:
                raise ValueError(
                    f"give datasets ({', '.join(self.datasets)}) or site files, not both"
                )
            if self.partition != "jaccard" or self.alphas:
                raise ValueError(
                    f"partition={self.partition!r}, alphas={self.alphas}: site files keep their "
                    "own rows; partition and alphas apply to one table split over sites"
                )
            if not self.target:
                raise ValueError("site files: give the target column (--target)")
        elif not self.datasets:
            raise ValueError("datasets is empty; name at least one dataset")
        if self.name is not None and not self.site_files:
            raise ValueError(f"name={self.name!r} names site files' data; no site files given")
        if self.partition not in PARTITIONS:
            raise ValueError(f"partition={self.partition!r} must be one of {', '.join(PARTITIONS)}")
        if self.partition == "jaccard" and self.alphas:
            raise ValueError(
                f"alphas={self.alphas} apply to the partitions dirichlet and quantity, not jaccard"
            )
        if self.partition != "jaccard" and not self.alphas:
            raise ValueError(
                f"partition {self.partition!r} needs its concentrations (alphas), e.g. [0.3, 1]"
            )
        if any(
            isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 < a < math.inf
            for a in self.alphas
        ):
            raise ValueError(f"alphas={self.alphas} must be finite numbers > 0")
        if len(set(self.alphas)) != len(self.alphas):
            raise ValueError(f"alphas={self.alphas} repeat a value")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(
                f"calibration={self.calibration!r} must be one of {', '.join(CALIBRATIONS)}"
            )
        if self.pooling_weights not in POOLING_WEIGHTS:
            raise ValueError(
                f"pooling_weights={self.pooling_weights!r} must be one of "
                f"{', '.join(POOLING_WEIGHTS)}"
            )
        if (
            self.auto_metric is not None
            and self.task != "survival"
            and self.auto_metric not in AUTO_METRICS
        ):
            raise ValueError(
                f"auto_metric={self.auto_metric!r} must be one of {', '.join(AUTO_METRICS)}"
            )
        bad = [m for m in self.methods if m not in ALL_METHODS]
        if bad:
            raise ValueError(f"methods {bad} are not among {list(ALL_METHODS)}")
        repeated = sorted({m for m in self.methods if list(self.methods).count(m) > 1})
        if repeated:
            raise ValueError(f"methods {repeated} are given twice")
        check_validation(self.validation)
        vf = self.validation_fraction
        if isinstance(vf, bool) or not isinstance(vf, (int, float)) or not 0 < vf <= 0.65:
            raise ValueError(
                f"validation_fraction={vf!r} must be a number in (0, 0.65]: the share of each "
                f"site's rows held out for validation, next to the test share {TEST_FRACTION}"
            )
        if not self.metrics:
            raise ValueError("metrics is empty; name at least one metric")
        check_task_metrics(self.task, self.metrics)
        if self.task == "regression":
            self._validate_regression()
        if self.task == "survival":
            self._validate_survival()
        if any((not isinstance(n, int)) or n < 2 for n in self.n_sites):
            raise ValueError(f"n_sites={self.n_sites} must be integers >= 2")
        if any(not 0 < j <= 1 for j in self.jaccards):
            raise ValueError(f"jaccards={self.jaccards} must lie in (0, 1]")
        if self.reps < 1:
            raise ValueError(f"reps={self.reps} must be at least 1")
        if self.voting not in VOTING:
            raise ValueError(f"voting={self.voting!r} must be soft or hard")
        if self.n_jobs < 1:
            raise ValueError(f"n_jobs={self.n_jobs} must be at least 1")
        if isinstance(self.n_estimators, bool) or not isinstance(self.n_estimators, int):
            raise ValueError(f"n_estimators={self.n_estimators!r} must be an integer >= 1")
        if self.n_estimators < 1:
            raise ValueError(f"n_estimators={self.n_estimators} must be at least 1")
        if (
            isinstance(self.depth_threshold, bool)
            or not isinstance(self.depth_threshold, int)
            or self.depth_threshold < 0
        ):
            raise ValueError(f"depth_threshold={self.depth_threshold!r} must be an integer >= 0")

    def _validate_regression(self) -> None:
        """Refuse the options of classification under ``task="regression"``, saying why."""
        if self.partition == "dirichlet":
            raise ValueError(
                "partition='dirichlet' (--partition dirichlet, label skew) shares each class's "
                "rows among the sites; a regression target has no classes: under --task "
                "regression use partition jaccard (the even deal) or quantity (skewed sizes)"
            )
        if self.calibration != "none":
            raise ValueError(
                f"calibration={self.calibration!r} (--calibration) calibrates probabilities; "
                "under --task regression the forests predict numbers, which are not "
                "calibrated: leave it at 'none'"
            )
        if self.auto_metric is not None:
            raise ValueError(
                f"auto_metric={self.auto_metric!r} (--auto-metric) is a classification metric; "
                "under --task regression auto and wmp choose by validation RMSE (squared "
                "error): leave it out"
            )
        if self.voting != "soft":
            raise ValueError(
                f"voting={self.voting!r} (--voting) is a vote of classes; under --task "
                "regression the trees' predictions are averaged: leave it at 'soft'"
            )

    def _validate_survival(self) -> None:
        """Refuse what a survival experiment does not run, saying what it runs instead."""
        if self.site_files or self.target:
            raise ValueError(
                "site files and CSV datasets (--site-files, --target) under --task survival: a "
                "survival target is a time and an event; allowed: the survival datasets "
                "gbsg2, whas500, veterans"
            )
        if self.partition != "jaccard":
            raise ValueError(
                f"partition={self.partition!r} (--partition) under --task survival; allowed: "
                "jaccard (the even deal, stratified by event)"
            )
        for key, value, default in (
            ("calibration", self.calibration, "none"),
            ("voting", self.voting, "soft"),
        ):
            if value != default:
                raise ValueError(
                    f"{key}={value!r} (--{key}) is classification's; under --task survival "
                    f"the trees' curves are averaged: leave it at {default!r}"
                )
        if self.auto_metric is not None and self.auto_metric not in SURVIVAL_AUTO_METRICS:
            raise ValueError(
                f"auto_metric={self.auto_metric!r} (--auto-metric) under --task survival; "
                f"allowed: {', '.join(SURVIVAL_AUTO_METRICS)}"
            )
