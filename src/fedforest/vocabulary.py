"""Every choice list of fedforest, defined once.

Configuration validation, the command line, the experiment runner, the reports
and the estimators all import their allowed values from here, so a new metric
or selector is added in one place. The strategies are the registry's
(:mod:`fedforest.rules`): the strategy tuples below are computed from it when
this module is imported (the built-in rules), and code that must see a rule
registered later asks the registry itself. This module imports nothing from
fedforest but :mod:`fedforest.rules`, which imports nothing else.
"""

from __future__ import annotations

from . import rules as _rules

#: A site's name: a folder and a FLARE participant name (job configs and model files alike).
SITE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
#: Names FLARE gives its own participants, never a site's.
RESERVED_SITE_NAMES = ("server", "admin", "overseer")
#: The characters :data:`SITE_NAME` allows, for messages (site and job names alike).
NAME_CHARACTERS = "letters, digits, '_', '.' and '-' (at most 64, starting with a letter or digit)"
#: What :data:`SITE_NAME` allows, for messages.
SITE_NAME_RULE = f"a site name of {NAME_CHARACTERS}, not one of {', '.join(RESERVED_SITE_NAMES)}"
#: What a forest predicts (``job.task``): a class, a number, or the time to an event (a
#: cumulative hazard and survival curve on a time grid).
TASKS = ("classification", "regression", "survival")
#: Missing-split strategies of :class:`fedforest.PooledForestClassifier` (pooled forest).
STRATEGIES = _rules.strategies()
#: Strategies that keep a subset of the trees and route missing values as scikit-learn does.
TREE_SELECTION = _rules.tree_selections()
#: What a job can evaluate: every registered strategy.
JOB_STRATEGIES = _rules.names()
#: The nine methods compared in the missing-split paper (experiments).
PAPER_METHODS = _rules.paper_methods()
#: Methods the experiment runner can score: the paper's, then the others.
EXPERIMENT_METHODS = _rules.experiment_methods()
#: Strategies with a parameter fitted on the site's validation rows (not ``auto`` candidates).
FITTED_STRATEGIES = _rules.fitted()
#: Methods that need validation rows: the fitted strategies and ``auto``.
VALIDATION_METHODS = _rules.validation_methods()
#: Order in which equally scoring strategies are preferred by ``auto``.
STRATEGY_PREFERENCE = _rules.preference()

#: What a site scores its choices on (``evaluation.validation``, a site's ``validation``):
#: ``oob``, its training rows out of bag (each row by the trees that did not train on it);
#: ``holdout``, validation rows held out of training (``validation_fraction``).
VALIDATIONS = ("oob", "holdout")
#: A job's validation mode when its YAML sets none.
DEFAULT_VALIDATION = "oob"

#: How kept trees are averaged.
VOTING = ("soft", "hard")
#: What runs the dynamic traversals of :class:`fedforest.PooledForestClassifier`.
ENGINES = ("auto", "numba", "numpy")
#: Metrics that rank or classify: higher is better (the election scores with these).
RANKING_METRICS = ("auprc", "auc", "mcc", "accuracy")
#: Metrics of the probabilities themselves: lower is better. ``brier`` and
#: ``log_loss`` are proper scoring rules; ``ece`` (expected calibration error)
#: is not, so ``auto`` never maximises it.
CALIBRATION_METRICS = ("brier", "log_loss", "ece")
#: Classification metrics (:func:`fedforest.score`).
METRICS = (*RANKING_METRICS, *CALIBRATION_METRICS)
#: Regression metrics (:func:`fedforest.metrics.score_values`): root mean squared error and
#: mean absolute error (lower is better), and the coefficient of determination.
REGRESSION_METRICS = ("rmse", "mae", "r2")
#: Survival metrics (:func:`fedforest.survival_metrics.score_survival`): Harrell's and Uno's
#: concordance index and the mean time-dependent AUC (higher is better), the integrated
#: Brier score (lower is better).
SURVIVAL_METRICS = ("cindex", "uno_cindex", "ibs", "td_auc")
#: Metrics where a lower value is better.
LOWER_IS_BETTER = (*CALIBRATION_METRICS, "rmse", "mae", "ibs")
#: What ``auto`` and ``wmp`` minimise on a regression site's validation rows (squared error).
REGRESSION_AUTO_METRIC = "rmse"
#: What ``auto`` and ``wmp`` minimise on a survival site's rows by default.
SURVIVAL_AUTO_METRIC = "ibs"
#: What ``auto`` can optimise for survival: a proper scoring rule (the integrated Brier
#: score) or a concordance index.
SURVIVAL_AUTO_METRICS = ("ibs", "cindex", "uno_cindex")
#: What the election's tuning can score a survival mask by (``election.metric``): the
#: integrated Brier score and Harrell's C.
SURVIVAL_TUNING_METRICS = ("ibs", "cindex")
#: Metrics ``auto`` (strategy and calibration choice) can optimise.
AUTO_METRICS = ("log_loss", "brier", *RANKING_METRICS)
#: What ``auto`` optimises by default: a proper scoring rule, so that it sees calibration.
DEFAULT_AUTO_METRIC = "log_loss"
#: Site-side calibration of predicted probabilities (fitted on validation rows).
CALIBRATIONS = ("none", "prior", "sigmoid", "isotonic", "auto")
#: Fitted calibration methods, simplest first (``auto``'s order on ties).
CALIBRATION_METHODS = ("none", "prior", "sigmoid", "isotonic")
#: How the pooled forest weighs each site's trees (``pooling.weights``).
POOLING_WEIGHTS = ("equal", "rows")
#: Local feature selectors a site can run before the election.
SELECTORS = (
    "lasso",
    "elastic_net",
    "mutual_info",
    "random_forest",
    "f_classif",
    "f_regression",
    "chi2",
    "coxnet",
    "cox_univariate",
    "none",
)
#: Site weights in the election.
AGGREGATIONS = ("weighted", "uniform")
#: Kinds of feature (and of imputer).
FEATURE_KINDS = ("numeric", "categorical")
#: Phases of a job that have their own timeout.
PHASES = ("schema", "election", "train", "evaluate")
#: Where a job also sends its metrics: NVIDIA FLARE's experiment tracking (``job.tracking``).
TRACKING = ("none", "tensorboard", "mlflow")
#: Who runs the phases (``job.mode``): the FLARE server, or the sites among themselves.
MODES = ("server", "swarm")
#: How figures and reports name each strategy (the rules' display names).
STRATEGY_NAMES = _rules.display_names()
