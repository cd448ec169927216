"""A job's results, typed: what ``results.json`` holds and ``report.md`` shows.

:class:`JobResults` is filled by the phase driver
(:class:`~fedforest.federation.driver.JobDriver`, through
:meth:`~fedforest.federation.server.JobServer.results`) in server mode and at
each site in swarm mode, and by
:func:`~fedforest.federation.swarm.swarm_results` for a swarm job's server.
The report (:func:`~fedforest.federation.results.render_report`), the command
line's table (:func:`~fedforest.federation.results.results_table`) and every
other reader read it, never the raw dict.

The file: :meth:`JobResults.to_dict` is ``results.json``; :meth:`JobResults.from_dict`
reads it back. It carries ``format`` (:data:`RESULTS_FORMAT`) and ``version``
(:data:`RESULTS_VERSION`), under the versioning rule of
:mod:`fedforest.protocol`: a change to the fields raises the version, the
reader accepts every version up to the current one, refuses a newer one by
name and refuses unknown fields. The form written before the file had a
version (no ``format``, no ``version``, the same fields otherwise) is read as
version 1.

The schema, election and tuning blocks keep the JSON layout of their own
classes (``GlobalSchema.to_payload``, ``ElectionResult.to_dict``,
``TuningResult.to_dict``); the per-strategy metric rows keep the layout
:func:`~fedforest.federation.evaluation.read_site_metrics` checked.

How sure each site's metrics are: ``test_rows`` and ``test_events`` count each
site's test rows and events (:func:`~fedforest.intervals.event_count`), each
row's ``intervals`` hold bootstrap 95% intervals
(:func:`~fedforest.intervals.bootstrap_intervals`) and ``sample_warnings``
names every site with too few rows or events
(:func:`~fedforest.intervals.sample_warning`). ``test_events`` and
``sample_warnings`` follow from the rows (:attr:`JobResults.test_events`,
:attr:`JobResults.sample_warnings`); the reader checks them against the rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..intervals import check_interval, sample_warning
from ..metrics import METRIC_RANGES
from ..validation import describe
from .results_rules import check_results_fields, required_fields

#: The ``format`` of ``results.json``.
RESULTS_FORMAT = "fedforest/results"
#: The current version of ``results.json`` (1: ``format`` and ``version`` were added;
#: 2: each metric row may carry ``calibration`` and ``bins``, the ``auto`` row
#: ``chosen_calibration`` and ``runner_up``, as site-metrics version 3 reports them;
#: 3: ``model.site_models``, the model each site was sent under
#: ``evaluation.trees_per_site``; a version 2 file reads as every site sent the pooled model;
#: 4: ``test_events`` and ``sample_warnings``, and each metric row's ``events`` and
#: ``intervals``, as site-metrics version 4 reports them; a version 3 file reads as no events
#: counted and no interval computed;
#: 5: each scored metric row's ``calibration_skipped``, as site-metrics version 5 reports it;
#: a version 4 file reads as no calibration method skipped;
#: 6: ``validation``, each site's validation mode, as site-metrics version 6 reports it; a
#: version 5 file reads as every site with metrics holding out validation rows;
#: 7: a survival job's rows hold the survival metrics, as site-metrics version 7 reports them,
#: and the schema may carry a time grid; a version 6 file has neither;
#: 8: a survival row's time-dependent AUC and calibration at each horizon, as site-metrics
#: version 8 reports them; a version 7 row's one calibration reads as its only horizon;
#: 9: the election's, the tuning's and a tuning step's ``freedom_degree`` may be null, every
#: feature kept (``election.tune_every_feature``); a version 8 file's are numbers).
RESULTS_VERSION = 9
#: The version that added ``validation``.
VALIDATION_VERSION = 6
#: The status of a job.
STATUSES = ("finished", "failed")

#: The fields of a server-mode ``results.json``, in file order (``model`` only with a model).
SERVER_FIELDS = (
    "job",
    "status",
    "error",
    "sites",
    "dropped_sites",
    "classes_missing",
    "strategies",
    "metrics",
    "test_rows",
    "test_events",
    "sample_warnings",
    "schema",
    "election",
    "tuning",
    "phase_seconds",
    "payload_bytes",
    "privacy",
    "validation",
    "model",
)
#: The fields of a swarm job's ``results.json`` (the server's), in file order.
SWARM_FIELDS = (
    "job",
    "mode",
    "status",
    "error",
    "sites",
    "site_states",
    "site_errors",
    "dropped_sites",
    "classes_missing",
    "strategies",
    "metrics",
    "test_rows",
    "test_events",
    "sample_warnings",
    "metrics_withheld",
    "model_digest",
    "model_digests",
    "phase_seconds",
    "privacy",
    "validation",
    "peer_messages_encrypted",
)
#: The fields of the brief ``results.json`` written when even the partial results fail.
BRIEF_FIELDS = ("job", "status", "error", "dropped_sites")
_KNOWN = {"format", "version", *SERVER_FIELDS, *SWARM_FIELDS}


@dataclass
class ModelSummary:
    """The pooled model in a few numbers (``results.json``'s ``model``)."""

    trees: int
    nodes: int
    features: list[str]
    owners: list[str]
    bytes: int
    #: ``{site: {"trees": n, "bytes": b}}`` of the model each site was sent, when the sites
    #: got models of their own (``evaluation.trees_per_site``); empty otherwise.
    site_models: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "trees": self.trees,
            "nodes": self.nodes,
            "features": list(self.features),
            "owners": list(self.owners),
            "bytes": self.bytes,
        }
        if self.site_models:  # only when the sites got models of their own
            out["site_models"] = {s: dict(v) for s, v in self.site_models.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping, source: str = "results") -> ModelSummary:
        data = _mapping(data, f"{source}: field 'model'")
        try:
            return cls(
                trees=data["trees"],
                nodes=data["nodes"],
                features=list(data["features"]),
                owners=list(data["owners"]),
                bytes=data["bytes"],
                site_models=_site_models(data.get("site_models"), source),
            )
        except KeyError as err:
            raise ValueError(f"{source}: field 'model' has no {err.args[0]!r}") from None


