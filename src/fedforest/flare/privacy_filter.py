"""A hospital's privacy policy enforced by NVIDIA FLARE on what leaves the site.

:class:`PrivacyPolicyFilter` is a FLARE task-result filter
(:class:`nvflare.apis.filter.Filter`). FLARE's built-in privacy filters work
on DXO objects and let fedforest's replies (plain payloads under
:data:`fedforest.protocol.PAYLOAD`) through untouched; this one reads every
fedforest reply, applies the policy to it and lets it leave only when it
complies. It works in two places:

* **in the site's own** ``local/privacy.json`` (FLARE's site-owned privacy
  management), as a ``task_result_filters`` entry of a scope. Every job that
  asks for that scope (``"scope"`` in its ``meta.json``) goes through it, so a
  hospital enforces its policy even on a job it did not write::

      {
        "scopes": [
          {
            "name": "fedforest",
            "task_result_filters": [
              {
                "path": "fedforest.flare.privacy_filter.PrivacyPolicyFilter",
                "args": {"min_leaf_rows": 20, "threshold_grid": {"step": 0.5},
                         "share": {"surrogates": false}}
              }
            ]
          }
        ],
        "default_scope": "fedforest"
      }

  ``"args": {"policy_file": "/path/to/site/local/fedforest.yaml"}`` reads the
  ``privacy:`` block of a YAML file instead (prefer an absolute path: a
  relative one is read from the working directory of the site's FLARE
  process). fedforest must be installed at the site (FLARE builds the filter
  from ``privacy.json`` before any job code is there). Give the filter a scope of its own:
  a job of another kind in that scope would have every reply refused (it sends
  no fedforest payload);
* **in the job** (``make_fed_job(..., privacy_filter=...)``, the recipe's
  ``privacy_filter``): the job's own task-result filter on every site.

The policy is the ``privacy:`` block of
:mod:`fedforest.privacy`. The site applies it itself when it
trains (with its rows: it snaps thresholds and recounts). The filter has no
rows: it applies what a payload alone allows and refuses what it cannot fix.

**What is checked and changed, per reply** (``min_leaf_rows`` is k):

=========================  ==========================================================
reply                      the filter
=========================  ==========================================================
``fedforest/site-models``  validates the payload as the server does; removes surrogate
(train)                    splits (``share.surrogates`` false). Under a threshold grid:
                           moves categorical thresholds to the cut between level codes
                           (``floor(t) + 0.5``, which routes every code alike) and
                           removes each surrogate split whose threshold is off the grid;
                           prunes every node under k rows (:func:`enforce_min_leaf_rows`)
                           in the forest and the intersection forest; adds Laplace noise
                           to the leaf counts (``count_noise_epsilon``) and prunes again;
                           empties ``imputers`` (``share.imputers`` false), empties
                           ``feature_std`` and drops the numeric imputers
                           (``share.feature_std`` false), drops the intersection forest
                           (``share.intersection`` false, or when it cannot be made to
                           comply). **Refused**: a split threshold off the grid (a
                           threshold cannot be snapped without the rows that route
                           through it), a forest whose every tree has fewer than k rows
                           at its root, a malformed payload
``fedforest/site-schema``  validated and passed. Rare levels (``min_level_rows``) cannot
(schema)                   be seen without the data: only the site can hide them
``fedforest/site-vote``    validated; refused when it was computed on fewer than k rows
(vote)                     (``n_rows``) or, in DP mode, when it is not the ``none``
                           selector's vote (every column kept, equal scores). ``{}``
                           (election off) passes
``fedforest/mask-score``   validated; refused when it was computed on fewer than k rows
(score_mask)               or, in DP mode, when the score is not the constant
                           :data:`~fedforest.federation.site.DP_MASK_SCORE`
``fedforest/site-metrics`` validated; refused when the test rows (overall or for one
(evaluate)                 strategy) are fewer than k. The reported ``privacy`` policy
                           is tightened with what the filter enforced (``min_leaf_rows``,
                           ``threshold_grid``, ``count_noise_epsilon``, ``share``), so
                           ``results.json`` names the policy that applied on the way out
=========================  ==========================================================

Anything else is refused rather than let through: a reply that carries no
fedforest payload, a payload that is not a dict, an unknown ``format``, a
format that is not the task's reply, or fields besides the payload. A reply
that is already an error (the site failed the task) leaves with its return
code and its ``fedforest_error`` message only.

**Refusing** replaces the reply with an error reply
(``TASK_RESULT_FILTER_ERROR``) whose ``fedforest_error`` names the site, the
task and the reason, so nothing of the payload leaves; the server drops the
site and names the reason in ``results.json``. Reasons name features and
counts, never a value from the payload (a threshold is what the grid hides).
The site's log says what the filter changed.

**Not covered.** ``min_level_rows`` and ``dp_epsilon`` (a YAML file may hold
them) need the rows: the filter checks what DP mode implies (no imputers, std
or surrogates; the ``none`` vote; the constant mask score) but cannot check
that trees are differentially private. Noise added here is on the counts as
sent (scikit-learn's bootstrap-weighted counts), not on plain row counts as
the site's own ``count_noise_epsilon`` is (see
:func:`~fedforest.privacy.transforms.add_count_noise` for the difference).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from nvflare.apis.filter import Filter, FilterChainType, FilterContextKey
from nvflare.apis.fl_constant import FilterKey, FLContextKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import ReservedHeaderKey, Shareable, make_reply

from .. import protocol
from ..election.ballot import SiteVote
from ..errors import ConfigError, PayloadError
from ..federation.evaluation import read_site_metrics
from ..federation.schema import SchemaError, SiteSchema
from ..federation.server import SITE_MODEL_FIELDS
from ..federation.site import DP_MASK_SCORE
from ..federation.swarm import MAX_REASON, STATUS_FIELDS
from ..model.forest import PooledForest
from ..model.imputers import ImputerSet
from ..model.model_files import read_feature_std
from ..model.payload_checks import MAX_FEATURES, MAX_ROWS
from ..privacy.audit import check_forest
from ..privacy.policy import PrivacyPolicy, effective_policy
from ..privacy.transforms import add_count_noise, enforce_min_leaf_rows, strip_surrogates
from ..validation import PayloadReader
from ..vocabulary import METRICS, REGRESSION_METRICS
from ..yaml_files import read_yaml_file

logger = logging.getLogger(__name__)

#: Named in the filter's configuration errors.
SOURCE = "PrivacyPolicyFilter"
#: The return code of a refused reply.
REFUSED = ReturnCode.TASK_RESULT_FILTER_ERROR
#: The reply formats the filter knows, by task.
REPLY_FORMATS = dict(protocol.REPLY_FORMAT)
#: Swarm tasks a site answers with an acknowledgement only (no payload).
SWARM_ACKS = (protocol.SWARM_CONFIG, protocol.SWARM_SHARE)


class Refused(Exception):
    """A reply the filter does not let leave; the message is the reason (sent to the server)."""


class PrivacyPolicyFilter(Filter):
    """Apply a privacy policy to fedforest's outgoing task results (module docstring).

    Every argument is optional; the unset ones change nothing. Each is checked
    as the ``privacy:`` block key of the same name, and an error names the
    argument.

    Parameters
    ----------
    min_leaf_rows : int, optional
        k >= 1: no node leaves with fewer than k rows; no aggregate (vote, mask
        score, metrics) computed on fewer than k rows leaves.
    threshold_grid : dict, optional
        The grid split thresholds must lie on (``{"step": 0.5}``,
        ``{"significant_digits": 2}``, ``steps``, ``edges``), as in the YAML.
    count_noise_epsilon : float, optional
        Laplace noise of scale 1/epsilon on every leaf class count.
    share : dict, optional
        ``{imputers, feature_std, surrogates, intersection: true/false}``.
    policy_file : str, optional
        A YAML file with a ``privacy:`` block (the site's ``local/fedforest.yaml``
        for instance); combined with the arguments above, the stricter per key.

    Raises
    ------
    fedforest.ConfigError
        Naming the argument (or the file and key), the bad value and what is
        allowed.
    """

    def __init__(
        self,
        min_leaf_rows: int | None = None,
        threshold_grid: Mapping | None = None,
        count_noise_epsilon: float | None = None,
        share: Mapping | None = None,
        policy_file: str | None = None,
    ):
        super().__init__()
        # stored under their own names: FLARE's job export writes them to the job's JSON
        self.min_leaf_rows = min_leaf_rows
        self.threshold_grid = None if threshold_grid is None else _plain(threshold_grid)
        self.count_noise_epsilon = count_noise_epsilon
        self.share = None if share is None else _plain(share)
        self.policy_file = None if policy_file is None else os.fspath(policy_file)
        self.policy = read_policy(
            min_leaf_rows, threshold_grid, count_noise_epsilon, share, policy_file
        )
        not_here = [
            key
            for key, on in (
                ("min_level_rows", self.policy.min_level_rows > 1),
                ("dp_epsilon", self.policy.dp),
            )
            if on
        ]
        logger.info(
            "privacy filter: policy %s%s",
            self.policy.to_dict(),
            f"; {', '.join(not_here)} need the site's rows and are enforced by the site, not "
            "by this filter"
            if not_here
            else "",
        )

    # ------------------------------------------------------------ FLARE
    def process(self, shareable: Shareable, fl_ctx: FLContext) -> Shareable:
        """Return the reply that may leave: transformed, passed, or an error reply."""
        if self.get_prop(FilterContextKey.CHAIN_TYPE) == FilterChainType.TASK_DATA_CHAIN:
            raise ValueError(
                f"{SOURCE} filters task results; list it under task_result_filters, "
                "not task_data_filters"
            )
        site = _site_name(fl_ctx)
        task = fl_ctx.get_prop(FLContextKey.TASK_NAME)
        try:
            return self.filter_reply(shareable, site, task)
        except Refused as why:
            reason = (
                f"privacy filter at {site or 'the site'} refused the {task or 'task'!r} "
                f"reply: {why}"
            )
            logger.warning("%s (policy: %s)", reason, self.policy.source)
        except Exception as err:  # noqa: BLE001 - nothing leaves when the filter itself fails
            logger.exception("privacy filter at %s failed on the %r reply", site, task)
            reason = (
                f"privacy filter at {site or 'the site'} refused the {task or 'task'!r} reply: "
                f"the filter failed ({type(err).__name__}), so nothing was sent"
            )
        return refusal(shareable, reason)

    def filter_reply(self, shareable: Shareable, site: str | None, task: str | None) -> Shareable:
        """The reply that may leave, or :class:`Refused` naming the reason."""
        rc = shareable.get_return_code(ReturnCode.OK)
        if rc != ReturnCode.OK:  # the site failed the task: only the reason leaves
            reply = make_reply(rc)
            message = shareable.get(protocol.ERROR)
            if isinstance(message, str):
                reply[protocol.ERROR] = message
            return reply
        if task in SWARM_ACKS:
            return _swarm_ack(shareable, task)
        extra = sorted(
            str(k) for k in shareable if k not in (protocol.PAYLOAD, ReservedHeaderKey.HEADERS)
        )
        if extra:
            raise Refused(
                f"the reply carries {extra} besides {protocol.PAYLOAD!r}; only fedforest "
                "payloads are let through"
            )
        if protocol.PAYLOAD not in shareable:
            raise Refused(
                f"the reply carries no fedforest payload (no {protocol.PAYLOAD!r}); only "
                "fedforest payloads are let through"
            )
        shareable[protocol.PAYLOAD] = self.filter_payload(shareable[protocol.PAYLOAD], site, task)
        return shareable

    # --------------------------------------------------------- payloads
    def filter_payload(self, payload: Any, site: str | None = None, task: str | None = None):
        """The payload that may leave (possibly changed), or :class:`Refused`.

        ``site`` (the sender) is checked against the payload's ``site`` field
        when given; ``task`` (a fedforest task) fixes the format expected.
        """
        if not isinstance(payload, dict):
            raise Refused(
                f"the payload is a {type(payload).__name__}, not a fedforest payload (a dict "
                "with a 'format')"
            )
        expected = REPLY_FORMATS.get(task) if task is not None else None
        if task == protocol.SWARM_REPORT:
            expected = protocol.SWARM_STATUS
        if not payload and task == protocol.VOTE:
            return payload  # the election is off: the site votes nothing
        fmt = payload.get("format")
        handler = self._handlers().get(fmt) if isinstance(fmt, str) else None
        if handler is None:
            known = ", ".join(sorted(self._handlers()))
            shown = repr(fmt) if isinstance(fmt, str) and len(fmt) <= 80 else type(fmt).__name__
            raise Refused(
                f"not a fedforest reply (format {shown}); the filter lets through {known} only"
            )
        if expected is not None and fmt != expected:
            raise Refused(f"the {task!r} task replies {expected!r}, but the payload is {fmt!r}")
        notes: list[str] = []
        try:
            out = handler(payload, site, notes)
        except (PayloadError, SchemaError) as err:
            raise Refused(f"the payload is not a valid {fmt!r} payload ({_short(err)})") from None
        if notes:
            logger.info(
                "privacy filter at %s, %s reply: %s", site or "the site", fmt, "; ".join(notes)
            )
        return out

    def _handlers(self):
        return {
            protocol.SITE_SCHEMA: self._schema,
            protocol.SITE_VOTE: self._vote,
            protocol.MASK_SCORE: self._mask_score,
            protocol.SITE_MODELS: self._site_models,
            protocol.SITE_METRICS: self._metrics,
            protocol.SWARM_STATUS: self._swarm_status,
        }

    def _check_rows(self, n_rows: int, what: str) -> None:
        k = self.policy.min_leaf_rows
        if n_rows < k:
            raise Refused(f"{what} describes {n_rows} rows, fewer than min_leaf_rows={k}")

    @staticmethod
    def _check_site(found: str, site: str | None) -> None:
        if site is not None and found != site:
            raise Refused(f"the payload says it is from site {found!r}, but this is {site!r}")

    def _schema(self, payload: dict, site, notes) -> dict:
        schema = SiteSchema.from_payload(payload, sender=site)
        self._check_site(schema.site, site)
        return payload

    def _vote(self, payload: dict, site, notes) -> dict:
        names = (
            [f"feature {i}" for i in range(MAX_FEATURES)] if "feature_index" in payload else None
        )
        vote = SiteVote.from_payload(payload, sender=site, features=names)
        self._check_site(vote.site, site)
        self._check_rows(vote.n_rows, "the vote")
        if self.policy.dp and (not vote.mask.all() or np.unique(vote.scores).size > 1):
            raise Refused(
                "in DP mode a site votes with the 'none' selector (every column kept, equal "
                "scores); this vote was selected on the rows"
            )
        return payload

    def _mask_score(self, payload: dict, site, notes) -> dict:
        r = PayloadReader(payload, protocol.MASK_SCORE, site)
        r.check_keys({"score", "n_rows"})
        score = r.read_number("score")
        n_rows = r.read_integer("n_rows", 1, MAX_ROWS)
        self._check_rows(n_rows, "the mask score")
        if self.policy.dp and score != DP_MASK_SCORE:
            raise Refused(
                f"in DP mode a site scores every mask {DP_MASK_SCORE}; this score was computed "
                "on the rows"
            )
        return payload

    def _metrics(self, payload: dict, site, notes) -> dict:
        per = payload.get("strategies")
        strategies = [str(s) for s in per] if isinstance(per, Mapping) else []
        first = next(iter(per.values()), None) if isinstance(per, Mapping) and per else None
        metrics = [
            m for m in (*METRICS, *REGRESSION_METRICS) if isinstance(first, Mapping) and m in first
        ]
        sender = site if site is not None else payload.get("site")
        clean = read_site_metrics(payload, sender, strategies, metrics)
        self._check_rows(clean["rows"], "the evaluation (test rows)")
        for name, row in clean["strategies"].items():
            self._check_rows(row["rows"], f"the metrics of strategy {name!r}")
        reported = clean["privacy"]
        try:
            base = PrivacyPolicy() if reported is None else PrivacyPolicy.from_dict(reported)
            tightened = effective_policy(base, self.enforced)
        except ConfigError:  # two grids that do not nest: the filter's grid was enforced
            tightened = effective_policy(
                PrivacyPolicy.from_dict({**reported, "threshold_grid": None}), self.enforced
            )
        if reported != tightened.to_dict():
            notes.append("reported privacy policy tightened with the filter's")
        return {**payload, "privacy": tightened.to_dict()}

    def _swarm_status(self, payload: dict, site, notes) -> dict:
        """A swarm site's status: checked as the server reads it; metrics under k withheld.

        The status is how the server knows the site is alive, so it is never
        refused for its metrics: metrics the filter would refuse are withheld
        (``metrics`` null, ``metrics_withheld`` true), and everything else in it
        (state, phase, errors, participants, digest, timings) is no data.
        """
        r = PayloadReader(payload, protocol.SWARM_STATUS, site)
        r.check_keys(STATUS_FIELDS)
        self._check_site(r.read_string("site"), site)
        metrics = r.get("metrics")
        if metrics is None:
            return payload
        try:
            metrics = self._metrics(metrics, site, notes)
        except Refused as why:
            notes.append(f"test metrics withheld from the status: {why}")
            return {**payload, "metrics": None, "metrics_withheld": True}
        return {**payload, "metrics": metrics}

    @property
    def enforced(self) -> PrivacyPolicy:
        """The part of the policy this filter enforces on the forests it lets through."""
        p = self.policy
        return PrivacyPolicy(
            min_leaf_rows=p.min_leaf_rows,
            threshold_grid=None if p.dp else p.threshold_grid,
            count_noise_epsilon=p.count_noise_epsilon,
            share=p.share,
            source=p.source,
        )

    def _site_models(self, payload: dict, site, notes) -> dict:
        r = PayloadReader(payload, protocol.SITE_MODELS, site)
        r.check_keys(SITE_MODEL_FIELDS)
        forest = PooledForest.from_payload(r.get("forest"), sender=site, where="forest")
        imputers = ImputerSet.from_payload(r.get("imputers"), sender=site, where="imputers")
        std = read_feature_std(r)
        n_rows = r.read_integer("n_rows", 1, MAX_ROWS)
        inter_payload = r.get("intersection", None)
        inter = (
            None
            if inter_payload is None
            else PooledForest.from_payload(inter_payload, sender=site, where="intersection")
        )
        share = self.policy.share
        forest = self._forest(forest, "forest", notes)
        if not share["imputers"] and len(imputers):
            notes.append(f"{len(imputers)} imputers withheld (share.imputers false)")
            imputers = ImputerSet([])
        if not share["feature_std"]:
            if std:
                notes.append(f"{len(std)} standard deviations withheld (share.feature_std false)")
                std = {}
            numeric = [f for f in imputers if imputers[f].kind == "numeric"]
            if numeric:  # a numeric imputer needs its sigma (read_model refuses it without)
                notes.append(f"numeric imputers {numeric} withheld (they need feature_std)")
                imputers = ImputerSet(imputers[f] for f in imputers if f not in numeric)
        if inter is not None and not share["intersection"]:
            notes.append("intersection forest withheld (share.intersection false)")
            inter = None
        if inter is not None:
            try:
                inter = self._forest(inter, "intersection forest", notes)
            except Refused as why:
                notes.append(f"intersection forest withheld: {why}")
                inter = None
        out = {
            "format": protocol.SITE_MODELS,
            "version": protocol.FORMATS[protocol.SITE_MODELS],
            "forest": forest.to_payload(),
            "imputers": imputers.to_payload(),
            "feature_std": std,
            "n_rows": n_rows,
        }
        if inter is not None:
            out["intersection"] = inter.to_payload()
        return out

    def _forest(self, forest: PooledForest, where: str, notes: list[str]) -> PooledForest:
        """One forest made to comply, or :class:`Refused` (the reason names no value)."""
        p = self.policy
        k = p.min_leaf_rows
        grid = None if p.dp else p.threshold_grid
        if grid is not None:
            forest, moved = _cut_between_codes(forest)
            if moved:
                notes.append(
                    f"{where}: {moved} thresholds on categorical features moved to the cut "
                    "between level codes (every code is routed as before)"
                )
        n_surrogates = int(np.sum(forest.surrogate_feature >= 0))
        if n_surrogates and not p.share["surrogates"]:
            forest = strip_surrogates(forest)
            notes.append(
                f"{where}: {n_surrogates} surrogate splits removed (share.surrogates false)"
            )
        elif n_surrogates and grid is not None:
            off = _off_grid(forest, grid, forest.surrogate_feature, forest.surrogate_threshold)
            if off.any():
                keep = ~off
                forest = forest.with_surrogates(
                    np.where(keep, forest.surrogate_feature, -1),
                    np.where(keep, forest.surrogate_threshold, 0.0),
                    np.where(keep, forest.surrogate_left_le, True),
                    np.where(keep, forest.surrogate_agreement, 0.0),
                )
                notes.append(f"{where}: {int(off.sum())} surrogate splits off the grid removed")
        nodes, trees = forest.n_nodes, forest.n_trees
        try:
            forest = enforce_min_leaf_rows(forest, k)
            if p.count_noise_epsilon is not None:
                forest = enforce_min_leaf_rows(add_count_noise(forest, p.count_noise_epsilon), k)
                notes.append(
                    f"{where}: Laplace noise (epsilon {p.count_noise_epsilon:g}) on leaf counts"
                )
        except ValueError:
            raise Refused(
                f"{where}: every tree describes fewer than min_leaf_rows={k} rows, so no tree "
                "can be sent"
            ) from None
        if forest.n_nodes != nodes:
            notes.append(
                f"{where}: {nodes - forest.n_nodes} nodes under min_leaf_rows={k} pruned"
                + (f", {trees - forest.n_trees} trees dropped" if forest.n_trees != trees else "")
            )
        if grid is not None:
            off = _off_grid(forest, grid, forest.feature, forest.threshold)
            if off.any():
                by_feature: dict[str, int] = {}
                for j in forest.feature[off]:
                    name = forest.feature_names[int(j)]
                    by_feature[name] = by_feature.get(name, 0) + 1
                uncovered = grid.uncovered(
                    sorted(f for f in by_feature if f not in forest.categories)
                )
                detail = ", ".join(f"{n} on {f!r}" for f, n in sorted(by_feature.items()))
                raise Refused(
                    f"{where}: {int(off.sum())} split thresholds are off the threshold grid "
                    f"({detail})"
                    + (f"; the grid has no rule for {uncovered}" if uncovered else "")
                    + ". The filter cannot snap a threshold without the site's rows: set "
                    "privacy.threshold_grid in the site's local/fedforest.yaml so the site "
                    "snaps its thresholds when it trains"
                )
        if check_forest(forest, p):  # cannot happen after the steps above; never let it leave
            raise Refused(f"{where}: the forest still breaks the policy after filtering")
        return forest


# ==================================================================== helpers
def read_policy(
    min_leaf_rows=None, threshold_grid=None, count_noise_epsilon=None, share=None, policy_file=None
) -> PrivacyPolicy:
    """The filter's policy from its arguments and/or a YAML file (the stricter per key)."""
    block = {
        key: value
        for key, value in (
            ("min_leaf_rows", min_leaf_rows),
            ("threshold_grid", threshold_grid),
            ("count_noise_epsilon", count_noise_epsilon),
            ("share", share),
        )
        if value is not None
    }
    try:
        policy = PrivacyPolicy.from_dict(_plain(block), source=SOURCE, prefix="")
    except ConfigError as err:
        raise ConfigError(str(err).replace(f"{SOURCE}: key ", f"{SOURCE}: argument ", 1)) from None
    if policy_file is None:
        return policy
    from_file = _policy_from_file(policy_file)
    return effective_policy(from_file, policy) if block else from_file


