"""Every wire message of a job, its type and its one reader.

:data:`MESSAGES` maps each payload format of :data:`fedforest.protocol.FORMATS`
to a :class:`Message`: the class a received payload is read into and the
reader that validates it. Whoever receives a payload (the server's rules, a
swarm site's mailbox, a site reading the server's task data, a privacy
filter) reads it with :func:`read_message` and uses only what it returns:

    every incoming payload is read once, by the registry's reader for its
    format, before any of it is used.

A reader raises :class:`~fedforest.errors.PayloadError` (a schema reader also
:class:`~fedforest.errors.SchemaError`) naming the sender, the field, the bad
value and what is allowed; it refuses a newer version by name and upgrades an
older one (:func:`fedforest.protocol.upgrade`). Some readers take context
that the payload alone does not give (the global feature list a vote's
indices point into, the strategies and metrics a job asked for); without it
they read the payload as it describes itself, as a site's own privacy filter
does.

The readers of formats that have a class elsewhere stay with that class
(:class:`~fedforest.federation.schema.SiteSchema`,
:class:`~fedforest.election.ballot.SiteVote`,
:func:`~fedforest.federation.evaluation.read_site_metrics`,
:meth:`~fedforest.model.pooled_model.PooledModel.from_payload`, ...); the messages that have no
other home are defined here: :class:`MaskScore`, :class:`SiteModelsReply`,
:class:`SwarmMessage` and :class:`SwarmStatus`.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from .. import protocol
from ..election.ballot import SiteVote
from ..errors import PayloadError
from ..model.forest import PooledForest
from ..model.imputers import ImputerSet
from ..model.model_files import read_feature_std
from ..model.payload_checks import MAX_ROWS
from ..model.pooled_model import PooledModel
from ..validation import PayloadReader, describe
from .agreement import RECEIPT_KINDS
from .evaluation import SiteMetrics, read_site_metrics
from .schema import GlobalSchema, SiteSchema

#: Longest error text a site may send as the reason it failed (a longer one is cut).
MAX_REASON = 2000
#: Longest exchange key of a swarm message (``schema``, ``vote``, ``score-3-…``, ``train``).
MAX_KEY = 80
#: Fields of a :data:`~fedforest.protocol.SITE_MODELS` payload besides ``format`` and ``version``.
SITE_MODEL_FIELDS = frozenset({"forest", "imputers", "feature_std", "n_rows", "intersection"})
#: Fields of a :data:`~fedforest.protocol.SWARM_MESSAGE` besides ``format`` and ``version``.
SWARM_MESSAGE_FIELDS = frozenset({"kind", "key", "job", "view", "body"})
#: The fields of a :data:`~fedforest.protocol.SWARM_STATUS` besides ``format`` and ``version``.
STATUS_FIELDS = frozenset(
    {
        "site",
        "state",
        "phase",
        "error",
        "participants",
        "dropped",
        "model_digest",
        "phase_seconds",
        "metrics",
        "metrics_withheld",
        "encrypted",
    }
)


# ====================================================================== mask score
@dataclass(frozen=True)
class MaskScore:
    """A site's score of a proposed mask (:data:`~fedforest.protocol.MASK_SCORE`).

    Parameters
    ----------
    score : float
        The mask's score on the site's validation rows (finite).
    n_rows : int
        The validation rows it was computed on (its weight when the scores are pooled).

    Examples
    --------
    >>> MaskScore(0.75, 40).to_payload()["score"]
    0.75
    >>> MaskScore.from_payload(MaskScore(0.75, 40).to_payload(), "site-1").n_rows
    40
    """

    score: float
    n_rows: int

    def to_payload(self) -> dict:
        return {
            "format": protocol.MASK_SCORE,
            "version": protocol.FORMATS[protocol.MASK_SCORE],
            "score": float(self.score),
            "n_rows": int(self.n_rows),
        }

    @classmethod
    def from_payload(cls, payload: Any, sender: str | None = None) -> MaskScore:
        """Read a mask score: ``score`` a finite number, ``n_rows`` an integer in
        [1, ``MAX_ROWS``]."""
        r = PayloadReader(payload, protocol.MASK_SCORE, sender)
        r.check_keys({"score", "n_rows"})
        return cls(r.read_number("score"), r.read_integer("n_rows", 1, MAX_ROWS))


# ============================================================ a site's training reply
@dataclass(frozen=True)
class SiteModelsReply:
    """A site's training reply (:data:`~fedforest.protocol.SITE_MODELS`).

    Parameters
    ----------
    forest : PooledForest
        The site's trees (with their surrogate splits).
    imputers : ImputerSet
        Its imputers (empty when withheld).
    feature_std : dict of str to float
        The standard deviation of each numeric column (empty when withheld).
    n_rows : int
        Its training rows.
    intersection : PooledForest or None
        Its intersection forest, when asked for and shared.
    """

    forest: PooledForest
    imputers: ImputerSet
    feature_std: dict[str, float]
    n_rows: int
    intersection: PooledForest | None = None

    def to_payload(self) -> dict:
        out = {
            "format": protocol.SITE_MODELS,
            "version": protocol.FORMATS[protocol.SITE_MODELS],
            "forest": self.forest.to_payload(),
            "imputers": self.imputers.to_payload(),
            "feature_std": self.feature_std,
            "n_rows": int(self.n_rows),
        }
        if self.intersection is not None:
            out["intersection"] = self.intersection.to_payload()
        return out

    @classmethod
    def from_payload(cls, payload: Any, sender: str | None = None) -> SiteModelsReply:
        """Read a training reply: every part by its own reader, with its place in the
        message (``forest``, ``imputers``, ``intersection``); ``feature_std`` as a model's;
        ``n_rows`` an integer in [1, ``MAX_ROWS``]. The checks against the schema and the
        election are the server's (:meth:`~fedforest.federation.server.JobServer.pool`)."""
        r = PayloadReader(payload, protocol.SITE_MODELS, sender)
        r.check_keys(SITE_MODEL_FIELDS)
        forest = PooledForest.from_payload(r.get("forest"), sender=sender, where="forest")
        imputers = ImputerSet.from_payload(r.get("imputers"), sender=sender, where="imputers")
        std = read_feature_std(r)
        n_rows = r.read_integer("n_rows", 1, MAX_ROWS)
        inter = r.get("intersection", None)
        if inter is not None:
            inter = PooledForest.from_payload(inter, sender=sender, where="intersection")
        return cls(forest, imputers, std, n_rows, inter)


