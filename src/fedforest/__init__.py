"""fedforest: random forests pooled across sites with different columns.

The package is layered; a layer imports only the layers above it in this list:

* foundations -- :mod:`fedforest.errors`, :mod:`fedforest.rules` (the
  strategy registry), :mod:`fedforest.vocabulary` (every other choice list), :mod:`fedforest.protocol` (the wire protocol),
  :mod:`fedforest.validation` (one family of validators),
  :mod:`fedforest.outputs` (folders and files fedforest writes are never a
  user's), :mod:`fedforest.metrics` and :mod:`fedforest.columns` (how a
  table's columns are read);
* :mod:`fedforest.model` -- the pooled forest, imputers, surrogate splits and
  their payloads and files;
* :mod:`fedforest.prediction` -- prediction with missing splits;
* :mod:`fedforest.election` (selectors, the election, its tuning) and
  :mod:`fedforest.privacy` (a site's privacy policy and its transforms),
  which never import each other;
* :mod:`fedforest.federation` -- the federation protocol of site and server:
  schema, configuration, data files, training, evaluation, site and server;
* :mod:`fedforest.flare` (the NVIDIA FLARE adapter) and
  :mod:`fedforest.experiments` (the paper's protocol, reports and plots);
* :mod:`fedforest.cli` -- the ``fedforest`` command.

Only :mod:`fedforest.flare` imports NVIDIA FLARE, and only
:mod:`fedforest.experiments` plots. See ``docs/architecture.md``.
"""

from .errors import ConfigError, PayloadError, SchemaError
from .metrics import score, score_all
from .model.forest import PooledForest
from .model.imputers import Imputer, ImputerSet, fit_imputers
from .model.surrogates import fit_surrogates
from .prediction.classifier import PooledForestClassifier, select_strategy
from .prediction.diagnostics import PredictionDiagnostics
from .prediction.regressor import PooledForestRegressor
from .prediction.survival import PooledForestSurvival
from .rules import strategies as _strategies

#: The missing-split strategies of the pooled forest (the built-in rules, :mod:`fedforest.rules`).
STRATEGIES = _strategies()

__version__ = "0.1.0"

__all__ = [
    "STRATEGIES",
    "ConfigError",
    "Imputer",
    "ImputerSet",
    "PayloadError",
    "PooledForest",
    "PooledForestClassifier",
    "PooledForestRegressor",
    "PooledForestSurvival",
    "PredictionDiagnostics",
    "SchemaError",
    "fit_imputers",
    "fit_surrogates",
    "score",
    "score_all",
    "select_strategy",
    "__version__",
]
