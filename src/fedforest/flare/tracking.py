"""The job's metrics in NVIDIA FLARE's experiment tracking (``job.tracking``).

With ``job.tracking: tensorboard`` or ``mlflow`` the job builder adds FLARE's
own components, the way FLARE's tracking examples wire them:

* every site app: a log writer (FLARE's ``TBWriter`` or ``MLflowWriter``, id
  :data:`LOG_WRITER_ID`) and a ``ConvertToFedEvent`` widget. After the
  ``evaluate`` task the executor writes each metric of each strategy through
  the writer, which fires FLARE's ``analytix_log_stats`` event; the widget
  sends it to the server as ``fed.analytix_log_stats``;
* the server app: the receiver, FLARE's ``TBAnalyticsReceiver`` (event files
  in the server's run folder, ``tb_events/<site or server>/``) or, for MLflow,
  :class:`FedForestMLflowReceiver` (FLARE's ``MLflowReceiver`` plus a run for
  the server's own records). The controller fires the analytics events of
  the election itself (the tuning history step by step, and the outcome):
  FLARE's log writers work in client apps only.

``none`` (the default) adds nothing to the job. What is logged, under which
names and steps, is computed here by plain functions (:func:`site_metric_records`,
:func:`election_records`) that know nothing of FLARE.
"""

from __future__ import annotations

import importlib.util
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..vocabulary import TRACKING
from . import _compat

logger = logging.getLogger(__name__)

#: Component id of the log writer in every site app.
LOG_WRITER_ID = "fedforest_log_writer"
#: Component id of the receiver in the server app.
RECEIVER_ID = "fedforest_tracking_receiver"
#: Component id of the widget that sends a site's analytics events to the server.
FED_EVENTS_ID = "fedforest_analytics_to_server"
#: Folder of the TensorBoard event files in the server's run folder (one subfolder per origin).
TB_FOLDER = "tb_events"
#: The package each receiver needs where the job is built and on the server.
PACKAGES = {"tensorboard": "tensorboard", "mlflow": "mlflow"}


# --------------------------------------------------------------------------- what is logged
@dataclass(frozen=True)
class Record:
    """One scalar for the tracking system: a name, a value, a step."""

    tag: str
    value: float
    step: int = 0


