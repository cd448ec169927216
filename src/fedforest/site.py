"""Everything a hospital does in a job, without FLARE.

:class:`SiteRunner` holds one site's table and serves the phases of the job:
describe the table, vote on features, score proposed masks, train (forest,
surrogate splits, imputers, standard deviations, optional intersection
forest) and evaluate the pooled model on held-out rows. Every method takes and
returns plain payloads, so the FLARE executor only moves them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from .classifier import PooledForestClassifier
from .config import SiteConfig
from .election_offline import site_vote, split_validation
from .forest import PooledForest
from .imputers import ImputerSet, fit_imputers
from .metrics import score_all
from .model_io import read_model, save_payload
from .schema import GlobalSchema, SiteSchema, normalize_labels
from .strategies import STRATEGIES
from .surrogates import fit_surrogates
from .tuning import score_mask

logger = logging.getLogger(__name__)


class SiteRunner:
    """One site's side of the job.

    Parameters
    ----------
    config : SiteConfig
        The site's validated configuration.
    random_state : int
        The job seed; every split, forest and selector derives from it.
    """

    def __init__(self, config: SiteConfig, random_state: int = 0):
        self.config = config
        self.random_state = random_state
        self.frame: pd.DataFrame | None = None
        self.schema: GlobalSchema | None = None

    @property
    def site(self) -> str:
        return self.config.site

    # ------------------------------------------------------------- phase 1
    def load(self) -> SiteRunner:
        """Read the site's CSV (renamed to global names) after checking it."""
        self.config.check_data()
        frame = pd.read_csv(self.config.data_path).rename(columns=self.config.renames)
        if frame.shape[0] < 10:
            raise ValueError(
                f"{self.config.source}: data file {self.config.data_path} has {frame.shape[0]} "
                "rows; at least 10 are needed to train, validate and test"
            )
        self.frame = frame
        logger.info(
            "site %s: loaded %d rows, %d columns from %s",
            self.site,
            frame.shape[0],
            frame.shape[1],
            self.config.data_path,
        )
        return self

    def describe(self) -> dict:
        """Phase 1: the site's schema payload (column names, kinds, levels, classes, rows)."""
        if self.frame is None:
            self.load()
        return SiteSchema.from_frame(
            self.site, self.frame, self.config.target, self.config.categorical
        ).to_payload()

    def set_schema(self, payload: Mapping) -> None:
        """Receive the global schema; encode the table and split it."""
        self.schema = GlobalSchema.from_payload(payload, sender="server")
        if self.site not in self.schema.site_columns:
            raise ValueError(f"the global schema does not list site {self.site!r}")
        X = self.schema.encode(self.frame, self.schema.site_columns[self.site])
        y = normalize_labels(self.frame[self.config.target])
        rest_X, self.X_test, rest_y, self.y_test = split_validation(
            X, y, self.config.test_fraction, self.random_state
        )
        val_share = self.config.validation_fraction / (1 - self.config.test_fraction)
        self.X_train, self.X_val, self.y_train, self.y_val = split_validation(
            rest_X, rest_y, val_share, self.random_state
        )
        logger.info(
            "site %s: %d train, %d validation, %d test rows",
            self.site,
            len(self.X_train),
            len(self.X_val),
            len(self.X_test),
        )

    @property
    def columns(self) -> list[str]:
        return list(self.schema.site_columns[self.site])

    # ------------------------------------------------------------- phase 2
    def vote(self) -> dict:
        """Phase 2: run the local selector; mask and scores keyed by global index."""
        vote = site_vote(
            self.site,
            self.X_train,
            self.y_train,
            self.config.selector,
            list(self.schema.categories),
            self.config.selector_params,
            self.random_state,
        )
        index = {f: i for i, f in enumerate(self.schema.features)}
        return vote.to_payload(index)

    def score_mask(self, features: Sequence[str], metric: str) -> dict:
        """Phase 2 (tuning): score a proposed mask on the validation rows."""
        value = score_mask(
            self.X_train,
            self.y_train,
            self.X_val,
            self.y_val,
            list(features),
            self.schema.classes,
            metric,
            random_state=self.random_state,
        )
        return {"score": float(value), "n_rows": int(len(self.X_val))}

    # ------------------------------------------------------------- phase 3
    def elected_columns(self, elected: Sequence[str]) -> tuple[list[str], list[str]]:
        """The site's elected columns, and the elected shared ones."""
        own = [c for c in self.columns if c in set(elected)]
        shared = [c for c in self.schema.shared if c in set(elected)]
        return own, shared

    def train(
        self,
        elected: Sequence[str],
        forest_params: Mapping[str, Any],
        surrogate_params: Mapping[str, Any],
        intersection: bool,
    ) -> dict:
        """Phase 3: forest, surrogates, imputers, std (+ intersection forest) as payloads."""
        own, shared = self.elected_columns(elected)
        if not own:
            raise ValueError(f"site {self.site!r} has none of the elected features {list(elected)}")
        models = fit_site_models(
            self.site,
            self.X_train,
            self.y_train,
            own,
            shared,
            self.schema.categories,
            forest_params,
            surrogate_params,
            self.random_state,
            # the classic baseline: every column all sites have, whatever the election kept
            intersection_columns=list(self.schema.shared) if intersection else None,
        )
        out = {
            "forest": models.forest.to_payload(),
            "imputers": models.imputers.to_payload(),
            "feature_std": models.feature_std,
            "n_rows": int(len(self.X_train)),
        }
        if models.intersection is not None:
            out["intersection"] = models.intersection.to_payload()
        return out

    # ------------------------------------------------------------- phase 4
    def evaluate(
        self,
        model: Mapping,
        strategies: Sequence[str],
        voting: str = "soft",
        depth_threshold: int = 2,
        metrics: Sequence[str] = ("auprc", "auc", "mcc", "accuracy"),
        auto_metric: str = "auprc",
        save_dir: str | Path | None = None,
    ) -> dict:
        """Phase 4: score every requested strategy on the held-out test rows.

        Returns
        -------
        dict
            ``{"rows": n, "strategies": {name: {metric: value, ...}}}``; ``auto``
            also names the strategy it chose.
        """
        parts = read_model(model, sender="server")
        results = evaluate_strategies(
            parts["forest"],
            parts["imputers"],
            parts["feature_std"],
            parts["intersection"],
            self.X_test,
            self.y_test,
            self.schema.classes,
            strategies,
            site=self.site,
            voting=voting,
            depth_threshold=depth_threshold,
            metrics=metrics,
            auto_metric=auto_metric,
            X_val=self.X_val,
            y_val=self.y_val,
            random_state=self.random_state,
        )
        out = {"site": self.site, "rows": int(len(self.X_test)), "strategies": results}
        if save_dir is not None:
            save_dir = Path(save_dir)
            save_dir.mkdir(parents=True, exist_ok=True)
            save_payload(save_dir / "pooled_model.npz", model)
            (save_dir / "metrics.json").write_text(json.dumps(out, indent=2) + "\n")
            logger.info("site %s: saved the pooled model and metrics in %s", self.site, save_dir)
        return out