def _site_models(value: Any, source: str) -> dict[str, dict[str, int]]:
    """``model.site_models`` of a results file (absent: every site got the pooled model)."""
    if value is None:
        return {}
    value = _mapping(value, f"{source}: field 'model.site_models'")
    out = {}
    for site, sizes in value.items():
        sizes = _mapping(sizes, f"{source}: field 'model.site_models.{site}'")
        if set(sizes) != {"trees", "bytes"} or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sizes.values()
        ):
            raise ValueError(
                f"{source}: field 'model.site_models.{site}' is {describe(dict(sizes))}; allowed: "
                "trees and bytes, whole numbers >= 0"
            )
        out[str(site)] = {"trees": sizes["trees"], "bytes": sizes["bytes"]}
    return out


@dataclass
class SwarmSummary:
    """What only a swarm job's results (the server's) hold."""

    #: ``{site: state}`` (``protocol.SWARM_STATES``) of every site of the job.
    site_states: dict[str, str] = field(default_factory=dict)
    #: ``{site: error}`` of every site that did not finish.
    site_errors: dict[str, str] = field(default_factory=dict)
    #: The finished sites that kept their metrics (``report_metrics: false``).
    metrics_withheld: list[str] = field(default_factory=list)
    #: The pooled model's SHA-256 when every finished site pooled the same model.
    model_digest: str | None = None
    #: ``{site: digest}`` when the finished sites pooled different models, else empty.
    model_digests: dict[str, str] = field(default_factory=dict)
    #: ``{site: whether its peer messages are encrypted end to end}`` (``None``: unknown).
    peer_messages_encrypted: dict[str, bool | None] = field(default_factory=dict)


