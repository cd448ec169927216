"""The wire protocol of a fedforest job, in one place for both sides.

Everything that crosses a site boundary is named here: the tasks the server
sends, the keys of each task's data, the keys of the FLARE message that carries
them, and the format name and version of every payload. The site
(:mod:`fedforest.federation.site`), the server (:mod:`fedforest.federation.server`)
and the FLARE adapter (:mod:`fedforest.flare`) import these names; none of them
spells a task or a format as a bare string. This module imports nothing from
fedforest.

Payloads are dicts of numpy arrays and plain values (never pickle). Every
payload carries ``format`` (one of :data:`FORMATS`) and ``version``.

Versioning rule
---------------
* A change to a payload's fields (a field added, removed, renamed, or given
  another meaning, dtype or shape) raises that format's version in
  :data:`FORMATS` by one. Readers refuse unknown fields, so even an added
  optional field is a new version.
* A reader accepts every version from 1 to the current one and refuses a newer
  version by name (:func:`check_version`): the message says which format, which
  version was received and which this installation reads, so the site knows to
  upgrade fedforest rather than suspect the sender.
* The reader of an older version is kept apart from the current reader: it
  converts the old payload into the current layout (registered in
  :data:`UPGRADES` as ``(format, old_version) -> function``), and the current
  validation then runs on the result. Tests keep an example payload of every
  old version and load it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# ---------------------------------------------------------------- formats
POOLED_FOREST = "fedforest/pooled-forest"
IMPUTERS = "fedforest/imputers"
SITE_SCHEMA = "fedforest/site-schema"
GLOBAL_SCHEMA = "fedforest/global-schema"
SITE_VOTE = "fedforest/site-vote"
MASK_SCORE = "fedforest/mask-score"
SITE_MODELS = "fedforest/site-models"
MODEL = "fedforest/model"
SITE_METRICS = "fedforest/site-metrics"
SWARM_MESSAGE = "fedforest/swarm-message"
SWARM_STATUS = "fedforest/swarm-status"

#: Current version of every payload format.
FORMATS: dict[str, int] = {
    # 2: compact trees (preorder leaf bits, float32 thresholds + refinement, leaf counts)
    # 3: the task; 4: the time grid of survival trees (field ``times``)
    POOLED_FOREST: 4,
    IMPUTERS: 1,
    # 2: a survival site's coarse event-time quantiles (field ``event_times``)
    SITE_SCHEMA: 2,
    # 2: a survival job's time grid (field ``times``)
    GLOBAL_SCHEMA: 2,
    SITE_VOTE: 1,
    MASK_SCORE: 1,
    SITE_MODELS: 1,
    # 2: settings.owner_weights (pooling weights) and the site's deployment (field ``deployment``)
    # 3: the site's input mapping (field ``inputs``: renames, label map, levels, target)
    MODEL: 3,
    # 2: the site's effective privacy policy (field ``privacy``) was added
    # 3: each row's calibration and reliability bins; auto's calibration and runner-up
    # 4: each row's events and bootstrap intervals; the bins' outcome (the target's name)
    # 5: each scored row's calibration_skipped (the methods the site could not fit, and why)
    # 6: the site's validation mode (field ``validation``: oob or holdout)
    # 7: a survival job's rows hold the survival metrics (cindex, uno_cindex, ibs, td_auc)
    #    and their risk groups' and horizon's curves (``survival_curves``)
    # 8: a survival row's time-dependent AUC and calibration at each of the job's horizons
    #    (``survival_curves.horizons``, in place of one ``calibration``)
    SITE_METRICS: 8,
    SWARM_MESSAGE: 1,
    SWARM_STATUS: 1,
}


def _site_metrics_v1(payload: Mapping) -> dict:
    """``fedforest/site-metrics`` version 1 -> 2: no privacy policy was reported (``None``)."""
    return {**payload, "privacy": None}


def _site_metrics_v2(payload: Mapping) -> dict:
    """``fedforest/site-metrics`` version 2 -> 3: rows were not calibrated and had no bins;
    ``auto`` named no runner-up."""
    per = payload.get("strategies")
    if not isinstance(per, Mapping):
        return dict(payload)  # the current reader refuses it, naming the field
    rows = {}
    for name, row in per.items():
        if isinstance(row, Mapping):
            row = {"calibration": "none", "bins": None, **row}
            if "chosen" in row:  # the row of a strategy that chose another (auto)
                row = {"chosen_calibration": "none", "runner_up": None, **row}
        rows[name] = row
    return {**payload, "strategies": rows}


def _site_metrics_v3(payload: Mapping) -> dict:
    """``fedforest/site-metrics`` version 3 -> 4: no events were counted and no interval was
    computed (``None``); the bins did not name the outcome."""
    per = payload.get("strategies")
    if not isinstance(per, Mapping):
        return dict(payload)  # the current reader refuses it, naming the field
    rows = {
        name: {"events": None, "intervals": None, **row} if isinstance(row, Mapping) else row
        for name, row in per.items()
    }
    return {**payload, "strategies": rows}


def _site_metrics_v4(payload: Mapping) -> dict:
    """``fedforest/site-metrics`` version 4 -> 5: no row said which calibration methods were
    skipped (``None``). A row that already holds ``calibration_skipped`` is refused: the
    field belongs to version 5."""
    per = payload.get("strategies")
    if not isinstance(per, Mapping):
        return dict(payload)  # the current reader refuses it, naming the field
    rows = {}
    for name, row in per.items():
        if isinstance(row, Mapping):
            if "calibration_skipped" in row:
                raise ValueError(
                    f"field 'strategies[{name!r}].calibration_skipped' belongs to version 5 and "
                    f"later of {SITE_METRICS!r}; allowed: the fields of version 4 only"
                )
            row = {**row, "calibration_skipped": None}
        rows[name] = row
    return {**payload, "strategies": rows}


def _site_metrics_v5(payload: Mapping) -> dict:
    """``fedforest/site-metrics`` version 5 -> 6: every site held out validation rows
    (``holdout``: no other mode existed)."""
    return {**payload, "validation": "holdout"}


def _site_schema_v1(payload: Mapping) -> dict:
    """``fedforest/site-schema`` version 1 -> 2: no event-time quantiles (no survival job)."""
    return {**payload, "event_times": []}


def _global_schema_v1(payload: Mapping) -> dict:
    """``fedforest/global-schema`` version 1 -> 2: no time grid (no survival job)."""
    return {**payload, "times": []}


def _site_metrics_v6(payload: Mapping) -> dict:
    """``fedforest/site-metrics`` version 6 -> 7: no survival job, so no survival metrics and
    no row's ``survival_curves``; a version 6 row holding them is refused."""
    per = payload.get("strategies")
    if isinstance(per, Mapping):
        for name, row in per.items():
            if isinstance(row, Mapping) and "survival_curves" in row:
                raise ValueError(
                    f"field 'strategies[{name!r}].survival_curves' belongs to version 7 and "
                    f"later of {SITE_METRICS!r}; allowed: the fields of version 6 only"
                )
    return dict(payload)