def _number(value: Any) -> float | None:
    """A finite number as a float; None for anything else (an undefined metric)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def site_metric_records(
    site: str, strategies: Mapping[str, Mapping], metrics: Sequence[str]
) -> list[Record]:
    """A site's test metrics: ``<site>/<metric>/<strategy>`` at step 0.

    One record per strategy and requested metric, in the order of
    ``metrics`` then ``strategies``; an undefined metric (``None``, e.g. MCC
    with a single predicted class) is left out.

    Examples
    --------
    >>> site_metric_records("site-2", {"mp": {"auprc": 0.9, "mcc": None, "rows": 50}},
    ...                     ["auprc", "mcc"])
    [Record(tag='site-2/auprc/mp', value=0.9, step=0)]
    """
    records = []
    for metric in metrics:
        for strategy, row in strategies.items():
            value = _number(row.get(metric)) if isinstance(row, Mapping) else None
            if value is not None:
                records.append(Record(f"{site}/{metric}/{strategy}", value))
    return records


def election_records(
    tuning: Mapping | None, election: Mapping | None, metric: str = "auprc"
) -> list[Record]:
    """The election's records: its tuning history, step by step, and its outcome.

    ``tuning`` is ``TuningResult.to_dict()`` (None when the freedom degree was
    not tuned) and ``election`` holds ``freedom_degree`` and ``selected``
    (``ElectionResult.to_dict()``). Step ``i`` of the history gives
    ``election/tuning/freedom_degree``, ``election/tuning/features_kept`` and
    ``election/tuning/validation_<metric>`` at step ``i``; the outcome is
    ``election/freedom_degree`` and ``election/features_kept`` at step 0. A null
    freedom degree (every feature kept: the tuner's candidate) logs no freedom degree.

    Examples
    --------
    >>> tuning = {"history": [{"freedom_degree": 0.5, "kept": 6, "score": 0.8}]}
    >>> [r.tag for r in election_records(tuning, None)]
    ['election/tuning/freedom_degree', 'election/tuning/features_kept', \
'election/tuning/validation_auprc']
    """
    records = []
    for step, entry in enumerate((tuning or {}).get("history", [])):
        for name, key in (
            ("freedom_degree", "freedom_degree"),
            ("features_kept", "kept"),
            (f"validation_{metric}", "score"),
        ):
            value = _number(entry.get(key))
            if value is not None:
                records.append(Record(f"election/tuning/{name}", value, step))
    if election:
        fd = _number(election.get("freedom_degree"))
        if fd is not None:
            records.append(Record("election/freedom_degree", fd))
        records.append(Record("election/features_kept", float(len(election.get("selected", [])))))
    return records


# --------------------------------------------------------------------------- FLARE side
def _syntax(kind: str):
    """FLARE's writer name and data type of a number for ``kind``.

    TensorBoard calls a number a scalar, MLflow a metric; the receivers convert either.
    """
    from nvflare.apis.analytix import AnalyticsDataType, LogWriterName

    if kind == "mlflow":
        return LogWriterName.MLFLOW, AnalyticsDataType.METRIC
    return LogWriterName.TORCH_TB, AnalyticsDataType.SCALAR


def write_records(writer, records: Sequence[Record]) -> None:
    """Log ``records`` through a site's FLARE log writer (``TBWriter`` or ``MLflowWriter``).

    Each record fires one ``analytix_log_stats`` event, which the site's
    ``ConvertToFedEvent`` widget sends to the server's receiver.
    """
    from nvflare.apis.analytix import LogWriterName

    kind = "mlflow" if writer.get_writer_name() == LogWriterName.MLFLOW else "tensorboard"
    data_type = _syntax(kind)[1]
    for record in records:
        writer.write(
            tag=record.tag, value=record.value, data_type=data_type, global_step=record.step
        )


def fire_records(component, fl_ctx, records: Sequence[Record], kind: str) -> None:
    """Fire ``records`` as FLARE analytics events from the server's ``component``.

    FLARE's log writers work in client apps only (they start on an event the
    server never fires), so the server fires the events itself, as FLARE's
    ``AnalyticsSender`` does: one ``analytix_log_stats`` event per record, each
    in a new context; the receiver in the server app takes them as the
    server's records.
    """
    from nvflare.apis.utils.analytix_utils import create_analytic_dxo, send_analytic_dxo

    writer_name, data_type = _syntax(kind)
    engine = fl_ctx.get_engine()
    for record in records:
        dxo = create_analytic_dxo(
            tag=record.tag,
            value=record.value,
            data_type=data_type,
            writer=writer_name,
            global_step=record.step,
        )
        with engine.new_context() as context:
            send_analytic_dxo(component, dxo=dxo, fl_ctx=context)


def find_writer(fl_ctx, writer_id: str, who: str):
    """The log writer component ``writer_id`` of this app, or None (logged) when it is missing."""
    if not writer_id:
        return None
    writer = fl_ctx.get_engine().get_component(writer_id)
    if writer is None or not callable(getattr(writer, "write", None)):
        logger.error(
            "%s: no log writer component %r in this app: metrics are not sent to the "
            "experiment tracking (rebuild the job with `fedforest job build`)",
            who,
            writer_id,
        )
        return None
    return writer


def check_available(kind: str, source: str = "job.yaml") -> None:
    """Refuse a tracking kind whose package is not installed (a :class:`ConfigError`)."""
    if kind not in TRACKING:
        raise ConfigError(
            f"{source}: key 'job.tracking' is {kind!r}; allowed: {', '.join(TRACKING)}"
        )
    package = PACKAGES.get(kind)
    if package is not None and not _installed(package):
        ready = [k for k in TRACKING if k == "none" or _installed(PACKAGES.get(k))]
        raise ConfigError(
            f"{source}: key 'job.tracking' is {kind!r}; allowed: {', '.join(ready)}, or "
            f"{kind} once the {package} package is installed (`pip install {package}`): "
            f"NVIDIA FLARE's {kind} receiver needs it where the job is built and on the server"
        )


def _installed(package: str | None) -> bool:
    return package is not None and importlib.util.find_spec(package) is not None


def server_components(kind: str, job_name: str, source: str = "job.yaml") -> dict:
    """The server's components for ``job.tracking: kind``: ``{component id: component}``.

    The receiver; ``none`` gives nothing.

    Raises
    ------
    ConfigError
        If the receiver's package is not installed (:func:`check_available`).
    """
    check_available(kind, source)
    if kind == "none":
        return {}
    if kind == "tensorboard":
        from nvflare.app_opt.tracking.tb.tb_receiver import TBAnalyticsReceiver

        receiver = TBAnalyticsReceiver(tb_folder=TB_FOLDER)
    else:
        receiver = _mlflow_receiver_class()(kw_args={"experiment_name": job_name})
    return {RECEIVER_ID: receiver}


def site_components(kind: str) -> dict:
    """A site's components for ``kind``: the log writer and the widget sending its events."""
    if kind == "none":
        return {}
    from nvflare.apis.analytix import ANALYTIC_EVENT_TYPE
    from nvflare.app_common.widgets.convert_to_fed_event import ConvertToFedEvent

    return {
        LOG_WRITER_ID: _writer(kind),
        FED_EVENTS_ID: ConvertToFedEvent(events_to_convert=[ANALYTIC_EVENT_TYPE]),
    }