def _on_classes(proba: np.ndarray, have, classes: np.ndarray) -> np.ndarray:
    """Place probability columns for ``have`` into the global ``classes`` order."""
    out = np.zeros((proba.shape[0], len(classes)))
    out[:, np.searchsorted(classes, np.asarray(have))] = proba
    return out


def _finite(value) -> float | None:
    return float(value) if np.isfinite(value) else None


@dataclass
class SiteModels:
    """What one site trains: its forest (with surrogates), imputers, std, baseline."""

    forest: PooledForest
    imputers: ImputerSet
    feature_std: dict[str, float]
    intersection: PooledForest | None


def fit_site_models(
    site: str,
    X_train: pd.DataFrame,
    y_train,
    own: Sequence[str],
    shared: Sequence[str],
    categories: Mapping[str, Sequence[str]],
    forest_params: Mapping[str, Any],
    surrogate_params: Mapping[str, Any] | None = None,
    random_state=0,
    intersection_columns: Sequence[str] | None = None,
    imputer_cv: int | None = 3,
) -> SiteModels:
    """Train a site's forest on ``own`` columns, with surrogates, imputers and std.

    Surrogate splits and imputers are fitted for the private columns (``own``
    minus ``shared``) from the ``shared`` ones. With ``intersection_columns``
    a second forest on those columns is trained as the intersection baseline.
    ``imputer_cv`` is passed to :func:`fedforest.fit_imputers` (``None`` when
    no other site can impute the same columns, so scores need no CV).
    """
    own, shared = list(own), [c for c in shared if c in own]
    cats = {c: list(categories[c]) for c in own if c in categories}
    X = X_train[own]
    rf = RandomForestClassifier(**forest_params, random_state=random_state, n_jobs=1)
    rf.fit(X.to_numpy(dtype=np.float32), y_train)
    forest = PooledForest.from_sklearn(rf, own, owner=site, X=X, categories=cats)
    private = [c for c in own if c not in shared]
    imputers = ImputerSet([])
    if shared and private:
        forest = fit_surrogates(forest, X, shared, **(surrogate_params or {}))
        imputers = fit_imputers(
            X,
            private,
            shared,
            categories=cats,
            owner=site,
            cv=imputer_cv,
            random_state=random_state,
        )
    numeric = [c for c in own if c not in cats]
    std = X[numeric].std(ddof=0).fillna(0.0)
    inter = None
    if intersection_columns:
        common = list(intersection_columns)
        Xc = X_train[common]
        rf_i = RandomForestClassifier(**forest_params, random_state=random_state, n_jobs=1)
        rf_i.fit(Xc.to_numpy(dtype=np.float32), y_train)
        inter = PooledForest.from_sklearn(
            rf_i,
            common,
            owner=site,
            X=Xc,
            categories={c: list(categories[c]) for c in common if c in categories},
        )
    logger.info(
        "site %s: trained %d trees on %d columns (%d private), %d imputers",
        site,
        forest.n_trees,
        len(own),
        len(private),
        len(imputers),
    )
    return SiteModels(forest, imputers, {c: float(v) for c, v in std.items()}, inter)