@dataclass
class JobResults:
    """A job's results (module docstring).

    ``metrics`` is ``{site: {strategy: row}}`` with each row as
    :func:`~fedforest.federation.evaluation.read_site_metrics` checked it;
    ``phase_seconds`` is ``{phase: seconds}`` in server mode and ``{site:
    {phase: seconds}}`` for a swarm job's server (:attr:`swarm` set).
    """

    job: str
    status: str = "finished"
    error: str | None = None
    sites: list[str] = field(default_factory=list)
    dropped_sites: dict[str, str] = field(default_factory=dict)
    classes_missing: dict[str, list] = field(default_factory=dict)
    strategies: list[str] = field(default_factory=list)
    metrics: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    test_rows: dict[str, int | None] = field(default_factory=dict)
    schema: dict | None = None
    election: dict | None = None
    tuning: dict | None = None
    phase_seconds: dict[str, Any] = field(default_factory=dict)
    payload_bytes: dict[str, dict[str, int]] = field(default_factory=dict)
    privacy: dict[str, dict | None] = field(default_factory=dict)
    #: ``{site: "oob" or "holdout"}``: what each site with metrics scored its choices on
    #: (``None``: the site did not report it).
    validation: dict[str, str | None] = field(default_factory=dict)
    model: ModelSummary | None = None
    swarm: SwarmSummary | None = None
    #: The version of the file these results were read from (:meth:`from_dict`; ``None``:
    #: built in memory). Its metric rows are in the current layout whatever the version; a
    #: reader that says what an older file did not record asks this.
    read_version: int | None = field(default=None, compare=False)

    @property
    def mode(self) -> str:
        """``swarm`` for a swarm job's server results, else ``server``."""
        return "swarm" if self.swarm is not None else "server"

    @property
    def finished(self) -> bool:
        return self.status == "finished"

    @property
    def test_events(self) -> dict[str, int | None]:
        """``{site: events}`` of the sites with metrics: the ``events`` their rows report
        (``None``: regression, or a site-metrics reply before version 4)."""
        out = {}
        for site, per in self.metrics.items():
            rows = (
                [r for r in per.values() if isinstance(r, Mapping)]
                if isinstance(per, Mapping)
                else []
            )
            out[site] = next((r["events"] for r in rows if r.get("events") is not None), None)
        return out

    @property
    def sample_warnings(self) -> dict[str, str]:
        """``{site: why its metrics are unreliable}`` for every site with fewer test rows or
        events than :func:`~fedforest.intervals.sample_warning` asks for."""
        events = self.test_events
        out = {}
        for site, rows in self.test_rows.items():
            text = sample_warning(rows, events.get(site))
            if text is not None:
                out[site] = text
        return out

    # ------------------------------------------------------------------ writing
    def to_dict(self) -> dict[str, Any]:
        """``results.json``: ``format``, ``version``, then the fields of the mode in file order."""
        values: dict[str, Any] = {
            "job": self.job,
            "status": self.status,
            "error": self.error,
            "sites": self.sites,
            "dropped_sites": self.dropped_sites,
            "classes_missing": self.classes_missing,
            "strategies": self.strategies,
            "metrics": self.metrics,
            "test_rows": self.test_rows,
            "test_events": self.test_events,
            "sample_warnings": self.sample_warnings,
            "schema": self.schema,
            "election": self.election,
            "tuning": self.tuning,
            "phase_seconds": self.phase_seconds,
            "payload_bytes": self.payload_bytes,
            "privacy": self.privacy,
        }
        if self.validation:
            values["validation"] = self.validation
        if self.swarm is not None:
            swarm = self.swarm
            values.update(
                mode="swarm",
                site_states=swarm.site_states,
                site_errors=swarm.site_errors,
                metrics_withheld=swarm.metrics_withheld,
                model_digest=swarm.model_digest,
                model_digests=swarm.model_digests,
                peer_messages_encrypted=swarm.peer_messages_encrypted,
            )
            names = SWARM_FIELDS
        else:
            names = SERVER_FIELDS
            if self.model is not None:
                values["model"] = self.model.to_dict()
        return {**_head(), **{k: values[k] for k in names if k in values}}

    def brief_dict(self) -> dict[str, Any]:
        """The brief ``results.json`` (:data:`BRIEF_FIELDS`): job, status, error, dropped sites."""
        return {
            **_head(),
            "job": self.job,
            "status": self.status,
            "error": self.error,
            "dropped_sites": dict(self.dropped_sites),
        }

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_dict(cls, data: Any, source: str = "results") -> JobResults:
        """Read ``results.json`` (any version up to :data:`RESULTS_VERSION`, or the unversioned form).

        Parameters
        ----------
        data : mapping
            The parsed file.
        source : str
            Where it comes from, for messages (e.g. the file's path).

        Raises
        ------
        ValueError
            If it is not a results dict, has another ``format``, a newer or
            malformed ``version``, an unknown field, or no ``job``; the
            message names ``source`` and the field.
        """
        data = dict(_mapping(data, source))
        fmt, version = data.pop("format", None), data.pop("version", None)
        if fmt is not None or version is not None:
            if fmt != RESULTS_FORMAT:
                raise ValueError(
                    f"{source}: field 'format' is {describe(fmt)}, expected {RESULTS_FORMAT!r}"
                )
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                raise ValueError(
                    f"{source}: field 'version' is {describe(version)}, expected an integer >= 1"
                )
            if version > RESULTS_VERSION:
                raise ValueError(
                    f"{source}: {RESULTS_FORMAT!r} version {version} is not supported: this "
                    f"fedforest reads versions 1 to {RESULTS_VERSION}; upgrade fedforest"
                )
        unknown = sorted(set(data) - _KNOWN)
        if unknown:
            raise ValueError(
                f"{source}: unknown fields {describe(unknown)}; allowed: the fields a job writes, "
                f"{', '.join(sorted(_KNOWN))}"
            )
        if not isinstance(data.get("job"), str):
            raise ValueError(
                f"{source}: field 'job' is {describe(data.get('job'))}, expected the job's name"
            )
        modes = {"server": SERVER_FIELDS, "swarm": SWARM_FIELDS, "brief": BRIEF_FIELDS}
        missing = [k for k in required_fields(data, version, modes) if k not in data]
        if missing:
            raise ValueError(
                f"{source}: field {missing[0]!r} is missing; a results file of version "
                f"{version} holds every field its job writes"
            )
        # types and ranges, field by field; the rows come back in the current layout
        checked = check_results_fields(data, version or 1, source)
        swarm = None
        if data.get("mode") == "swarm":
            swarm = SwarmSummary(
                site_states=dict(data.get("site_states") or {}),
                site_errors=dict(data.get("site_errors") or {}),
                metrics_withheld=list(data.get("metrics_withheld") or []),
                model_digest=data.get("model_digest"),
                model_digests=dict(data.get("model_digests") or {}),
                peer_messages_encrypted=dict(data.get("peer_messages_encrypted") or {}),
            )
        elif data.get("mode") not in (None, "server"):
            raise ValueError(
                f"{source}: field 'mode' is {describe(data['mode'])}; allowed: server, swarm"
            )
        model = data.get("model")
        test_rows = _test_rows(data.get("test_rows"), source)
        metrics = checked["metrics"]
        _check_counts_and_intervals(metrics, test_rows, source)
        results = cls(
            job=data["job"],
            status=data.get("status", "failed"),
            error=data.get("error"),
            sites=list(data.get("sites") or []),
            dropped_sites=dict(data.get("dropped_sites") or {}),
            classes_missing=dict(data.get("classes_missing") or {}),
            strategies=list(data.get("strategies") or []),
            metrics=metrics,
            test_rows=test_rows,
            schema=data.get("schema"),
            election=data.get("election"),
            tuning=data.get("tuning"),
            phase_seconds=dict(data.get("phase_seconds") or {}),
            payload_bytes=dict(data.get("payload_bytes") or {}),
            privacy=checked["privacy"],
            validation=_validation(data, checked, version or 1, metrics),
            model=None if model is None else ModelSummary.from_dict(model, source),
            swarm=swarm,
            read_version=version or 1,
        )
        _check_derived(data, results, source)
        return results