# ======================================================================= swarm mode
def is_digest(text: str) -> bool:
    """Whether ``text`` is a SHA-256 digest in hex, as
    :func:`~fedforest.federation.agreement.payload_digest` writes it (64 hex digits).

    Examples
    --------
    >>> is_digest("a" * 64), is_digest("A" * 64), is_digest("a" * 63)
    (True, False, False)
    """
    return len(text) == 64 and not set(text) - set("0123456789abcdef")


@dataclass(frozen=True)
class SwarmMessage:
    """A message between swarm sites (:data:`~fedforest.protocol.SWARM_MESSAGE`).

    Parameters
    ----------
    kind : str
        One of :data:`~fedforest.protocol.SWARM_KINDS`: the sender's ``payload`` for an
        exchange, the reason it ``failed`` instead, or its ``receipt`` of the others'.
    key : str
        The exchange (``schema``, ``vote``, ``score-<n>-<digest>``, ``train``).
    job : str
        The digest of the sender's job settings
        (:func:`~fedforest.federation.swarm.job_digest`).
    view : list of str
        The sites the sender continues with.
    body : dict
        The payload (read by its own format's reader once the exchange is agreed),
        ``{"error": text}`` (cut to :data:`MAX_REASON`), or the receipt
        ``{site: {"digest" | "failed" | "refused": text}}``.
    """

    kind: str
    key: str
    job: str
    view: list[str]
    body: dict

    def to_payload(self) -> dict:
        return {
            "format": protocol.SWARM_MESSAGE,
            "version": protocol.FORMATS[protocol.SWARM_MESSAGE],
            "kind": self.kind,
            "key": self.key,
            "job": self.job,
            "view": list(self.view),
            "body": dict(self.body),
        }