def _site_metrics_v7(payload: Mapping) -> dict:
    """``fedforest/site-metrics`` version 7 -> 8: a survival row's one ``calibration`` (at
    the grid's middle time) becomes its only horizon, without a time-dependent AUC there."""
    per = payload.get("strategies")
    if not isinstance(per, Mapping):
        return dict(payload)
    rows = {}
    for name, row in per.items():
        curves = row.get("survival_curves") if isinstance(row, Mapping) else None
        if isinstance(curves, Mapping) and "horizons" in curves:
            raise ValueError(
                f"field 'strategies[{name!r}].survival_curves.horizons' belongs to version 8 "
                f"and later of {SITE_METRICS!r}; allowed: the fields of version 7 only"
            )
        if isinstance(curves, Mapping) and "calibration" in curves:
            curves = dict(curves)
            calibration = curves.pop("calibration")
            at = {**calibration, "td_auc": None} if isinstance(calibration, Mapping) else None
            row = {**row, "survival_curves": {**curves, "horizons": [at]}}
        rows[name] = row
    return {**payload, "strategies": rows}


def _model_v1(payload: Mapping) -> dict:
    """``fedforest/model`` version 1 -> 2: equal pooling weights, no deployment chosen."""
    return {**payload, "deployment": None}


def _model_v2(payload: Mapping) -> dict:
    """``fedforest/model`` version 2 -> 3: no input mapping saved (the file's columns are
    taken as the model's global names, its classes as the model's)."""
    return {**payload, "inputs": None}


def _pooled_forest_v2(payload: Mapping) -> dict:
    """``fedforest/pooled-forest`` version 2 -> 3: classification trees (3 names the task)."""
    return {**payload, "task": "classification"}


#: Readers of older versions: ``(format, version) -> function(payload) -> payload``
#: in the next version's layout.
UPGRADES: dict[tuple[str, int], Callable[[Mapping], dict]] = {
    (POOLED_FOREST, 2): _pooled_forest_v2,
    (SITE_METRICS, 1): _site_metrics_v1,
    (SITE_METRICS, 2): _site_metrics_v2,
    (SITE_METRICS, 3): _site_metrics_v3,
    (SITE_METRICS, 4): _site_metrics_v4,
    (SITE_METRICS, 5): _site_metrics_v5,
    (SITE_METRICS, 6): _site_metrics_v6,
    (SITE_METRICS, 7): _site_metrics_v7,
    (MODEL, 1): _model_v1,
    (SITE_SCHEMA, 1): _site_schema_v1,
    (GLOBAL_SCHEMA, 1): _global_schema_v1,
    (MODEL, 2): _model_v2,
}

# ------------------------------------------------------------------ tasks
SCHEMA = "schema"
VOTE = "vote"
SCORE_MASK = "score_mask"
TRAIN = "train"
EVALUATE = "evaluate"
#: Every task a site serves, in the order of a job.
TASKS = (SCHEMA, VOTE, SCORE_MASK, TRAIN, EVALUATE)