def _writer(kind: str):
    if kind == "tensorboard":
        from nvflare.app_opt.tracking.tb.tb_writer import TBWriter

        return TBWriter()
    from nvflare.app_opt.tracking.mlflow.mlflow_writer import MLflowWriter

    return MLflowWriter()


# --------------------------------------------------------------------------- MLflow
def _mlflow_receiver_class():
    """:class:`FedForestMLflowReceiver`, made on first use (importing it needs mlflow)."""
    cached = globals().get("_MLFLOW_RECEIVER")
    if cached is not None:
        return cached
    from nvflare.apis.analytix import ANALYTIC_EVENT_TYPE
    from nvflare.app_opt.tracking.mlflow.mlflow_receiver import MLflowReceiver

    class FedForestMLflowReceiver(MLflowReceiver):
        """FLARE's ``MLflowReceiver``, plus a run for the server's own records.

        FLARE's receiver opens one MLflow run per client and listens to the
        clients' events only; the election is logged by the server, so this
        receiver also listens to the server's local events and opens a run for
        the server.
        """

        def __init__(
            self,
            tracking_uri=None,
            kw_args=None,
            artifact_location=None,
            events=None,
            buffer_flush_time=1,
        ):
            if events is None:
                events = [ANALYTIC_EVENT_TYPE, "fed." + ANALYTIC_EVENT_TYPE]
            super().__init__(tracking_uri, kw_args, artifact_location, events, buffer_flush_time)

        def initialize(self, fl_ctx):
            super().initialize(fl_ctx)
            server = fl_ctx.get_identity_name()
            if server and not _compat.mlflow_has_run(self, server):
                _compat.mlflow_add_run(self, server, fl_ctx)

    FedForestMLflowReceiver.__module__ = __name__
    FedForestMLflowReceiver.__qualname__ = "FedForestMLflowReceiver"
    globals()["_MLFLOW_RECEIVER"] = FedForestMLflowReceiver
    return FedForestMLflowReceiver


def __getattr__(name: str):
    # FLARE builds components by class path (fedforest.flare.tracking.FedForestMLflowReceiver)
    if name == "FedForestMLflowReceiver":
        return _mlflow_receiver_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