class SwarmMessageRefused(PayloadError):
    """A refused swarm message; ``key`` is its exchange key when that could be read (the
    receiving site names the refusal in its receipt for that exchange)."""

    def __init__(self, err: PayloadError, key: str | None):
        ValueError.__init__(self, str(err))
        self.sender = err.sender
        self.key = key


def read_swarm_message(
    payload: Any, sender: str | None, sites: Sequence[str], job: str
) -> SwarmMessage:
    """Read a message from another swarm site, as the receiving site's mailbox does.

    ``sites`` are the job's sites (the ``view`` and a receipt name only them) and
    ``job`` the receiving site's job digest (a sender whose settings differ is
    refused). ``key`` is at most :data:`MAX_KEY` characters, ``kind`` one of
    :data:`~fedforest.protocol.SWARM_KINDS`; a ``failed`` body is ``{"error": text}``,
    a receipt one entry per site of the job, each exactly one of
    :data:`~fedforest.federation.agreement.RECEIPT_KINDS` (a digest is 64 hex digits).

    Raises
    ------
    SwarmMessageRefused
        A :class:`~fedforest.errors.PayloadError` naming the sender and the field,
        with the exchange key when it could be read.
    """
    key = None
    try:
        r = PayloadReader(payload, protocol.SWARM_MESSAGE, sender)
        r.check_keys(SWARM_MESSAGE_FIELDS)
        key = r.read_string("key")
        if len(key) > MAX_KEY:
            r.refuse("key", key, f"at most {MAX_KEY} characters")
        kind = r.read_choice("kind", protocol.SWARM_KINDS)
        theirs = r.read_string("job")
        if theirs != job:
            r.fail(
                f"it runs other job settings (digest {theirs[:12]}…) than this site "
                f"({job[:12]}…); every site must run the same job.yaml"
            )
        view = r.read_str_list("view", len(sites))
        if set(view) - set(sites):
            r.refuse("view", view, f"sites of this job ({list(sites)})")
        body = r.read_mapping("body")
        if kind == "failed":
            body = {"error": r.entry(body, "body").read_string("error")[:MAX_REASON]}
        elif kind == "receipt":
            body = _read_receipt(r.entry(body, "body"), sites)
    except PayloadError as err:
        raise SwarmMessageRefused(err, key) from None
    return SwarmMessage(kind, key, theirs, view, body)


def _read_receipt(reader: PayloadReader, sites: Sequence[str]) -> dict[str, dict[str, str]]:
    """A receipt: ``{site: {"digest"|"failed"|"refused": text}}`` over the job's sites."""
    out = {}
    for site, entry in reader.payload.items():
        if site not in sites:
            reader.refuse(site, entry, f"an entry for a site of this job ({list(sites)})")
        item = reader.entry(entry, f"entry {site!r}")
        if len(item.payload) != 1:
            item.fail(f"expected one of {list(RECEIPT_KINDS)}, got {describe(entry)}")
        (kind,) = item.payload
        if kind not in RECEIPT_KINDS:
            item.fail(f"field {kind!r} is unknown; expected one of {list(RECEIPT_KINDS)}")
        text = item.read_string(kind)
        if kind == "digest" and not is_digest(text):
            item.refuse(kind, text, "a SHA-256 digest in hex")
        out[site] = {kind: text[:MAX_REASON]}
    return out


class SwarmStatus(TypedDict):
    """A swarm site's status as :func:`read_swarm_status` checked it (plain values: it goes
    into ``results.json`` as it is). ``metrics`` is the site's metrics reply as
    :func:`~fedforest.federation.evaluation.read_site_metrics` read it, or ``None``."""

    state: str
    phase: str
    error: str | None
    participants: list[str]
    model_digest: str | None
    metrics_withheld: bool
    encrypted: bool | None
    dropped: dict[str, str]
    phase_seconds: dict[str, float]
    metrics: SiteMetrics | None


