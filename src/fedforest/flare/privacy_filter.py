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

The policy is the ``privacy:`` block of :mod:`fedforest.privacy`. The site
applies it itself when it trains (with its rows: it snaps thresholds and
recounts). The filter has no rows: it applies what a payload alone allows and
refuses what it cannot fix. What it checks and changes, per reply, is the
core's (:mod:`fedforest.federation.message_filter`: every payload read by the
registry's reader for its format, then the checks and transforms of
:mod:`fedforest.privacy.outgoing`); this module only takes the payload out of
FLARE's ``Shareable`` and puts the result back:

* a reply that is already an error (the site failed the task) leaves with its
  return code and its ``fedforest_error`` message only;
* a swarm acknowledgement (``fedforest_swarm_config``, ``fedforest_swarm_share``)
  leaves with its headers and, when the site refused a peer's message, the
  reason (cut to :data:`~fedforest.federation.messages.MAX_REASON`);
* any other reply must carry a fedforest payload and nothing else, and leaves
  as the core returns it.

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
from typing import Any

from nvflare.apis.filter import Filter, FilterChainType, FilterContextKey
from nvflare.apis.fl_constant import FilterKey, FLContextKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import ReservedHeaderKey, Shareable, make_reply

from .. import protocol
from ..federation.message_filter import SWARM_ACKS, acknowledgement, filter_payload
from ..privacy.outgoing import Refusal, filter_policy, plain

logger = logging.getLogger(__name__)

#: Named in the filter's configuration errors.
SOURCE = "PrivacyPolicyFilter"
#: The return code of a refused reply.
REFUSED = ReturnCode.TASK_RESULT_FILTER_ERROR


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
    time_resolution : float, optional
        A survival job's event-time quantiles (the schema reply) leave as
        multiples of it: the filter rounds them.

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
        time_resolution: float | None = None,
    ):
        super().__init__()
        # stored under their own names: FLARE's job export writes them to the job's JSON
        self.min_leaf_rows = min_leaf_rows
        self.threshold_grid = None if threshold_grid is None else plain(threshold_grid)
        self.count_noise_epsilon = count_noise_epsilon
        self.share = None if share is None else plain(share)
        self.policy_file = None if policy_file is None else os.fspath(policy_file)
        self.time_resolution = time_resolution
        self.policy = filter_policy(
            min_leaf_rows,
            threshold_grid,
            count_noise_epsilon,
            share,
            policy_file,
            SOURCE,
            time_resolution=time_resolution,
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
        except Refusal as why:
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
        """The reply that may leave, or :class:`~fedforest.privacy.outgoing.Refusal`."""
        rc = shareable.get_return_code(ReturnCode.OK)
        if rc != ReturnCode.OK:  # the site failed the task: only the reason leaves
            reply = make_reply(rc)
            message = shareable.get(protocol.ERROR)
            if isinstance(message, str):
                reply[protocol.ERROR] = message
            return reply
        headers = ReservedHeaderKey.HEADERS
        if task in SWARM_ACKS:  # no payload: headers and a refusal text only
            fields = [k for k in shareable if k not in (protocol.ERROR, headers)]
            message = acknowledgement(task, fields, shareable.get(protocol.ERROR))
            if message is not None:
                shareable[protocol.ERROR] = message
            return shareable
        extra = sorted(str(k) for k in shareable if k not in (protocol.PAYLOAD, headers))
        if extra:
            raise Refusal(
                f"the reply carries {extra} besides {protocol.PAYLOAD!r}; only fedforest "
                "payloads are let through"
            )
        if protocol.PAYLOAD not in shareable:
            raise Refusal(
                f"the reply carries no fedforest payload (no {protocol.PAYLOAD!r}); only "
                "fedforest payloads are let through"
            )
        shareable[protocol.PAYLOAD] = self.filter_payload(shareable[protocol.PAYLOAD], site, task)
        return shareable

    def filter_payload(self, payload: Any, site: str | None = None, task: str | None = None):
        """The payload that may leave (possibly changed), or
        :class:`~fedforest.privacy.outgoing.Refusal`
        (:func:`fedforest.federation.message_filter.filter_payload`); what changed is logged.

        ``site`` (the sender) is checked against the payload's ``site`` field
        when given; ``task`` (a fedforest task) fixes the format expected.
        """
        out, notes = filter_payload(self.policy, payload, site, task)
        if notes:
            logger.info(
                "privacy filter at %s, %s reply: %s",
                site or "the site",
                payload.get("format"),
                "; ".join(notes),
            )
        return out


# ==================================================================== helpers
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


def refusal(shareable: Shareable | None, reason: str) -> Shareable:
    """An error reply carrying ``reason`` and nothing of the refused reply but its headers."""
    reply = Shareable()
    headers = shareable.get(ReservedHeaderKey.HEADERS) if isinstance(shareable, Shareable) else None
    if isinstance(headers, dict):
        reply[ReservedHeaderKey.HEADERS] = dict(headers)
    reply.set_return_code(REFUSED)
    reply[protocol.ERROR] = reason
    return reply