def _policy_from_file(policy_file) -> PrivacyPolicy:
    allowed = (
        "the path of a YAML file with a privacy: block (such as the site's local/fedforest.yaml)"
    )
    if not isinstance(policy_file, (str, os.PathLike)) or not os.fspath(policy_file):
        raise ConfigError(
            f"{SOURCE}: argument 'policy_file' is {policy_file!r}; allowed: {allowed}"
        )
    path = Path(policy_file)
    if not path.is_file():
        raise ConfigError(
            f"{SOURCE}: argument 'policy_file' is {os.fspath(policy_file)!r}, which is not a file "
            f"(a relative path is read from {Path.cwd()}); allowed: {allowed}"
        )
    try:
        data = read_yaml_file(path)
    except ConfigError as err:
        raise ConfigError(f"{err}; the file: {allowed}") from None
    if not isinstance(data, Mapping) or "privacy" not in data:
        raise ConfigError(f"{path}: key 'privacy' is missing; allowed: {allowed}")
    return PrivacyPolicy.from_dict(data["privacy"], source=str(path))


def _plain(value):
    """A copy made of plain dicts and lists (FLARE's JSON and the YAML reader's shapes)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _off_grid(forest: PooledForest, grid, feature: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Per node: a finite threshold off the grid (categorical: not a cut between codes)."""
    off = np.zeros(forest.n_nodes, bool)
    used = (feature >= 0) & np.isfinite(threshold)
    for j in np.unique(feature[used]):
        at = used & (feature == j)
        t = threshold[at]
        name = forest.feature_names[int(j)]
        if name in forest.categories:
            off[at] = np.floor(t) + 0.5 != t
        else:
            off[at] = ~grid.on_grid(name, t)
    return off


