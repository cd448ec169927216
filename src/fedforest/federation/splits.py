"""Splitting a site's rows into training, validation and test rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split


def split_validation(X: pd.DataFrame, y, fraction: float, random_state=None):
    """Stratified split off ``fraction`` of the rows (plain split when a class is too rare)."""
    y = np.asarray(y)
    _, counts = np.unique(y, return_counts=True)
    stratify = y if counts.min() >= 2 else None
    return train_test_split(X, y, test_size=fraction, stratify=stratify, random_state=random_state)
