"""The rules of ``results.json``, field by field: what a job writes, and nothing else.

:meth:`JobResults.from_dict <fedforest.federation.job_results.JobResults.from_dict>`
applies :func:`check_results_fields` to a parsed file before anything reads
it, so that the report, the command line's table and every other reader see
only values of the types and ranges the job writes. A file of the current
layout (with ``format`` and ``version``) holds every field of its mode
(``server``, ``swarm``, or the brief form of a job that could not write
more); the unversioned form of the first releases may leave fields out.

* names (sites, strategies, phases, payload parts): strings of 1 to
  :data:`MAX_NAME` characters without control characters; the reports
  escape them, so a name that holds HTML or Markdown is shown as written;
* free text (the job's error, why a site was dropped, a swarm site's error,
  a sample warning): a string of at most :data:`MAX_TEXT` characters;
* each site's metric rows: exactly what
  :func:`~fedforest.federation.evaluation.read_site_metrics` accepts from a
  site of the matching site-metrics version (:data:`METRICS_VERSION`), for
  the file's ``strategies`` and the metrics its rows report: every score a
  finite number within its range or null, counts whole numbers, no unknown
  or missing key;
* the election, the tuning history, the timings, the payload sizes, the
  privacy policies (:meth:`~fedforest.privacy.policy.PrivacyPolicy.from_dict`),
  the schema (:meth:`~fedforest.federation.schema.GlobalSchema.from_payload`),
  the model summary and the swarm fields: their keys, types and ranges.

Every refusal is a ``ValueError`` naming the file, the field's path, the
value (shortened) and what is allowed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, NoReturn

from .. import protocol
from ..election.ballot import NORMALIZATIONS
from ..errors import PayloadError
from ..model.payload_checks import MAX_CLASSES
from ..validation import describe
from ..vocabulary import (
    AGGREGATIONS,
    METRICS,
    REGRESSION_METRICS,
    SURVIVAL_METRICS,
    VALIDATIONS,
)

#: The longest name (site, strategy, feature, phase, payload part) a results file may hold
#: (a feature name of a site's table is at most 1000 characters).
MAX_NAME = 1000
#: The longest free text (an error, why a site was dropped, a warning).
MAX_TEXT = 100_000
#: The most entries of one list or mapping of a results file.
MAX_ENTRIES = 100_000
#: The site-metrics version whose reader checks the rows of each results version. A file
#: before version 5 is read as site-metrics version 2 rows (version 1 when the site's policy
#: is unknown), whose upgrades fill in what the file's rows may lack (calibration, bins,
#: events, intervals) and keep what they hold; version 5 rows are read as version 5's.
METRICS_VERSION = {1: 2, 2: 2, 3: 2, 4: 2, 5: 5, 6: 6, 7: 7, 8: 8, 9: 8}
#: The results version from which a freedom degree may be null: every feature kept, the
#: tuner's candidate of ``election.tune_every_feature``.
EVERY_FEATURE_VERSION = 9
#: The states a swarm site reports.
SWARM_STATES = protocol.SWARM_STATES
_DIGEST = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def fail(source: str, key: str, value: Any, allowed: str) -> NoReturn:
    raise ValueError(f"{source}: field {key!r} is {describe(value)}; allowed: {allowed}")


def name(source: str, key: str, value: Any) -> str:
    """A name: a string of 1 to :data:`MAX_NAME` characters without control characters."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME or _CONTROL.search(value):
        fail(source, key, value, f"a name of 1 to {MAX_NAME} characters, no control characters")
    return value


