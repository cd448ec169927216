"""Checks of single configuration values for :mod:`fedforest.federation.config`.

What a job's file or a site's file holds, key by key, where the rule needs
more than a range: a site's privacy block with the job's secure defaults,
the ``label_map`` and the selector's parameters (a job's defaults per task:
:mod:`.config_tasks`). Every error names the file, the
key, the bad value and what is allowed (:class:`~fedforest.validation.ConfigChecker`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..privacy.policy import JOB_MIN_LEAF_ROWS, JOB_TREE_SAMPLE_FRACTION, PrivacyPolicy
from ..validation import ConfigChecker

logger = logging.getLogger(__name__)


def _site_privacy(block: Any, source: str) -> PrivacyPolicy:
    """The ``privacy:`` block of a site's YAML, with the job's default ``min_leaf_rows``.

    A block that sets no ``min_leaf_rows`` (or no block) gets
    :data:`~fedforest.privacy.policy.JOB_MIN_LEAF_ROWS`, except in DP mode,
    whose random trees and noisy counts are protected by the DP guarantee
    (pruning them would only cost accuracy); a lower value set in the file is
    kept, with a warning that says what it costs.
    """
    policy = PrivacyPolicy.from_dict(block, source)
    if policy.dp:
        return policy
    given = block if isinstance(block, Mapping) else {}
    defaults = {}
    for key, default in (
        ("min_leaf_rows", JOB_MIN_LEAF_ROWS),
        ("tree_sample_fraction", JOB_TREE_SAMPLE_FRACTION),
    ):
        value = getattr(policy, key)
        if key not in given or value is None:
            defaults[key] = default
        elif _looser(key, value, default):
            looser = "below" if key == "min_leaf_rows" else "above"
            logger.warning(
                "%s: privacy.%s is %s, %s the default of %s: this site's trees tell more "
                "about who was in its training rows (membership inference); remove the key "
                "for the default",
                source,
                key,
                value,
                looser,
                default,
            )
    return dataclasses.replace(policy, **defaults) if defaults else policy


#: Which way a privacy key loosens the policy: a smaller ``min_leaf_rows`` (smaller leaves),
#: a larger ``tree_sample_fraction`` (each tree sees more of the rows).
LOOSER_WHEN = {"min_leaf_rows": "lower", "tree_sample_fraction": "higher"}


def _looser(key: str, value: float, default: float) -> bool:
    """Whether ``value`` of the privacy ``key`` is looser than the job's ``default``."""
    return value < default if LOOSER_WHEN[key] == "lower" else value > default


def _scalar_label(value: Any) -> Any:
    """A label_map key or value as a plain label (int or str), or None if it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value == round(value):
        return int(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _check_label_map(c: ConfigChecker, label_map: Any) -> dict:
    allowed = (
        "a mapping of local class label to global label, each a string or an integer "
        "(quote yes, no, true, false and null: YAML reads them as booleans or null)"
    )
    if not isinstance(label_map, Mapping):
        c.fail("label_map", label_map, allowed)
    out: dict = {}
    for key, value in label_map.items():
        k, v = _scalar_label(key), _scalar_label(value)
        if k is None:
            c.fail("label_map", key, allowed)
        if v is None:
            c.fail(f"label_map.{key}", value, allowed)
        if str(k) in {str(x) for x in out}:
            c.fail("label_map", label_map, "a mapping with one entry per local label")
        out[k] = v
    onto: dict[str, list] = {}
    for k, v in out.items():
        onto.setdefault(str(v), []).append(k)
    merged = [keys for keys in onto.values() if len(keys) > 1]
    if merged:
        c.fail(
            "label_map",
            label_map,
            "a map that gives each local label its own global label (it maps "
            f"{', '.join(map(repr, merged[0]))} onto one label {out[merged[0][0]]!r}, which "
            "would merge two outcomes)",
        )
    return out


def _check_selector_params(
    c: ConfigChecker, selector: str, params: Mapping, task: str = "classification"
) -> None:
    """The selector's own validation, reported as ``selector_params.<key>``; a selector the
    job's task cannot use (``chi2`` for a regression target) as ``selector``."""
    from ..election.selectors import SelectorParamError, SelectorTaskError, check_params

    try:
        check_params(selector, params, task=task)
    except SelectorTaskError as err:
        c.fail(
            "selector", selector, f"one of {', '.join(err.allowed)} for job.task: {task} ({err})"
        )
    except SelectorParamError as err:
        c.fail(f"selector_params.{err.key}", err.value, err.allowed)
