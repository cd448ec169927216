"""The synthetic datasets S-500-Num/Cat/Mix and the make_synthetic script."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_score

from fedforest.experiments.synthetic import (
    DATASET_TASKS,
    DATASETS,
    REGRESSION_DATASETS,
    SCALE,
    load_dataset,
    make_friedman,
    make_synthetic,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "data_prep"))

from make_synthetic import main as synthetic_main  # noqa: E402


def numeric(X: pd.DataFrame, categorical: list[str]) -> list[str]:
    return [c for c in X.columns if c not in categorical]


@pytest.mark.parametrize("kind, n_num, n_cat", [("num", 16, 0), ("cat", 0, 16), ("mix", 8, 8)])
def test_shapes_and_kinds(kind, n_num, n_cat):
    X, y, categorical = make_synthetic(kind, random_state=0)
    assert X.shape == (500, 16) and y.shape == (500,)
    assert y.dtype.kind == "i" and set(np.unique(y)) == {0, 1}
    nums = numeric(X, categorical)
    assert nums == [f"num_{i:02d}" for i in range(1, n_num + 1)]
    assert categorical == [f"cat_{i:02d}" for i in range(1, n_cat + 1)]
    assert list(X.columns) == nums + categorical
    for col in nums:
        assert X[col].dtype.kind == "f"
        assert abs(X[col].mean()) < 0.2 and 0.8 < X[col].std() < 1.2
    for col in categorical:
        assert X[col].dtype.kind == "i"
        levels = np.unique(X[col])
        assert 2 <= len(levels) <= 5
        assert np.array_equal(levels, np.arange(len(levels)))  # codes 0..K-1, all used


def test_level_counts_vary_and_values_uniform():
    X, _, categorical = make_synthetic("cat", n_rows=4000, random_state=1)
    ks = [X[c].nunique() for c in categorical]
    assert len(set(ks)) >= 3  # K drawn per feature from {2, 3, 4, 5}
    for col, k in zip(categorical, ks, strict=True):
        shares = X[col].value_counts(normalize=True)
        assert np.all(np.abs(shares - 1 / k) < 0.04)


def test_odd_mix_and_validation():
    X, _, categorical = make_synthetic("mix", n_rows=50, n_features=5, random_state=0)
    assert len(categorical) == 2 and X.shape == (50, 5)
    with pytest.raises(ValueError, match="kind"):
        make_synthetic("text")
    with pytest.raises(ValueError, match="n_rows"):
        make_synthetic("num", n_rows=1)
    with pytest.raises(ValueError, match="n_features"):
        make_synthetic("mix", n_features=1)
    with pytest.raises(ValueError, match="scale"):
        make_synthetic("num", scale=-1.0)


@pytest.mark.parametrize("kind", ["num", "cat", "mix"])
def test_reproducible(kind):
    X1, y1, c1 = make_synthetic(kind, random_state=42)
    X2, y2, c2 = make_synthetic(kind, random_state=np.random.default_rng(42))
    X3, y3, _ = make_synthetic(kind, random_state=43)
    pd.testing.assert_frame_equal(X1, X2)
    assert np.array_equal(y1, y2) and c1 == c2
    assert not X1.equals(X3)


@pytest.mark.parametrize("name", list(DATASETS))
def test_datasets_balanced(name):
    X, y, categorical = load_dataset(name)
    assert X.shape == (500, 16)
    minority = min(y.mean(), 1 - y.mean())
    assert minority > 0.4
    X2, y2, _ = load_dataset(name)
    pd.testing.assert_frame_equal(X, X2)
    assert np.array_equal(y, y2)


def test_load_dataset_unknown_names_known():
    with pytest.raises(ValueError, match="S-500-Num, S-500-Cat, S-500-Mix, F-500-Num, F-500-Mix"):
        load_dataset("S-500-Text")


# ---------------------------------------------------------------- regression: Friedman #1


def friedman_signal(X: pd.DataFrame, categorical: list[str]) -> np.ndarray:
    """Friedman #1 of the informative columns: the first three numeric ones, then the next
    two numeric ones or the first two categorical ones (a level gives its midpoint)."""
    nums = [X[c].to_numpy(dtype=float) for c in numeric(X, categorical)]
    if categorical:
        codes = [X[c].to_numpy() for c in categorical[:2]]
        last = [(k + 0.5) / (k.max() + 1) for k in codes]  # every level occurs
    else:
        last = nums[3:5]
    x1, x2, x3, x4, x5 = *nums[:3], *last
    return 10 * np.sin(np.pi * x1 * x2) + 20 * (x3 - 0.5) ** 2 + 10 * x4 + 5 * x5


@pytest.mark.parametrize("name, n_cat", [("F-500-Num", 0), ("F-500-Mix", 8)])
def test_friedman_datasets_are_regression_tables_of_five_informative_columns(name, n_cat):
    assert DATASET_TASKS[name] == "regression" and name in REGRESSION_DATASETS
    assert all(DATASET_TASKS[n] == "classification" for n in DATASETS)
    X, y, categorical = load_dataset(name)
    assert X.shape == (500, 16) and y.shape == (500,) and y.dtype.kind == "f"
    assert len(categorical) == n_cat and list(X.columns)[16 - n_cat :] == categorical
    for col in categorical:
        levels = np.unique(X[col])
        assert 3 <= len(levels) <= 5 and np.array_equal(levels, np.arange(len(levels)))
    nums = numeric(X, categorical)
    assert ((X[nums] >= 0) & (X[nums] < 1)).all().all()
    # the target is Friedman #1 of the informative columns plus noise of sd 1
    residual = y - friedman_signal(X, categorical)
    assert abs(residual.mean()) < 0.15 and 0.9 < residual.std() < 1.1
    assert 4 < y.std() < 6
    X2, y2, _ = load_dataset(name)
    pd.testing.assert_frame_equal(X, X2)
    assert np.array_equal(y, y2)
    X3, y3, _ = load_dataset(name, random_state=1)
    assert not np.array_equal(y, y3)


def test_only_the_informative_columns_carry_the_signal():
    from sklearn.ensemble import RandomForestRegressor

    X, y, _ = make_friedman("num", n_rows=1000, random_state=2)
    rf = RandomForestRegressor(n_estimators=40, random_state=0, n_jobs=1).fit(X, y)
    importance = pd.Series(rf.feature_importances_, index=X.columns)
    assert set(importance.nlargest(5).index) == {f"num_0{i}" for i in range(1, 6)}
    assert importance.iloc[5:].max() < 0.02


def test_make_friedman_validation_and_no_noise():
    X, y, cat = make_friedman("mix", n_rows=50, n_features=5, random_state=0, noise=0)
    assert list(X.columns) == ["num_01", "num_02", "num_03", "cat_01", "cat_02"]
    assert np.allclose(y, friedman_signal(X, cat))
    for kwargs, message in [
        (dict(kind="cat"), "kind must be one of num, mix"),
        (dict(kind="num", n_features=4), "n_features must be an integer >= 5"),
        (dict(kind="num", n_rows=1), "n_rows"),
        (dict(kind="num", noise=-1.0), "noise must be a finite number >= 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            make_friedman(**kwargs)


def univariate_auc(x: pd.Series, y: np.ndarray, is_categorical: bool) -> float:
    """AUC of the best univariate score: the value itself, or the level's positive rate."""
    score = pd.Series(y).groupby(x.to_numpy()).transform("mean") if is_categorical else x
    auc = roc_auc_score(y, score)
    return max(auc, 1 - auc)