def as_results(results: JobResults | Mapping) -> JobResults:
    """``results`` as :class:`JobResults` (a dict is read with :meth:`JobResults.from_dict`)."""
    return results if isinstance(results, JobResults) else JobResults.from_dict(results)


def _test_rows(value: Any, source: str) -> dict[str, int | None]:
    """``test_rows``: ``{site: whole number >= 0 or null}``."""
    out = {}
    for site, rows in _mapping(value or {}, f"{source}: field 'test_rows'").items():
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
            raise ValueError(
                f"{source}: field 'test_rows.{site}' is {describe(rows)}; allowed: a whole number >= 0 "
                "or null"
            )
        out[str(site)] = rows
    return out


def _check_counts_and_intervals(metrics: Mapping, test_rows: Mapping, source: str) -> None:
    """Each metric row's ``events`` (at most the site's test rows) and ``intervals`` (each
    ``[low, high]`` holding its point, :func:`~fedforest.intervals.check_interval`)."""
    for site, per in metrics.items():
        if not isinstance(per, Mapping):
            continue  # the report refuses it, naming the site
        for strategy, row in per.items():
            if not isinstance(row, Mapping):
                continue
            where = f"{source}: field 'metrics.{site}.{strategy}"
            events, rows = row.get("events"), test_rows.get(site)
            if events is not None and (
                isinstance(events, bool)
                or not isinstance(events, int)
                or events < 0
                or (rows is not None and events > rows)
            ):
                limit = f" and at most the site's {rows} test rows" if rows is not None else ""
                raise ValueError(
                    f"{where}.events' is {describe(events)}; allowed: null or a whole number >= 0{limit}"
                )
            intervals = row.get("intervals")
            if intervals is None:
                continue
            if not isinstance(intervals, Mapping):
                raise ValueError(
                    f"{where}.intervals' is {describe(intervals)}; allowed: null or a dict of "
                    "[low, high] per metric"
                )
            for metric, interval in intervals.items():
                if metric not in METRIC_RANGES:
                    raise ValueError(
                        f"{where}.intervals' names {describe(metric)}; allowed: {sorted(METRIC_RANGES)}"
                    )
                point = row.get(metric)
                if point is not None and (
                    isinstance(point, bool)
                    or not isinstance(point, (int, float))
                    or not math.isfinite(point)
                ):
                    raise ValueError(
                        f"{where}.{metric}' is {describe(point)}; expected a number or null"
                    )
                problem = check_interval(metric, point, interval)
                if problem:
                    raise ValueError(f"{where}.intervals.{metric}': {problem}")