def text(source: str, key: str, value: Any, optional: bool = False) -> str | None:
    """Free text of at most :data:`MAX_TEXT` characters (``optional``: or null)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        fail(
            source,
            key,
            value,
            ("null or " if optional else "") + f"a text of at most {MAX_TEXT} characters",
        )
    return value


def mapping(source: str, key: str, value: Any, optional: bool = False) -> dict:
    """A JSON object of at most :data:`MAX_ENTRIES` entries whose keys are names."""
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping) or len(value) > MAX_ENTRIES:
        fail(source, key, value, ("null or " if optional else "") + "a dict of names to values")
    for k in value:
        name(source, f"{key} (a key)", k)
    return dict(value)


def names(source: str, key: str, value: Any) -> list[str]:
    """A list of distinct names."""
    if not isinstance(value, list) or len(value) > MAX_ENTRIES:
        fail(source, key, value, "a list of distinct names")
    out = [name(source, f"{key}[{i}]", v) for i, v in enumerate(value)]
    if len(set(out)) != len(out):
        fail(source, key, value, "a list without duplicates")
    return out


def whole(source: str, key: str, value: Any, lo: int = 0) -> int:
    """A whole number >= ``lo`` (never a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or value > 2**63 - 1:
        fail(source, key, value, f"a whole number in [{lo}, {2**63 - 1}]")
    return value


def number(source: str, key: str, value: Any, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A finite number in ``[lo, hi]`` (never a boolean)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not lo <= value <= hi
    ):
        bounds = (
            f" in [{lo:g}, {hi:g}]"
            if math.isfinite(lo) and math.isfinite(hi)
            else (f" >= {lo:g}" if math.isfinite(lo) else "")
        )
        fail(source, key, value, f"a finite number{bounds}")
    return float(value)


def _keys(source: str, key: str, value: Mapping, allowed, required=()) -> None:
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise ValueError(
            f"{source}: field {key!r} has unknown keys {describe(unknown)}; allowed: "
            f"{', '.join(sorted(allowed))}"
        )
    missing = [k for k in required if k not in value]
    if missing:
        raise ValueError(
            f"{source}: field {key!r} has no {missing[0]!r}; expected "
            f"{', '.join(required)} there (what a job writes)"
        )


# ----------------------------------------------------------------------- the file
#: Fields a reader computes from the rows (version 4 on: checked against them when given).
DERIVED = ("test_events", "sample_warnings")


def required_fields(data: Mapping, version: int | None, fields: dict) -> tuple[str, ...]:
    """The fields a versioned file of this mode must hold (``fields``: the modes' lists)."""
    if version is None:
        return ()
    present = set(data)
    if present == set(fields["brief"]):
        return fields["brief"]
    names_ = fields["swarm"] if data.get("mode") == "swarm" else fields["server"]
    optional = ("model", "validation", *DERIVED)
    return tuple(k for k in names_ if k not in optional)


def check_results_fields(data: Mapping, version: int, source: str) -> dict:
    """Refuse a field of a results file that the job would not write (module docstring).

    ``data`` is the file without ``format`` and ``version``; ``version`` is the file's (1
    for the unversioned form). Returns ``{"metrics": {site: {strategy: row}}}``: the rows
    as the site-metrics reader gives them, in the current layout (a field an older file's
    rows lack is there as its reader's upgrade fills it in).
    """
    if "job" in data:
        name(source, "job", data["job"])
    if "status" in data and data["status"] not in ("finished", "failed"):
        fail(source, "status", data["status"], "finished, failed")
    text(source, "error", data.get("error"), optional=True)
    if data.get("sites") is not None:
        names(source, "sites", data["sites"])
    for site, why in mapping(source, "dropped_sites", data.get("dropped_sites"), True).items():
        text(source, f"dropped_sites.{site}", why)
    for site, lacking in mapping(
        source, "classes_missing", data.get("classes_missing"), True
    ).items():
        _labels(source, f"classes_missing.{site}", lacking)
    strategies = names(source, "strategies", data.get("strategies") or [])
    metrics = mapping(source, "metrics", data.get("metrics"), True)
    test_rows = mapping(source, "test_rows", data.get("test_rows"), True)
    for site, rows in test_rows.items():
        if rows is not None:
            whole(source, f"test_rows.{site}", rows)
    privacy = mapping(source, "privacy", data.get("privacy"), True)
    clean = {
        site: check_site_rows(
            source, site, per, strategies, version, test_rows.get(site), privacy.get(site)
        )
        for site, per in metrics.items()
    }
    policies = {site: _policy(source, site, policy) for site, policy in privacy.items()}
    validation = mapping(source, "validation", data.get("validation"), True)
    for site, mode in validation.items():
        if mode is not None and mode not in VALIDATIONS:
            fail(source, f"validation.{site}", mode, f"null or one of {', '.join(VALIDATIONS)}")
    for site, why in mapping(source, "sample_warnings", data.get("sample_warnings"), True).items():
        text(source, f"sample_warnings.{site}", why)
    if data.get("schema") is not None:
        _schema(source, data["schema"])
    if data.get("election") is not None:
        _election(source, data["election"], version)
    if data.get("tuning") is not None:
        _tuning(source, data["tuning"], version)
    _timings(source, data.get("phase_seconds"))
    for site, sizes in mapping(source, "payload_bytes", data.get("payload_bytes"), True).items():
        for part, size in mapping(source, f"payload_bytes.{site}", sizes).items():
            whole(source, f"payload_bytes.{site}.{part}", size)
    if data.get("model") is not None:
        _model(source, data["model"])
    if data.get("mode") == "swarm":
        _swarm(source, data)
    return {"metrics": clean, "privacy": policies, "validation": dict(validation)}


def _labels(source: str, key: str, value: Any) -> None:
    if not isinstance(value, list) or len(value) > MAX_CLASSES:
        fail(source, key, value, f"a list of at most {MAX_CLASSES} class labels")
    for i, label in enumerate(value):
        if isinstance(label, str):
            name(source, f"{key}[{i}]", label)
        elif isinstance(label, bool) or not isinstance(label, int) or abs(label) > 2**63:
            fail(source, f"{key}[{i}]", label, "a class label: a name or a whole number")


def check_site_rows(
    source: str, site: str, per: Any, strategies, version: int, rows, policy
) -> dict:
    """One site's metric rows, as :func:`read_site_metrics` reads a site's reply of the
    matching version (:data:`METRICS_VERSION`); returns the rows it gives."""
    from .evaluation import read_site_metrics

    key = f"metrics.{site}"
    per = mapping(source, key, per)
    if sorted(per) != sorted(strategies):
        fail(source, key, sorted(per), f"a row for each of the file's strategies {strategies}")
    present = {m for row in per.values() if isinstance(row, Mapping) for m in row}
    scored = [m for m in (*METRICS, *REGRESSION_METRICS, *SURVIVAL_METRICS) if m in present]
    if rows is None:
        first = next((r for r in per.values() if isinstance(r, Mapping)), {})
        rows = first.get("rows")
    sm_version = METRICS_VERSION.get(version, protocol.FORMATS[protocol.SITE_METRICS])
    reply: dict[str, Any] = {
        "format": protocol.SITE_METRICS,
        "version": sm_version,
        "site": site,
        "rows": rows,
        "strategies": per,
    }
    if sm_version > 1:
        if sm_version == 2 and policy is None:
            reply["version"] = 1
        else:
            reply["privacy"] = policy
    try:
        return read_site_metrics(reply, site, list(per), scored)["strategies"]
    except PayloadError as err:
        raise ValueError(f"{source}: {_in_results(key, str(err))}") from None


_ROW = re.compile(r"strategies\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]: (.*)", re.S)


def _in_results(key: str, message: str) -> str:
    """A site-metrics reader's message about a row, with the row's path in the results file
    (``field 'metrics.site-1.mp.auc' is ...``)."""
    import ast

    message = message.split(" refused: ", 1)[-1]
    match = _ROW.fullmatch(message)
    if match is None:
        return f"field {key!r}: {message}"
    strategy, rest = ast.literal_eval(match.group(1)), match.group(2)
    if rest.startswith("field '"):
        field, _, tail = rest[len("field '") :].partition("'")
        return f"field '{key}.{strategy}.{field}'{tail}"
    return f"field '{key}.{strategy}': {rest}"


def _policy(source: str, site: str, policy: Any) -> dict | None:
    """A site's policy as :meth:`PrivacyPolicy.to_dict` writes it (every key), or None."""
    if policy is None:
        return None
    import json

    from ..privacy.policy import PrivacyPolicy

    if not isinstance(policy, Mapping):
        fail(source, f"privacy.{site}", policy, "null or a privacy policy (a dict)")
    try:
        read = PrivacyPolicy.from_dict(dict(policy), source=f"{source}: field 'privacy.{site}'")
    except Exception as err:  # noqa: BLE001 - any malformed policy is named with the file
        raise ValueError(str(err)[:2000]) from None
    return json.loads(json.dumps(read.to_dict()))  # as the file holds it (lists, not tuples)


def _schema(source: str, value: Any) -> None:
    from .schema import GlobalSchema

    try:
        GlobalSchema.from_payload(value)
    except PayloadError as err:
        message = str(err).split(" refused: ", 1)[-1]
        raise ValueError(f"{source}: field 'schema': {message[:2000]}") from None


_ELECTION_KEYS = (
    "selected",
    "stats",
    "freedom_degree",
    "aggregation",
    "normalization",
    "always_keep",
    "votes",
    "intersection",
    "disputed",
    "sites_with",
    "selected_by",
)
_STATS = ("intersection", "union", "disputed", "kept")


def _election(source: str, value: Any, version: int) -> None:
    value = mapping(source, "election", value)
    _keys(source, "election", value, _ELECTION_KEYS, ("selected", "stats", "freedom_degree"))
    names(source, "election.selected", value["selected"])
    stats = mapping(source, "election.stats", value["stats"])
    _keys(source, "election.stats", stats, _STATS, _STATS)
    for k in _STATS:
        whole(source, f"election.stats.{k}", stats[k])
    _freedom_degree(source, "election.freedom_degree", value["freedom_degree"], version)
    if "aggregation" in value and value["aggregation"] not in AGGREGATIONS:
        fail(source, "election.aggregation", value["aggregation"], ", ".join(AGGREGATIONS))
    if "normalization" in value and value["normalization"] not in NORMALIZATIONS:
        fail(source, "election.normalization", value["normalization"], ", ".join(NORMALIZATIONS))
    for k in ("always_keep", "intersection", "disputed"):
        if k in value:
            names(source, f"election.{k}", value[k])
    for f, vote in mapping(source, "election.votes", value.get("votes"), True).items():
        number(source, f"election.votes.{f}", vote)
    for k in ("sites_with", "selected_by"):
        for f, who in mapping(source, f"election.{k}", value.get(k), True).items():
            names(source, f"election.{k}.{f}", who)


def _freedom_degree(source: str, key: str, value: Any, version: int) -> None:
    """A freedom degree in [0, 1]; from :data:`EVERY_FEATURE_VERSION` on, or null: every
    feature kept (the tuner's candidate)."""
    if version < EVERY_FEATURE_VERSION:
        number(source, key, value, 0, 1)
    elif value is not None:
        try:
            number(source, key, value, 0, 1)
        except ValueError:
            fail(source, key, value, "null (every feature kept) or a finite number in [0, 1]")


def _tuning(source: str, value: Any, version: int) -> None:
    value = mapping(source, "tuning", value)
    fields = ("freedom_degree", "score", "kept", "history")
    _keys(source, "tuning", value, fields, fields)
    _freedom_degree(source, "tuning.freedom_degree", value["freedom_degree"], version)
    number(source, "tuning.score", value["score"])
    whole(source, "tuning.kept", value["kept"])
    history = value["history"]
    if not isinstance(history, list) or len(history) > MAX_ENTRIES:
        fail(source, "tuning.history", history, "a list of tuning rounds")
    step = ("freedom_degree", "kept", "score", "reused")
    for i, h in enumerate(history):
        key = f"tuning.history[{i}]"
        h = mapping(source, key, h)
        _keys(source, key, h, step, step[:3])
        _freedom_degree(source, f"{key}.freedom_degree", h["freedom_degree"], version)
        whole(source, f"{key}.kept", h["kept"])
        number(source, f"{key}.score", h["score"])
        if "reused" in h and not isinstance(h["reused"], bool):
            fail(source, f"{key}.reused", h["reused"], "true or false")


def _timings(source: str, value: Any) -> None:
    seconds = mapping(source, "phase_seconds", value, True)
    if seconds and all(isinstance(v, Mapping) for v in seconds.values()):  # per site (swarm)
        for site, per in seconds.items():
            for phase, s in mapping(source, f"phase_seconds.{site}", per).items():
                number(source, f"phase_seconds.{site}.{phase}", s, 0)
        return
    for phase, s in seconds.items():
        number(source, f"phase_seconds.{phase}", s, 0)


def _model(source: str, value: Any) -> None:
    value = mapping(source, "model", value)
    fields = ("trees", "nodes", "features", "owners", "bytes")
    _keys(source, "model", value, (*fields, "site_models"), fields)
    for k in ("trees", "nodes", "bytes"):
        whole(source, f"model.{k}", value[k])
    names(source, "model.features", value["features"])
    names(source, "model.owners", value["owners"])


def _swarm(source: str, data: Mapping) -> None:
    for site, state in mapping(source, "site_states", data.get("site_states"), True).items():
        if state not in SWARM_STATES:
            fail(source, f"site_states.{site}", state, ", ".join(SWARM_STATES))
    for site, error in mapping(source, "site_errors", data.get("site_errors"), True).items():
        text(source, f"site_errors.{site}", error)
    names(source, "metrics_withheld", data.get("metrics_withheld") or [])
    digest = data.get("model_digest")
    if digest is not None and (not isinstance(digest, str) or not _DIGEST.fullmatch(digest)):
        fail(source, "model_digest", digest, "null or a SHA-256 digest (64 lowercase hex digits)")
    for site, d in mapping(source, "model_digests", data.get("model_digests"), True).items():
        if not isinstance(d, str) or not _DIGEST.fullmatch(d):
            fail(source, f"model_digests.{site}", d, "a SHA-256 digest (64 lowercase hex digits)")
    encrypted = mapping(
        source, "peer_messages_encrypted", data.get("peer_messages_encrypted"), True
    )
    for site, flag in encrypted.items():
        if flag is not None and not isinstance(flag, bool):
            fail(source, f"peer_messages_encrypted.{site}", flag, "true, false or null")
