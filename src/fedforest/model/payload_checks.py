"""Size limits of received payloads, and class labels as payload values.

The field-by-field reader every ``from_payload`` uses is
:class:`fedforest.validation.PayloadReader`; the limits below bound what a
sender can make a receiver allocate.
"""

from __future__ import annotations

import numpy as np

MAX_TREES = 100_000
MAX_NODES = 50_000_000
MAX_FEATURES = 100_000
MAX_CLASSES = 10_000
MAX_LEVELS = 10_000
#: Points of a survival forest's time grid.
MAX_TIMES = 10_000
#: ``n_node_samples`` travels as int32.
MAX_NODE_SAMPLES = 2**31 - 1
#: Training rows a site may report (``n_rows``, ``n_train``).
MAX_ROWS = 2**62
#: Largest seed (payloads, the job configuration, the command line): numpy and
#: scikit-learn take seeds in [0, 2**32 - 1].
MAX_SEED = 2**32 - 1


def plain_labels(values) -> list:
    """Class labels as plain Python values (str or int) for a payload."""
    out = []
    for v in np.asarray(values).tolist():
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise TypeError(
                f"class label {v!r} of type {type(v).__name__} cannot travel in a payload; "
                "use string or integer class labels"
            )
        out.append(v)
    return out