#: Keys of the data each task carries from the server to the sites.
TASK_DATA: dict[str, tuple[str, ...]] = {
    SCHEMA: ("seed", "time_quantiles"),
    VOTE: ("schema", "vote"),
    SCORE_MASK: ("features", "metric"),
    TRAIN: ("elected", "forest", "surrogates", "intersection"),
    EVALUATE: (
        "model",
        "strategies",
        "voting",
        "depth_threshold",
        "metrics",
        "auto_metric",
        "calibration",
        "horizons",
    ),
}

#: Format of each task's reply from a site (``vote`` replies ``{}`` when the
#: election is switched off).
REPLY_FORMAT: dict[str, str] = {
    SCHEMA: SITE_SCHEMA,
    VOTE: SITE_VOTE,
    SCORE_MASK: MASK_SCORE,
    TRAIN: SITE_MODELS,
    EVALUATE: SITE_METRICS,
}

#: The phase (and so the timeout and the timing entry) each task belongs to.
TASK_PHASE: dict[str, str] = {
    SCHEMA: "schema",
    VOTE: "election",
    SCORE_MASK: "election",
    TRAIN: "train",
    EVALUATE: "evaluate",
}

# ------------------------------------------------------------ swarm mode
#: Prefix of the FLARE task names of swarm mode (``job.mode: swarm``); with
#: FLARE's client-controlled workflow the server's tasks are ``<prefix>_config``
#: (configure) and ``<prefix>_report`` (status), and the sites send each other
#: ``<prefix>_share`` (a :data:`SWARM_MESSAGE`).
SWARM_TASK_PREFIX = "fedforest_swarm"
SWARM_CONFIG = f"{SWARM_TASK_PREFIX}_config"
SWARM_SHARE = f"{SWARM_TASK_PREFIX}_share"
SWARM_REPORT = f"{SWARM_TASK_PREFIX}_report"
#: Every task a site serves in swarm mode.
SWARM_TASKS = (SWARM_CONFIG, SWARM_SHARE, SWARM_REPORT)
#: Kinds of swarm message: a site's payload for an exchange, the reason it
#: failed instead, and its receipt of the others' messages.
SWARM_KINDS = ("payload", "failed", "receipt")
#: States a site reports to the server in swarm mode.
SWARM_STATES = ("waiting", "running", "finished", "failed")

# ------------------------------------------------------ message envelope
#: Key of the payload in a FLARE ``Shareable`` (task data and replies).
PAYLOAD = "fedforest_payload"
#: Key of the error message in a failed reply.
ERROR = "fedforest_error"


def task_data(task: str, **values: Any) -> dict:
    """The data of ``task``, checked against :data:`TASK_DATA` (a sender-side guard).

    Examples
    --------
    >>> task_data(SCHEMA, seed=0)
    {'seed': 0}
    """
    if task not in TASK_DATA:
        raise ValueError(f"unknown task {task!r}; tasks are {list(TASKS)}")
    expected = set(TASK_DATA[task])
    if set(values) != expected:
        raise ValueError(f"task {task!r} carries {sorted(expected)}, got {sorted(values)}")
    return {k: values[k] for k in TASK_DATA[task]}


def check_version(fmt: str, version: Any) -> int:
    """Validate a payload's ``version`` for ``fmt``; return it as an int.

    Raises
    ------
    ValueError
        If ``fmt`` is unknown, ``version`` is not a positive integer, or it is
        newer than this installation reads (the message says so by name).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown payload format {fmt!r}; known: {sorted(FORMATS)}")
    if isinstance(version, bool) or not hasattr(version, "__index__"):
        raise ValueError(f"field 'version' is {version!r}, expected a positive integer")
    version = int(version.__index__())
    current = FORMATS[fmt]
    if version < 1:
        raise ValueError(f"field 'version' is {version}, expected a positive integer")
    if version > current:
        raise ValueError(
            f"{fmt!r} version {version} is not supported: this fedforest reads versions 1 "
            f"to {current}; upgrade fedforest at this site"
        )
    return version


def _added_fields(step: Callable[[Mapping], dict]) -> set:
    """The top-level fields an upgrade step adds (what it makes of an empty payload)."""
    try:
        return set(step({}))
    except Exception:  # noqa: BLE001 - a step that needs its fields adds none by itself
        return set()


def upgrade(fmt: str, version: int, payload: Mapping) -> Mapping:
    """Bring a payload of an older ``version`` of ``fmt`` to the current layout.

    A field that a later version added is refused in a payload that declares
    an older version (``version: 1`` with a ``deployment``): its fields must be
    its version's, or the upgrade would silently replace them.
    """
    declared = version
    while version < FORMATS[fmt]:
        step = UPGRADES[(fmt, version)]
        newer = sorted(set(_added_fields(step)) & set(payload))
        if newer:
            raise ValueError(
                f"field {newer[0]!r} belongs to version {version + 1} and later of {fmt!r}, but "
                f"the payload declares version {declared}; allowed: the fields of version "
                f"{declared} only (a payload is written whole by one version)"
            )
        payload = step(payload)
        version += 1
    return payload