def _check_derived(data: Mapping, results: JobResults, source: str) -> None:
    """``test_events`` of a file must be what its rows say, and ``sample_warnings`` name the
    sites the counts say (the texts are written anew from the counts)."""
    for key in ("test_events", "sample_warnings"):
        if key not in data:
            continue  # before version 4
        stored = dict(_mapping(data[key], f"{source}: field {key!r}"))
        expected = getattr(results, key)
        if key == "sample_warnings":
            bad = [s for s, v in stored.items() if not isinstance(v, str)]
            if bad:
                raise ValueError(
                    f"{source}: field 'sample_warnings.{bad[0]}' is {describe(stored[bad[0]])}; "
                    "expected the warning's text"
                )
            stored = {s: expected.get(s, v) for s, v in stored.items()}
        if stored != expected:
            wrong = sorted(
                str(s) for s in set(stored) | set(expected) if stored.get(s) != expected.get(s)
            )
            raise ValueError(
                f"{source}: field {key!r} does not match the metric rows at "
                f"{', '.join(map(repr, wrong))}; expected what the rows say: "
                f"{ {s: expected.get(s) for s in wrong}!r}"
            )


def _head() -> dict[str, Any]:
    return {"format": RESULTS_FORMAT, "version": RESULTS_VERSION}


def _mapping(value: Any, where: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a dict, got {type(value).__name__}")
    return value


def _validation(data: Mapping, checked: Mapping, version: int, metrics: Mapping) -> dict:
    """``{site: mode}`` of a results file: its ``validation`` field, or for a file before
    :data:`VALIDATION_VERSION` ``holdout`` for every site with metrics (the only mode then);
    a later file without the field reported none."""
    if "validation" in data:
        return dict(checked["validation"])
    return dict.fromkeys(metrics, "holdout") if version < VALIDATION_VERSION else {}