def _cut_between_codes(forest: PooledForest) -> tuple[PooledForest, int]:
    """Categorical thresholds (split and surrogate) moved to ``floor(t) + 0.5``.

    Level codes are integers, so ``x <= t`` and ``x <= floor(t) + 0.5`` route
    every code alike (kept within [-0.5, K - 0.5] for K levels), and so do the
    imputed codes and the level probabilities of ``mi``, ``ipr`` and ``mp``.
    A threshold such as 1.0 (between codes 0 and 2) tells that the node saw no
    row of code 1; the cut 1.5 does not.
    """
    if not forest.categories:
        return forest, 0
    n_levels = np.array(
        [len(forest.categories.get(name, ())) for name in forest.feature_names] + [0], float
    )
    categorical = n_levels > 0
    arrays = {}
    moved = 0
    for feature, key in (
        (forest.feature, "threshold"),
        (forest.surrogate_feature, "surrogate_threshold"),
    ):
        t = getattr(forest, key)
        at = (feature >= 0) & categorical[feature] & np.isfinite(t)
        cut = np.clip(np.floor(t) + 0.5, -0.5, n_levels[feature] - 0.5)
        change = at & (cut != t)
        moved += int(change.sum())
        arrays[key] = np.where(change, cut, t)
    if not moved:
        return forest, 0
    out = forest.with_surrogates(
        forest.surrogate_feature,
        arrays["surrogate_threshold"],
        forest.surrogate_left_le,
        forest.surrogate_agreement,
    )
    out.threshold = arrays["threshold"]
    return out, moved