def read_swarm_status(
    payload: Any,
    sender: str | None,
    sites: Sequence[str] | None = None,
    strategies: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
) -> SwarmStatus:
    """Read a site's :data:`~fedforest.protocol.SWARM_STATUS` (the server's side).

    ``sites`` are the job's sites (``participants`` and ``dropped`` name only them),
    ``strategies`` and ``metrics`` what the job evaluates (the status's metrics are read
    against them); without them (a site's own privacy filter, which does not know the
    job) the status is read as it describes itself. Texts are cut: the error and the
    reasons to :data:`MAX_REASON`, the phase to :data:`MAX_KEY` characters.

    Raises
    ------
    fedforest.PayloadError
        Naming the sender and the field.
    """
    r = PayloadReader(payload, protocol.SWARM_STATUS, sender)
    r.check_keys(STATUS_FIELDS)
    site = r.read_string("site")
    if sender is not None and site != sender:
        r.fail(f"it says it is site {site!r}")
    n_sites = None if sites is None else len(sites)
    out: dict[str, Any] = {
        "state": r.read_choice("state", protocol.SWARM_STATES),
        "phase": r.read_string("phase")[:MAX_KEY],
        "error": None if r.get("error") is None else r.read_string("error")[:MAX_REASON],
        "participants": r.read_str_list("participants", n_sites, allow_empty=True),
        "model_digest": None,
        "metrics_withheld": r.read_boolean("metrics_withheld"),
        "encrypted": None if r.get("encrypted") is None else r.read_boolean("encrypted"),
    }
    if sites is not None and set(out["participants"]) - set(sites):
        r.refuse("participants", out["participants"], f"sites of this job ({list(sites)})")
    dropped = r.read_mapping("dropped", n_sites)
    for name, why in dropped.items():
        if (sites is not None and name not in sites) or not isinstance(why, str):
            r.refuse("dropped", dropped, "a dict of a site of this job to the reason")
    out["dropped"] = {k: v[:MAX_REASON] for k, v in dropped.items()}
    if r.get("model_digest") is not None:
        text = r.read_string("model_digest")
        if not is_digest(text):
            r.refuse("model_digest", text, "a SHA-256 digest in hex")
        out["model_digest"] = text
    seconds = r.read_mapping("phase_seconds", 16)
    for name, value in seconds.items():
        r.number(f"phase_seconds.{name}", value, 0)
    out["phase_seconds"] = {k: float(v) for k, v in seconds.items()}
    out["metrics"] = (
        None
        if r.get("metrics") is None
        else read_site_metrics(r.get("metrics"), site, strategies, metrics)
    )
    return typing.cast(SwarmStatus, out)


# ======================================================================== the registry
@dataclass(frozen=True)
class Message:
    """One payload format: the type a received payload is read into, and its reader.

    Parameters
    ----------
    format : str
        The format (a key of :data:`fedforest.protocol.FORMATS`).
    type : type
        What :meth:`read` returns (a class, or a ``TypedDict`` for a checked plain dict).
    reader : callable
        ``reader(payload, sender, **context)``; raises
        :class:`~fedforest.errors.PayloadError` naming the sender.
    context : tuple of str
        The keywords the reader takes besides the payload and the sender.
    sent_by : str
        Who sends it, and in answer to what.
    """

    format: str
    type: Any
    reader: Callable[..., Any]
    context: tuple[str, ...] = ()
    sent_by: str = ""

    def read(self, payload: Any, sender: str | None = None, **context: Any) -> Any:
        """The payload read and validated (:attr:`reader`), as :attr:`type`."""
        unknown = sorted(set(context) - set(self.context))
        if unknown:
            raise TypeError(
                f"the reader of {self.format!r} takes {list(self.context) or 'no context'}, "
                f"not {unknown}"
            )
        return self.reader(payload, sender, **context)


