"""A hospital-owned privacy policy, applied to what leaves a site.

A site sends the server its schema (column names, category levels, classes,
row count) and its models (trees, surrogate splits, imputers, per-feature std,
the intersection forest). Plain scikit-learn trees disclose more than people
expect: a threshold is the midpoint of two training values, a leaf may describe
a single patient, and a rare category level may identify one. A
:class:`~fedforest.privacy.policy.PrivacyPolicy` says what the hospital accepts
to send, and the modules of this package apply it:

* :mod:`~fedforest.privacy.policy` -- the ``privacy:`` block
  (:class:`~fedforest.privacy.policy.PrivacyPolicy`,
  :class:`~fedforest.privacy.policy.ThresholdGrid`), the stricter of two
  policies (:func:`~fedforest.privacy.policy.effective_policy`) and DP mode's
  budget (:func:`~fedforest.privacy.policy.dp_budget`);
* :mod:`~fedforest.privacy.transforms` -- the transforms of an outgoing
  :class:`~fedforest.model.forest.PooledForest`, in the documented order
  (:func:`~fedforest.privacy.transforms.prepare_forest`);
* :mod:`~fedforest.privacy.dp_forest` -- DP mode's random trees
  (:func:`~fedforest.privacy.dp_forest.fit_dp_forest`);
* :mod:`~fedforest.privacy.levels` -- rare category levels sent as one level;
* :mod:`~fedforest.privacy.audit` -- the measurements: how much a forest or a
  schema still discloses, and what in a forest breaks a policy;
* :mod:`~fedforest.privacy.counts` -- the machinery the transforms share:
  routing the site's rows through the trees and setting counts from leaves.

The transforms are pure functions: they return a new forest and never change
their input.

Regression trees go through the same transforms, rare levels and ``share``
switches: a leaf sends its row count and the mean target of its rows (no
class distribution), recounting recomputes those means, and count noise and
DP mode put noise on each leaf's count and sum of the target. DP mode of a
regression job needs the target's public ``target_range``
(:meth:`~fedforest.privacy.policy.PrivacyPolicy.check_task`).

In DP mode (``dp_epsilon``) the site sends :func:`~fedforest.privacy.dp_forest.fit_dp_forest`
trees instead of its forest (pruned by ``min_leaf_rows`` on their noisy counts,
which keeps the guarantee), and imputers, std and surrogates are never shared
(they are computed from the rows without noise). The intersection forest, when
shared, is a second DP forest; :func:`~fedforest.privacy.policy.dp_budget`
splits ``dp_epsilon`` between the two.

**What is protected, and what is not.**

* ``min_leaf_rows`` and ``min_level_rows`` are k-anonymity-style thresholds.
  They are no formal guarantee: differencing two releases, or combining a
  leaf with the other sites' trees, can still isolate rows.
* ``threshold_grid`` removes the training values that thresholds are made of.
  Which grid point a split uses, and the tree structure, still depend on the
  rows.
* ``count_noise_epsilon`` protects the **counts** only (class distributions
  and ``n_node_samples``; for regression trees the leaf counts and the leaf
  means, from noisy sums of the target). The tree structure (which features,
  which thresholds, where the tree stops) is chosen from the data without
  noise, so the forest as a whole is **not** differentially private.
* ``dp_epsilon`` is the only formal guarantee, and it covers the trees of the
  forest (and of the intersection forest) only (regression trees: their
  means too, given a public ``target_range``): the schema (levels, classes,
  row count), the election phase (votes, mask scores) and the evaluation
  metrics are sent without noise. See
  :func:`~fedforest.privacy.dp_forest.fit_dp_forest` for the exact statement.

The noise of :func:`~fedforest.privacy.transforms.add_count_noise` and
:func:`~fedforest.privacy.dp_forest.fit_dp_forest` must be secret: by default
it comes from the operating system's entropy. Never seed it with the job's
seed (the server knows it and could subtract the noise); tests are the only
callers that pass a seed.

The package sits below :mod:`fedforest.federation`, whose site applies it; it
imports only numpy, pandas and fedforest's model and foundations.
"""