def _swarm_ack(shareable: Shareable, task: str) -> Shareable:
    """A swarm site's answer to the server's configuration or to a peer's message.

    It carries no fedforest payload: nothing but its headers and, when the
    site refused a peer's message, the reason (a text, cut to
    :data:`~fedforest.federation.swarm.MAX_REASON` characters).
    """
    extra = sorted(
        str(k) for k in shareable if k not in (protocol.ERROR, ReservedHeaderKey.HEADERS)
    )
    if extra:
        raise Refused(
            f"the {task!r} reply carries {extra}; a swarm site answers it with nothing but an "
            "acknowledgement"
        )
    message = shareable.get(protocol.ERROR)
    if message is not None:
        if not isinstance(message, str):
            raise Refused(
                f"the {task!r} reply's {protocol.ERROR!r} is a {type(message).__name__}, not a text"
            )
        shareable[protocol.ERROR] = message[:MAX_REASON]
    return shareable


def policy_filters(filters) -> list[PrivacyPolicyFilter]:
    """The :class:`PrivacyPolicyFilter` objects among FLARE filters (any other is skipped).

    Recognised by class and module name as well as by type, since the
    filter of a site's ``privacy.json`` comes from the fedforest installed
    at the site, and the job's code from its ``custom/`` folder.
    """
    return [
        f
        for f in filters
        if isinstance(f, PrivacyPolicyFilter)
        or (
            type(f).__name__ == PrivacyPolicyFilter.__name__
            and type(f).__module__ == __name__
            and callable(getattr(f, "filter_payload", None))
        )
    ]


def _site_name(fl_ctx: FLContext) -> str | None:
    """The sending site: this site, or the peer when the filter runs on received results."""
    if fl_ctx.get_prop(FLContextKey.FILTER_DIRECTION) == FilterKey.IN:
        peer = fl_ctx.get_peer_context()
        return peer.get_identity_name() if peer is not None else None
    return fl_ctx.get_identity_name() or None


def _short(err: Exception, limit: int = 400) -> str:
    text = str(err)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def refusal(shareable: Shareable | None, reason: str) -> Shareable:
    """An error reply carrying ``reason`` and nothing of the refused reply but its headers."""
    reply = Shareable()
    headers = shareable.get(ReservedHeaderKey.HEADERS) if isinstance(shareable, Shareable) else None
    if isinstance(headers, dict):
        reply[ReservedHeaderKey.HEADERS] = dict(headers)
    reply.set_return_code(REFUSED)
    reply[protocol.ERROR] = reason
    return reply