def pool_site_models(models: Sequence[SiteModels]) -> SiteModels:
    """Pool what the sites trained: all trees, the best imputer per feature, the mean std.

    σ_f is the mean of the standard deviations of ``f`` over the sites that
    have it; intersection forests are pooled too when the sites trained them.
    """
    models = list(models)
    forest = PooledForest.concat([m.forest for m in models])
    imputers = ImputerSet.select([m.imputers for m in models])
    feature_std = {}
    for name in forest.feature_names:
        values = [m.feature_std[name] for m in models if name in m.feature_std]
        if values:
            feature_std[name] = float(np.mean(values))
    inters = [m.intersection for m in models if m.intersection is not None]
    intersection = PooledForest.concat(inters) if inters else None
    return SiteModels(forest, imputers, feature_std, intersection)


def evaluate_strategies(
    forest: PooledForest,
    imputers: ImputerSet | None,
    feature_std: Mapping[str, float],
    intersection: PooledForest | None,
    X_test: pd.DataFrame,
    y_test,
    classes,
    strategies: Sequence[str],
    site: str | None = None,
    voting: str = "soft",
    depth_threshold: int = 2,
    metrics: Sequence[str] = ("auprc", "auc", "mcc", "accuracy"),
    auto_metric: str = "auprc",
    X_val: pd.DataFrame | None = None,
    y_val=None,
    random_state=0,
) -> dict[str, dict]:
    """Score strategies on a site's test rows.

    ``X_test`` holds the site's columns (those the forest does not know are
    ignored). ``intersection`` scores the intersection forest; ``auto`` chooses
    on ``X_val``, ``y_val``. Returns ``{strategy: {metric: value, ..., "rows",
    "mean_trees_kept", "fallback_rows"}}``.
    """
    classes = np.asarray(classes)
    cols = [c for c in X_test.columns if c in forest.feature_names]
    common = dict(
        imputers=imputers,
        feature_std=feature_std,
        voting=voting,
        depth_threshold=depth_threshold,
        site=site,
        random_state=random_state,
    )
    results: dict[str, dict] = {}
    for strategy in strategies:
        extra: dict[str, Any] = {}
        X_use = X_test[cols]
        if strategy == "intersection":
            if intersection is None:
                raise ValueError("there is no intersection forest to evaluate")
            clf = PooledForestClassifier(
                intersection, strategy="fpv", voting=voting, random_state=random_state
            )
            X_use = X_test[[c for c in intersection.feature_names if c in X_test.columns]]
        elif strategy == "auto":
            if X_val is None or y_val is None:
                raise ValueError("strategy 'auto' needs validation rows")
            candidates = [
                s for s in STRATEGIES if s not in ("park", "local") or site in forest.owners
            ]
            clf = PooledForestClassifier(
                forest,
                strategy="auto",
                auto_metric=auto_metric,
                auto_candidates=candidates,
                **common,
            )
            clf.fit(X_val[cols], y_val)
            extra = {
                "chosen": clf.strategy_,
                "validation": {k: _finite(v) for k, v in clf.selection_scores_.items()},
            }
        else:
            clf = PooledForestClassifier(forest, strategy=strategy, **common)
        proba = _on_classes(clf.predict_proba(X_use), clf.classes_, classes)
        row = {k: _finite(v) for k, v in score_all(y_test, proba, classes, metrics).items()}
        diag = clf.diagnostics_
        row.update(
            rows=int(len(X_use)),
            mean_trees_kept=float(np.mean(diag.trees_kept)),
            fallback_rows=int(diag.n_fallback),
            **extra,
        )
        results[strategy] = row
        logger.info(
            "site %s: %s %s",
            site,
            strategy,
            ", ".join(f"{m}={row[m]:.3f}" for m in metrics if row[m] is not None),
        )
    return results