def _forest(payload, sender=None, where=""):
    return PooledForest.from_payload(payload, sender, where=where)


def _imputers(payload, sender=None, where=""):
    return ImputerSet.from_payload(payload, sender, where=where)


def _vote(payload, sender=None, features=None):
    return SiteVote.from_payload(payload, sender, features=features)


#: Every payload format, its type and its reader.
MESSAGES: dict[str, Message] = {
    m.format: m
    for m in (
        Message(
            protocol.POOLED_FOREST,
            PooledForest,
            _forest,
            ("where",),
            "nested in a training reply and in the model",
        ),
        Message(
            protocol.IMPUTERS,
            ImputerSet,
            _imputers,
            ("where",),
            "nested in a training reply and in the model",
        ),
        Message(
            protocol.SITE_SCHEMA,
            SiteSchema,
            SiteSchema.from_payload,
            (),
            "a site, in answer to the schema task",
        ),
        Message(
            protocol.GLOBAL_SCHEMA,
            GlobalSchema,
            GlobalSchema.from_payload,
            (),
            "the server (every swarm site computes its own), in the vote task's data",
        ),
        Message(
            protocol.SITE_VOTE,
            SiteVote,
            _vote,
            ("features",),
            "a site, in answer to the vote task",
        ),
        Message(
            protocol.MASK_SCORE,
            MaskScore,
            MaskScore.from_payload,
            (),
            "a site, in answer to the score_mask task",
        ),
        Message(
            protocol.SITE_MODELS,
            SiteModelsReply,
            SiteModelsReply.from_payload,
            (),
            "a site, in answer to the train task",
        ),
        Message(
            protocol.MODEL,
            PooledModel,
            PooledModel.from_payload,
            (),
            "the server (every swarm site pools its own), in the evaluate task's data",
        ),
        Message(
            protocol.SITE_METRICS,
            SiteMetrics,
            read_site_metrics,
            ("strategies", "metrics"),
            "a site, in answer to the evaluate task",
        ),
        Message(
            protocol.SWARM_MESSAGE,
            SwarmMessage,
            read_swarm_message,
            ("sites", "job"),
            "a swarm site, to every other site of an exchange",
        ),
        Message(
            protocol.SWARM_STATUS,
            SwarmStatus,
            read_swarm_status,
            ("sites", "strategies", "metrics"),
            "a swarm site, in answer to the server's status task",
        ),
    )
}


def read_message(payload: Any, sender: str | None, expected_format: str, **context: Any) -> Any:
    """Read a received payload of ``expected_format`` with its registered reader.

    Parameters
    ----------
    payload : Any
        What arrived (anything: it is validated).
    sender : str or None
        Who sent it; named in every refusal.
    expected_format : str
        The format the receiver expects (a key of :data:`MESSAGES`); a payload of
        another format is refused naming both.
    **context
        What the format's reader needs besides the payload (:attr:`Message.context`).

    Raises
    ------
    fedforest.PayloadError
        The payload is refused: the message names the sender, the field, the value
        and what is allowed.
    ValueError
        ``expected_format`` is no format of the protocol (a caller's mistake).

    Examples
    --------
    >>> read_message(MaskScore(0.5, 12).to_payload(), "site-1", protocol.MASK_SCORE)
    MaskScore(score=0.5, n_rows=12)
    """
    message = MESSAGES.get(expected_format)
    if message is None:
        raise ValueError(f"unknown payload format {expected_format!r}; known: {sorted(MESSAGES)}")
    return message.read(payload, sender, **context)


def _check_registry(messages: Mapping[str, Message]) -> None:
    missing = sorted(set(protocol.FORMATS) - set(messages))
    if missing:  # pragma: no cover - a format added to the protocol without a reader
        raise RuntimeError(f"payload formats without a reader: {missing}")


_check_registry(MESSAGES)
