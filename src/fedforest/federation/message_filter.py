"""What a site's privacy filter lets leave, message by message, without FLARE.

:func:`filter_payload` takes a policy and a payload a site is about to send,
reads the payload with the registry's reader for its format
(:func:`~fedforest.federation.messages.read_message`: the same reader the
server and the other swarm sites apply to it), and applies the checks and
transforms of :mod:`fedforest.privacy.outgoing` that the message calls for.
It returns the payload that may leave and what was changed (the lines of the
site's log), or raises :class:`~fedforest.privacy.outgoing.Refusal` with the
reason. :mod:`fedforest.flare.privacy_filter` is its FLARE adapter.

(k is ``min_leaf_rows``.)

=========================  ==========================================================
payload                    what leaves
=========================  ==========================================================
``fedforest/site-models``  read as the server reads it; rewritten from its parts by
(train)                    :func:`~fedforest.privacy.outgoing.tighten_models`
``fedforest/site-schema``  read; passed unchanged when it is the sender's (rare levels
(schema)                   need the rows: only the site can hide them), its event-time
                           quantiles rounded to multiples of ``time_resolution``
``fedforest/site-vote``    read; refused when computed on fewer than k rows or, in DP
(vote)                     mode, when it is not the ``none`` selector's; ``{}``
                           (election off) passes
``fedforest/mask-score``   read; refused when computed on fewer than k rows or, in DP
(score_mask)               mode, when the score is not ``DP_MASK_SCORE``
``fedforest/site-metrics`` read against the strategies and metrics it holds; refused
(evaluate)                 when the test rows, overall or of one strategy, are fewer
                           than k; its ``privacy`` tightened with what the filter
                           enforced (:func:`~fedforest.privacy.outgoing.reported_policy`)
``fedforest/swarm-status`` read as the server reads it; its metrics as a metrics reply,
(swarm status task)        withheld (``metrics`` null, ``metrics_withheld`` true) where
                           that reply would be refused: the status is how the server
                           knows the site is alive
=========================  ==========================================================

Anything else is refused: a payload that is not a dict, an unknown format, a
format that is not the task's reply, a payload its reader refuses. Swarm
acknowledgements carry no payload (:func:`acknowledgement`). A payload that
passes unchanged leaves as the very object the site wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from .. import protocol
from ..errors import PayloadError, SchemaError
from ..model.payload_checks import MAX_FEATURES
from ..privacy.outgoing import (
    Refusal,
    check_mask_score,
    check_rows,
    check_vote,
    reported_policy,
    tighten_models,
)
from ..privacy.policy import PrivacyPolicy
from .messages import MAX_REASON, SiteModelsReply, read_message
from .time_grid import round_times

#: The payload format each task's reply carries (swarm mode's status task included).
REPLY_FORMATS: dict[str, str] = {
    **protocol.REPLY_FORMAT,
    protocol.SWARM_REPORT: protocol.SWARM_STATUS,
}
#: Swarm tasks a site answers with an acknowledgement only (no payload).
SWARM_ACKS = (protocol.SWARM_CONFIG, protocol.SWARM_SHARE)
#: The longest reader's message quoted in a refusal.
MAX_QUOTED = 400


def filter_payload(
    policy: PrivacyPolicy, payload: Any, sender: str | None = None, task: str | None = None
) -> tuple[Any, list[str]]:
    """The payload that may leave under ``policy`` and the notes of what changed.

    Parameters
    ----------
    policy : PrivacyPolicy
        The filter's policy.
    payload : Any
        What the site is about to send.
    sender : str, optional
        The sending site: a payload that names another site is refused.
    task : str, optional
        The task it answers (:data:`REPLY_FORMATS` gives the format expected).

    Raises
    ------
    fedforest.privacy.outgoing.Refusal
        The reason nothing of the payload may leave (it names no value of the payload).
    """
    if not isinstance(payload, dict):
        raise Refusal(
            f"the payload is a {type(payload).__name__}, not a fedforest payload (a dict "
            "with a 'format')"
        )
    if not payload and task == protocol.VOTE:
        return payload, []  # the election is off: the site votes nothing
    fmt = payload.get("format")
    rule = _RULES.get(fmt) if isinstance(fmt, str) else None
    if rule is None:
        known = ", ".join(sorted(_RULES))
        shown = repr(fmt) if isinstance(fmt, str) and len(fmt) <= 80 else type(fmt).__name__
        raise Refusal(
            f"not a fedforest reply (format {shown}); the filter lets through {known} only"
        )
    expected = REPLY_FORMATS.get(task) if task is not None else None
    if expected is not None and fmt != expected:
        raise Refusal(f"the {task!r} task replies {expected!r}, but the payload is {fmt!r}")
    notes: list[str] = []
    try:
        out = rule(policy, payload, sender, notes)
    except (PayloadError, SchemaError) as err:
        raise Refusal(f"the payload is not a valid {fmt!r} payload ({_short(err)})") from None
    return out, notes


def acknowledgement(task: str, fields: Iterable[str], error: Any) -> str | None:
    """The refusal text a swarm acknowledgement may carry, cut to
    :data:`~fedforest.federation.messages.MAX_REASON`.

    A swarm site answers the server's configuration and a peer's message
    (:data:`SWARM_ACKS`) with nothing but an acknowledgement: ``fields`` (what the reply
    carries besides its headers and its error text) must be empty, and ``error`` (the
    reason it refused a peer's message) ``None`` or a text.
    """
    extra = sorted(str(f) for f in fields)
    if extra:
        raise Refusal(
            f"the {task!r} reply carries {extra}; a swarm site answers it with nothing but an "
            "acknowledgement"
        )
    if error is None:
        return None
    if not isinstance(error, str):
        raise Refusal(
            f"the {task!r} reply's {protocol.ERROR!r} is a {type(error).__name__}, not a text"
        )
    return error[:MAX_REASON]


# ================================================================ per message
def _check_site(found: str, sender: str | None) -> None:
    if sender is not None and found != sender:
        raise Refusal(f"the payload says it is from site {found!r}, but this is {sender!r}")


def _schema(policy, payload, sender, notes):
    """A schema reply: passed as the site wrote it, its event-time quantiles rounded to
    multiples of ``privacy.time_resolution`` when they are not."""
    schema = read_message(payload, sender, protocol.SITE_SCHEMA)
    _check_site(schema.site, sender)
    resolution = policy.time_resolution
    if resolution is None or not schema.event_times:
        return payload
    rounded = sorted({float(t) for t in round_times(schema.event_times, resolution) if t >= 0})
    if rounded == sorted(schema.event_times):
        return payload
    notes.append(
        f"{len(schema.event_times)} event-time quantile(s) rounded to multiples of "
        f"privacy.time_resolution {resolution:g} ({len(rounded)} distinct)"
    )
    return replace(schema, event_times=rounded).to_payload()


def _vote(policy, payload, sender, notes):
    # a vote names its features by their indices into the global feature list, which a
    # filter does not have: any index the format allows is read as a feature
    by_index = "feature_index" in payload
    features = [f"feature {i}" for i in range(MAX_FEATURES)] if by_index else None
    vote = read_message(payload, sender, protocol.SITE_VOTE, features=features)
    _check_site(vote.site, sender)
    check_vote(policy, vote.n_rows, vote.mask, vote.scores)
    return payload


def _mask_score(policy, payload, sender, notes):
    score = read_message(payload, sender, protocol.MASK_SCORE)
    check_mask_score(policy, score.score, score.n_rows)
    return payload


def _metrics(policy, payload, sender, notes):
    # without a sender the reply is read as from the site it names
    who = sender if sender is not None else payload.get("site")
    return _tighten_metrics(
        policy, payload, read_message(payload, who, protocol.SITE_METRICS), notes
    )


def _tighten_metrics(policy, payload, read, notes):
    """A metrics reply (``payload``, as read: ``read``): refused under k test rows; its
    ``privacy`` tightened, everything else left as the site wrote it."""
    check_rows(policy, read["rows"], "the evaluation (test rows)")
    for name, row in read["strategies"].items():
        check_rows(policy, row["rows"], f"the metrics of strategy {name!r}")
    tightened = reported_policy(policy, read["privacy"])
    if read["privacy"] != tightened:
        notes.append("reported privacy policy tightened with the filter's")
    return {**payload, "privacy": tightened}


def _swarm_status(policy, payload, sender, notes):
    """A swarm site's status; metrics the filter would refuse are withheld, never the
    status (state, phase, errors, participants, digest and timings are no data)."""
    status = read_message(payload, sender, protocol.SWARM_STATUS)
    if status["metrics"] is None:
        return payload
    try:
        metrics = _tighten_metrics(policy, payload["metrics"], status["metrics"], notes)
    except Refusal as why:
        notes.append(f"test metrics withheld from the status: {why}")
        return {**payload, "metrics": None, "metrics_withheld": True}
    return {**payload, "metrics": metrics}


def _site_models(policy, payload, sender, notes):
    """A training reply: read as the server reads it, rewritten from its tightened parts."""
    reply = read_message(payload, sender, protocol.SITE_MODELS)
    forest, imputers, std, inter = tighten_models(
        policy, reply.forest, reply.imputers, reply.feature_std, reply.intersection, notes
    )
    return SiteModelsReply(forest, imputers, std, reply.n_rows, inter).to_payload()


_RULES: dict[str, Callable[[PrivacyPolicy, dict, str | None, list[str]], Any]] = {
    protocol.SITE_SCHEMA: _schema,
    protocol.SITE_VOTE: _vote,
    protocol.MASK_SCORE: _mask_score,
    protocol.SITE_MODELS: _site_models,
    protocol.SITE_METRICS: _metrics,
    protocol.SWARM_STATUS: _swarm_status,
}


def _short(err: Exception, limit: int = MAX_QUOTED) -> str:
    text = str(err)
    return text if len(text) <= limit else text[: limit - 3] + "..."