@pytest.mark.parametrize("kind", ["num", "cat", "mix"])
def test_features_equally_informative(kind):
    # many rows so that the per-feature estimate is precise (sd ~ 0.01)
    X, y, categorical = make_synthetic(kind, n_rows=5000, random_state=3)
    aucs = {c: univariate_auc(X[c], y, c in categorical) for c in X.columns}
    values = np.array(list(aucs.values()))
    assert np.all((values > 0.55) & (values < 0.7)), aucs
    assert values.max() - values.min() < 0.08, aucs
    if kind == "mix":  # numeric and categorical features carry as much on average
        num = np.mean([aucs[c] for c in numeric(X, categorical)])
        cat = np.mean([aucs[c] for c in categorical])
        assert abs(num - cat) < 0.03


@pytest.mark.parametrize("name", list(DATASETS))
def test_random_forest_learns_it(name):
    X, y, _ = load_dataset(name)
    rf = RandomForestClassifier(n_estimators=150, random_state=0, n_jobs=1)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    auc = cross_val_score(rf, X, y, cv=cv, scoring="roc_auc").mean()
    assert 0.8 < auc < 0.99, auc


def test_scale_controls_noise():
    """A larger scale gives a cleaner target (the signal's AUC grows)."""
    aucs = []
    for scale in (1.0, SCALE):
        X, y, _ = make_synthetic("num", n_rows=4000, random_state=0, scale=scale)
        # same seed: same columns, only the target changes; score = sum(sign(corr) * x)
        signs = np.sign([np.corrcoef(X[c], y)[0, 1] for c in X.columns])
        aucs.append(roc_auc_score(y, X.to_numpy() @ signs))
    assert aucs[0] < 0.8 < aucs[1]


