"""fedforest: random forests pooled across sites with different columns.

The core (everything outside :mod:`fedforest.flare`) needs no NVIDIA FLARE.
"""

from .classifier import PooledForestClassifier, PredictionDiagnostics
from .errors import ConfigError, PayloadError
from .forest import PooledForest
from .imputers import Imputer, ImputerSet, fit_imputers
from .metrics import score, score_all
from .selection import select_strategy
from .strategies import STRATEGIES
from .surrogates import fit_surrogates

__version__ = "0.1.0"

__all__ = [
    "STRATEGIES",
    "ConfigError",
    "Imputer",
    "ImputerSet",
    "PayloadError",
    "PooledForest",
    "PooledForestClassifier",
    "PredictionDiagnostics",
    "fit_imputers",
    "fit_surrogates",
    "score",
    "score_all",
    "select_strategy",
    "__version__",
]
