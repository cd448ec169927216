"""What each ``job.task`` allows in a job's file, and what it fills in by default.

One :class:`TaskRules` per task (:data:`TASK_RULES`), looked up once where a
job file is read (:func:`task_defaults`) and where a command line names a
task (``fedforest elect --task``): the metrics ``evaluation.metrics``,
``evaluation.auto_metric`` and ``election.metric`` may name, and for a task
whose trees predict no class distribution (regression, survival) the defaults
of the keys its file leaves out and the refusal of what only classification
has (calibration, hard voting, classification metrics). Every error names
the file, the key, the bad value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..validation import ConfigChecker
from ..vocabulary import (
    AUTO_METRICS,
    METRICS,
    RANKING_METRICS,
    REGRESSION_AUTO_METRIC,
    REGRESSION_METRICS,
    SURVIVAL_AUTO_METRIC,
    SURVIVAL_AUTO_METRICS,
    SURVIVAL_METRICS,
    SURVIVAL_TUNING_METRICS,
)


@dataclass(frozen=True)
class TaskRules:
    """What a job of one task allows and what it fills in.

    Attributes
    ----------
    metrics : tuple of str
        What ``evaluation.metrics`` may name.
    auto_metrics : tuple of str
        What ``evaluation.auto_metric`` may name.
    tuning_metrics : tuple of str
        What ``election.metric`` may name.
    auto_metric : str or None
        The ``evaluation.auto_metric`` and ``election.metric`` a file that
        leaves them out gets (``None``: the job file's defaults, a
        classification job's).
    prediction : str or None
        What a tree predicts, in the refusal of calibration and hard voting;
        ``None``: class distributions, which both apply to (no defaults are
        filled in).
    averaged : str
        Why hard voting does not apply (the refusal's reason).
    """

    metrics: tuple[str, ...]
    auto_metrics: tuple[str, ...]
    tuning_metrics: tuple[str, ...]
    auto_metric: str | None = None
    prediction: str | None = None
    averaged: str = ""


#: Per ``job.task`` (:data:`~fedforest.vocabulary.TASKS`).
TASK_RULES: dict[str, TaskRules] = {
    "classification": TaskRules(METRICS, AUTO_METRICS, RANKING_METRICS),
    "regression": TaskRules(
        REGRESSION_METRICS,
        (REGRESSION_AUTO_METRIC,),
        REGRESSION_METRICS,
        auto_metric=REGRESSION_AUTO_METRIC,
        prediction="a predicted number",
        averaged="trees' predictions are averaged; there are no votes to count",
    ),
    "survival": TaskRules(
        SURVIVAL_METRICS,
        SURVIVAL_AUTO_METRICS,
        SURVIVAL_TUNING_METRICS,
        auto_metric=SURVIVAL_AUTO_METRIC,
        prediction="a survival curve",
        averaged="the trees' survival curves are averaged; there are no votes",
    ),
}


def task_defaults(c: ConfigChecker, data: Any, ev: dict, el: dict, task: str) -> None:
    """The defaults a job of ``task`` needs in its ``evaluation`` (``ev``) and ``election``
    (``el``) sections, and what it refuses (``data``: the file as given).

    A regression or survival job's file that leaves a key out gets the task's
    (every metric of the task; ``auto`` and the election's tuning by the
    task's first auto metric: RMSE, or the integrated Brier score; no
    calibration). Calibration, hard voting and another task's metrics are
    refused, naming the task. A classification job is left as it is.
    """
    rules = TASK_RULES[task]
    if rules.auto_metric is None:
        return
    given = data if isinstance(data, Mapping) else {}
    ev_given = given.get("evaluation") if isinstance(given.get("evaluation"), Mapping) else {}
    el_given = given.get("election") if isinstance(given.get("election"), Mapping) else {}
    why = f"for job.task: {task}"
    if "metrics" not in ev_given:
        ev["metrics"] = list(rules.metrics)
    if "auto_metric" not in ev_given:
        ev["auto_metric"] = rules.auto_metric
    if "metric" not in el_given:
        el["metric"] = rules.auto_metric
    if "calibration" not in ev_given:
        ev["calibration"] = "none"
    elif ev["calibration"] != "none":
        c.fail(
            "evaluation.calibration",
            ev["calibration"],
            f"none {why} (calibration maps class probabilities; {rules.prediction} is not one)",
        )
    if ev.get("voting") == "hard":
        c.fail("evaluation.voting", "hard", f"soft {why} ({rules.averaged})")
    bad = [m for m in ev["metrics"] if isinstance(m, str) and m not in rules.metrics]
    if bad:
        c.fail(
            "evaluation.metrics",
            ev["metrics"],
            f"{task} metrics {', '.join(rules.metrics)} {why} "
            f"({'; '.join(_whose(m) for m in bad)})",
        )


def _whose(metric: str) -> str:
    """Which tasks' metric ``metric`` is, for a refusal."""
    tasks = [t for t, r in TASK_RULES.items() if metric in r.metrics]
    return f"{metric!r} is a {' and '.join(tasks)} metric" if tasks else f"{metric!r} is unknown"