def test_make_synthetic_script(tmp_path, capsys):
    out = tmp_path / "data" / "s500mix.csv"
    path, categorical = synthetic_main(["--dataset", "S-500-Mix", "--out", str(out)])
    assert path == out and out.is_file()
    printed = capsys.readouterr().out
    assert "categorical columns: " + ",".join(categorical) in printed
    frame = pd.read_csv(out)
    X, y, cats = load_dataset("S-500-Mix", random_state=0)
    assert cats == categorical and len(categorical) == 8
    assert list(frame.columns) == [*X.columns, "target"]
    assert np.array_equal(frame["target"].to_numpy(), y)
    for col in categorical:
        assert frame[col].dtype.kind == "i"
        assert np.array_equal(frame[col].to_numpy(), X[col].to_numpy())
    np.testing.assert_allclose(frame["num_01"], X["num_01"])

    synthetic_main(["--dataset", "S-500-Num", "--out", str(tmp_path / "n.csv"), "--seed", "4"])
    assert "categorical columns: (none)" in capsys.readouterr().out
    other = pd.read_csv(tmp_path / "n.csv")
    assert other.shape == (500, 17)
    with pytest.raises(SystemExit):
        synthetic_main(["--dataset", "S-9", "--out", str(tmp_path / "x.csv")])


def test_script_output_feeds_jaccard_split(tmp_path):
    from jaccard_split import main as split_main

    from fedforest.federation.config import JobConfig, SiteConfig
    from fedforest.federation.tables import check_data

    csv = tmp_path / "s500cat.csv"
    _, categorical = synthetic_main(["--dataset", "S-500-Cat", "--out", str(csv)])
    info = split_main(
        [str(csv), "--target", "target", "--sites", "6", "--jaccard", "0.3"]
        + ["--out", str(tmp_path / "split"), "--categorical", ",".join(categorical)]
    )
    assert abs(info["jaccard"] - 0.3) <= 0.1
    job = JobConfig.load(tmp_path / "split" / "site_configs" / "job.yaml")
    assert job.name == "s500cat-6sites-j30"
    for site in job.sites:
        cfg = SiteConfig.load(tmp_path / "split" / "site_configs" / f"{site}.yaml")
        columns = check_data(cfg)
        assert cfg.categorical == [c for c in columns if c != "target"]
