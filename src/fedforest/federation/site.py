"""Everything a hospital does in a job, without FLARE.

:class:`SiteRunner` holds one site's table and serves the tasks of the job
(:data:`fedforest.protocol.TASKS`): describe the table, vote on features, score
proposed masks, train (forest, surrogate splits, imputers, standard deviations,
optional intersection forest) and evaluate the pooled model on held-out rows.
:meth:`SiteRunner.run_task` dispatches a task's data to its handler through a
table; every handler takes and returns plain payloads, so the FLARE executor
only moves them.

**Privacy.** The site applies its effective
:class:`~fedforest.privacy.policy.PrivacyPolicy`
(:meth:`~fedforest.federation.config.SiteConfig.privacy_policy`: the stricter
of the hospital's ``local/fedforest.yaml`` and the job's site YAML) to
everything it sends. It is checked against the table and logged when the site
starts (:meth:`SiteRunner.load`), and returned in the metrics reply
(``privacy``), so the server records it in ``results.json`` and ``report.md``.

* schema: levels with fewer than ``min_level_rows`` rows are rewritten as
  ``(other)`` in the whole table before it is described
  (:func:`~fedforest.privacy.levels.hide_rare_levels`), so the validation
  and test rows are encoded the same way; :attr:`SiteRunner.hidden` stays at
  the site and :meth:`SiteRunner.hide` applies it to any later table. The
  schema still sends column names, the remaining levels, the classes and the
  row count (DP mode included: they are not covered by ``dp_epsilon``);
* train: :func:`~fedforest.federation.training.fit_site_models` with the
  policy (``min_samples_leaf`` raised to ``min_leaf_rows``, ``prepare_forest``,
  ``share`` switches, DP trees);
* DP mode, election: the vote uses the ``none`` selector (every column kept,
  equal scores, so no data-dependent selection leaves the site) and every
  mask score is the constant :data:`DP_MASK_SCORE` with the site's validation
  row count (public: it follows from the schema's row count and the split
  fractions). A constant adds the same term to the server's weighted mean of
  every mask, so it never changes which mask scores better; it only scales
  the differences between masks, and with them the weight of
  ``election.tolerance``, by the other sites' share of the validation rows;
* the evaluation metrics are computed on the site's test rows as before: no
  policy key covers them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import protocol
from ..columns import normalize_labels
from ..election.ballot import SiteVote
from ..election.selectors import select_features
from ..election.tuning import score_mask
from ..errors import ConfigError, PayloadError
from ..model.in_bag import InBagRecord
from ..model.model_files import save_payload
from ..model.pooled_model import Deployment, PooledModel
from ..model.site_inputs import SiteInputs
from ..prediction.out_of_bag import InBag
from ..privacy.levels import hide_levels, hide_rare_levels
from ..privacy.outgoing import DP_MASK_SCORE
from ..privacy.policy import PrivacyPolicy
from ..validation import PayloadReader
from ..vocabulary import DEFAULT_AUTO_METRIC, METRICS
from .config import JobConfig, SiteConfig, check_job_against_sites
from .config_survival import event_time_resolution
from .evaluation import evaluate_strategies
from .messages import read_message
from .model_input import model_input, site_inputs
from .schema import GlobalSchema, SiteSchema
from .site_rules import check_site_table
from .splits import split_site_rows
from .tables import TableSummary, check_table, read_table
from .time_grid import MAX_HORIZONS, check_grid, site_time_quantiles
from .training import fit_site_models

logger = logging.getLogger(__name__)


def site_vote(
    site: str,
    X: pd.DataFrame,
    y,
    method: str,
    categorical: Sequence[str] = (),
    params: Mapping | None = None,
    random_state=None,
    task: str = "classification",
) -> SiteVote:
    """Run a site's selector on its encoded training rows and wrap the result."""
    if task != "survival" and pd.Series(y).nunique() < 2:
        what = "value" if task == "regression" else "class"
        raise ValueError(
            f"site {site!r}: the target has a single {what} ({pd.Series(y).iloc[0]!r}); a site "
            f"needs at least two {what}s to select features"
        )
    sel = select_features(
        X,
        y,
        method,
        categorical=[c for c in categorical if c in X.columns],
        params=params,
        random_state=random_state,
        task=task,
    )
    logger.info(
        "site %s: %s kept %d of %d columns", site, method, int(sel.mask.sum()), len(sel.features)
    )
    return SiteVote(site, sel.features, sel.mask, sel.scores, int(len(X)))


def deployment(fitted: Mapping, inputs: SiteInputs | None = None) -> Deployment | None:
    """What a site deploys: the strategy and calibrator ``auto`` chose for it, and its
    input mapping ``inputs``.

    ``fitted`` maps each evaluated strategy to its fitted classifier
    (:func:`~fedforest.federation.evaluation.evaluate_strategies`). Without
    ``auto`` the job chose nothing: the deployment holds the input mapping only
    (``None`` without one either).
    """
    clf = fitted.get("auto")
    if clf is None:
        return None if inputs is None else Deployment(inputs.site, inputs=inputs)
    calibrator = getattr(clf, "calibrator_", None)  # a regressor has none
    return Deployment(clf.site, clf.strategy_, calibrator, inputs=inputs)


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
        #: The validation mode of the split (``oob`` or ``holdout``; set by :meth:`set_schema`).
        self.validation: str | None = None
        #: The effective privacy policy (checked against the table by :meth:`load`).
        self.policy: PrivacyPolicy = config.privacy_policy()
        #: The category levels hidden as ``(other)``: ``{column: [levels]}``, never sent.
        self.hidden: dict[str, list[str]] = {}
        #: Which training rows each tree the site sent trained on (its forest's and its
        #: intersection forest's :class:`~fedforest.model.in_bag.InBagRecord`), set by
        #: :meth:`train`; never sent.
        self.in_bag: tuple[InBagRecord | None, InBagRecord | None] | None = None
        self._handlers = {
            protocol.SCHEMA: self._task_schema,
            protocol.VOTE: self._task_vote,
            protocol.SCORE_MASK: self._task_score_mask,
            protocol.TRAIN: self._task_train,
            protocol.EVALUATE: self._task_evaluate,
        }

    # --------------------------------------------------------- dispatch
    def run_task(self, task: str, data: Mapping, save_dir: str | Path | None = None) -> dict:
        """Serve one task of the job: check its data and call its handler.

        Parameters
        ----------
        task : str
            One of :data:`fedforest.protocol.TASKS`.
        data : mapping
            The task's data, with exactly the keys of
            :data:`fedforest.protocol.TASK_DATA` (``task``).
        save_dir : path, optional
            Where ``evaluate`` saves the pooled model and the site's metrics.

        Raises
        ------
        KeyError
            If ``task`` is unknown.
        fedforest.PayloadError
            If the task data lack a key or carry unknown ones.
        """
        if task not in self._handlers:
            raise KeyError(f"unknown task {task!r}; tasks are {list(protocol.TASKS)}")
        if not isinstance(data, Mapping):
            raise PayloadError(f"task {task!r} carries no data dict", sender="server")
        expected = set(protocol.TASK_DATA[task])
        if set(data) != expected:
            raise PayloadError(
                f"task {task!r} carries keys {sorted(map(str, data))}, expected {sorted(expected)}",
                sender="server",
            )
        return self._handlers[task](data, save_dir)

    def _task_schema(self, data, save_dir):
        reader = PayloadReader(data, None, sender="server", where=f"task {protocol.SCHEMA!r}")
        self.random_state = reader.read_integer("seed", 0, 2**32 - 1)
        quantiles = data["time_quantiles"]
        if not isinstance(quantiles, bool) or (quantiles and not self.survival):
            raise PayloadError(
                f"task {protocol.SCHEMA!r}: field 'time_quantiles' is {quantiles!r}; allowed: "
                "true (a survival job agreeing its time grid) or false",
                sender="server",
            )
        return self.describe(time_quantiles=quantiles)

    def _task_vote(self, data, save_dir):
        self.set_schema(data["schema"])
        return self.vote() if data["vote"] else {}

    def _task_score_mask(self, data, save_dir):
        return self.score_mask(data["features"], data["metric"])

    def _task_train(self, data, save_dir):
        return self.train(data["elected"], data["forest"], data["surrogates"], data["intersection"])

    def _task_evaluate(self, data, save_dir):
        """The metrics reply, with the validation mode of the site's split (``validation``)."""
        return self._with_validation(
            save_dir,
            self.evaluate(
                data["model"],
                data["strategies"],
                data["voting"],
                data["depth_threshold"],
                data["metrics"],
                data["auto_metric"],
                calibration=data["calibration"],
                save_dir=save_dir,
                horizons=data["horizons"],
            ),
        )

    def _with_validation(self, save_dir, metrics: dict) -> dict:
        """A metrics reply saying which validation mode the site's split used (``validation``),
        also in the ``metrics.json`` saved in ``save_dir``."""
        if "validation" in metrics:
            return metrics
        out = {**metrics, "validation": self.validation}
        saved = None if save_dir is None else Path(save_dir) / "metrics.json"
        if saved is not None and saved.is_file():
            saved.write_text(json.dumps(out, indent=2) + "\n")
        return out

    @property
    def site(self) -> str:
        return self.config.site

    # ------------------------------------------------------------- phase 1
    def load(self, frame: pd.DataFrame | None = None, job: JobConfig | None = None) -> SiteRunner:
        """Read the site's CSV after checking it: global names, ``label_map`` applied.

        Every rule of :func:`~fedforest.federation.tables.read_table` applies (the same checks as
        when the job is built). ``frame`` gives the table directly instead
        (``fedforest elect`` on tables already in memory); it is checked,
        trimmed of ``drop_columns`` and renamed the same way. With ``job``, the
        job's settings are checked against this site's table
        (:func:`check_job_against_sites`: ``forest.min_samples_leaf`` and an
        integer ``forest.max_features``).

        The effective privacy policy is checked against the table
        (:meth:`SiteConfig.check_privacy`) and logged, and the levels rarer
        than its ``min_level_rows`` are hidden in the whole table (so in the
        training, validation and test rows alike) before anything is described.

        Raises
        ------
        fedforest.ConfigError
            Naming the site's YAML (or the privacy policy's files), the data
            file, the column or line, the bad value and what is allowed.
        """
        if frame is None:
            frame = read_table(self.config)
        else:
            frame = check_table(self.config, frame)
        if job is not None:
            check_job_against_sites(job, {self.site: self.config}, {self.site: frame})
        else:  # the site's own keys against its table (server mode: no job file here)
            summary = TableSummary.of(frame, self.config.target)
            check_site_table(None, self.config, summary, self.random_state)
        self.policy = self.config.check_privacy(frame)
        try:
            frame, self.hidden = hide_rare_levels(
                frame,
                self.config.categorical,
                self.policy.min_level_rows,
                target=self.config.target,
            )
        except ValueError as err:  # a column already holding the level "(other)"
            raise ConfigError(
                f"{self.config.source}: data file {self.config.data_path}: {err}; allowed: no "
                "level named like the group of rare levels in a categorical column (rename it "
                "in the data file) when privacy.min_level_rows is set"
            ) from err
        self.frame = frame
        logger.info(
            "site %s: loaded %d rows, %d columns from %s",
            self.site,
            frame.shape[0],
            frame.shape[1],
            self.config.data_path,
        )
        logger.info(
            "site %s: privacy policy (%s): %s",
            self.site,
            self.policy.source,
            "default (nothing changed or withheld)"
            if self.policy.is_default
            else json.dumps(self.policy.to_dict(), sort_keys=True),
        )
        if self.hidden:
            logger.info(
                "site %s: rare levels sent as one level: %s",
                self.site,
                ", ".join(f"{c} ({len(v)} levels)" for c, v in sorted(self.hidden.items())),
            )
        return self

    def hide(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with the levels this site hides rewritten as it rewrote its own table.

        Apply it to any table the site predicts on besides its own (its own
        validation and test rows are already rewritten).
        """
        return hide_levels(frame, self.hidden) if self.hidden else frame

    def describe(self, time_quantiles: bool = False) -> dict:
        """Phase 1: the site's schema payload (column names, kinds, levels, classes, rows).

        With ``time_quantiles`` (a survival job that agrees its time grid) the
        payload also holds the site's coarse event-time quantiles
        (:func:`~fedforest.federation.time_grid.site_time_quantiles`: rounded to
        the coarser of its ``time_resolution`` and ``privacy.time_resolution``,
        none with fewer events than its ``privacy.min_leaf_rows``).
        """
        if self.frame is None:
            self.load()
        event_times: list[float] = []
        if time_quantiles:
            event_times = site_time_quantiles(
                self.frame[self.config.time].to_numpy(dtype=np.float64),
                self.frame[self.config.target].to_numpy() == 1,
                resolution=event_time_resolution(self.config, self.policy),
                min_events=self.policy.min_leaf_rows,
            )
            logger.info(
                "site %s: sends %d event-time quantile(s) for the time grid%s",
                self.site,
                len(event_times),
                "" if event_times else " (too few events)",
            )
        return SiteSchema.from_frame(
            self.site,
            self.frame,
            self.config.target,
            self.config.categorical,
            self.task,
            time=self.config.time,
            event_times=event_times,
        ).to_payload()

    @property
    def task(self) -> str:
        """The job's task (``classification`` or ``regression``)."""
        return self.config.task

    @property
    def regression(self) -> bool:
        return self.config.task == "regression"

    @property
    def survival(self) -> bool:
        return self.config.task == "survival"

    def set_schema(self, payload: Mapping) -> None:
        """Receive the global schema; encode the table and split it.

        The split follows the site's validation mode
        (:meth:`~fedforest.federation.config.SiteConfig.validation_choice`, logged
        with its reason): ``holdout`` holds out ``validation_fraction`` of the rows
        as validation rows; ``oob`` holds out none (:attr:`X_val` and :attr:`y_val`
        are ``None``) and trains on every row but the test rows.
        """
        self.schema = read_message(payload, "server", protocol.GLOBAL_SCHEMA)
        if self.site not in self.schema.site_columns:
            raise ValueError(f"the global schema does not list site {self.site!r}")
        if self.survival != bool(self.schema.times):
            raise ValueError(
                f"the global schema has a time grid of {len(self.schema.times)} points, but "
                f"this site's job is a {self.task} job"
            )
        if (self.regression or self.survival) != (not self.schema.classes):
            raise ValueError(
                f"the global schema has classes {self.schema.classes}, but this site's job is "
                f"a {self.task} job"
            )
        # the table is checked, renamed and its rare levels hidden (load): encoded as
        # fedforest predict encodes new rows (tables.model_input)
        columns = self.schema.site_columns[self.site]
        X = model_input(self.frame, None, columns, self.schema.categories).X
        target = self.frame[self.config.target]
        if self.survival:
            from ..survival_metrics import survival_target

            y = survival_target(
                self.frame[self.config.time].to_numpy(dtype=np.float64), target.to_numpy() == 1
            )
        elif self.regression:
            y = target.to_numpy(dtype=np.float64)
        else:
            y = normalize_labels(target)
        self.validation, why = self.config.validation_choice()
        (self.X_train, self.X_val, self.X_test, self.y_train, self.y_val, self.y_test) = (
            split_site_rows(
                X,
                y,
                self.config.held_validation_fraction,
                self.config.test_fraction,
                self.random_state,
                stratify=not self.regression,
            )
        )
        if self.X_val is None:
            logger.info(
                "site %s: %d train, no validation (oob: the training rows scored out of bag; "
                "%s), %d test rows",
                self.site,
                len(self.X_train),
                why,
                len(self.X_test),
            )
        else:
            logger.info(
                "site %s: %d train, %d validation, %d test rows",
                self.site,
                len(self.X_train),
                len(self.X_val),
                len(self.X_test),
            )
            if "DP mode" in why:
                logger.info("site %s: validation holdout: %s", self.site, why)

    @property
    def columns(self) -> list[str]:
        return list(self.schema.site_columns[self.site])

    # ------------------------------------------------------------- phase 2
    def vote(self) -> dict:
        """Phase 2: run the local selector; mask and scores keyed by global index.

        In DP mode the selector is ``none`` (every column kept, equal scores),
        whatever the site's YAML says: a selection made on the rows would leave
        the site without noise.
        """
        method, params = self.config.selector, self.config.selector_params
        if self.policy.dp:
            method, params = "none", {}
            logger.info("site %s: DP mode, voting with the 'none' selector", self.site)
        vote = site_vote(
            self.site,
            self.X_train,
            self.y_train,
            method,
            list(self.schema.categories),
            params,
            self.random_state,
            task=self.task,
        )
        index = {f: i for i, f in enumerate(self.schema.features)}
        return vote.to_payload(index)

    def score_mask(self, features: Sequence[str], metric: str) -> dict:
        """Phase 2 (tuning): score a proposed mask on the validation rows.

        Without validation rows (validation mode ``oob``) the mask's forest
        scores the training rows out of bag
        (:func:`~fedforest.election.tuning.score_mask`), and ``n_rows`` is the
        training row count. In DP mode the score is the constant
        :data:`DP_MASK_SCORE` (see the module docstring): a score computed on
        the rows would leave the site without noise.
        """
        if self.policy.dp:
            value = DP_MASK_SCORE
        else:
            value = score_mask(
                self.X_train,
                self.y_train,
                self.X_val,
                self.y_val,
                list(features),
                self.schema.classes,
                metric,
                random_state=self.random_state,
                task=self.task,
            )
        return {
            "format": protocol.MASK_SCORE,
            "version": protocol.FORMATS[protocol.MASK_SCORE],
            "score": float(value),
            "n_rows": int(len(self.X_train if self.X_val is None else self.X_val)),
        }

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
        """Phase 3: forest, surrogates, imputers, std (+ intersection forest) as payloads.

        The privacy policy decides what is sent (module docstring): a part the
        policy withholds is sent empty (``imputers``, ``feature_std``) or not at
        all (``intersection``).
        """
        own, shared = self.elected_columns(elected)
        if not own:
            raise ValueError(f"site {self.site!r} has none of the elected features {list(elected)}")
        leaf = forest_params.get("min_samples_leaf", 1)
        key = "forest.min_samples_leaf"
        k = self.policy.min_leaf_rows
        if isinstance(leaf, int) and k > leaf:
            leaf, key = k, f"privacy.min_leaf_rows ({self.policy.source})"
        if isinstance(leaf, int) and 2 * leaf > len(self.X_train):
            raise ValueError(
                f"site {self.site!r}: {key}={leaf} needs at least {2 * leaf} "
                f"training rows for a single split; this site has {len(self.X_train)}"
            )
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
            privacy=self.policy,
            classes=self.schema.classes,
            task=self.task,
            times=self.schema.times if self.survival else None,
        )
        self.in_bag = models.records
        out = {
            "format": protocol.SITE_MODELS,
            "version": protocol.FORMATS[protocol.SITE_MODELS],
            "forest": models.forest.to_payload(),
            "imputers": models.imputers.to_payload(),
            "feature_std": models.feature_std,
            "n_rows": int(len(self.X_train)),
        }
        if models.intersection is not None:
            out["intersection"] = models.intersection.to_payload()
        return out

    def saved_model(self, model: PooledModel, fitted: Mapping) -> PooledModel:
        """The model as this site keeps it: the pooled model with the site's
        :class:`~fedforest.model.pooled_model.Deployment` (what the job chose for the site,
        and its input mapping: :func:`~fedforest.federation.model_input.site_inputs`)."""
        inputs = site_inputs(self.config, self.hidden, self.schema.classes)
        return dataclasses.replace(model, deployment=deployment(fitted, inputs))

    # ------------------------------------------------------------- phase 4
    def evaluate(
        self,
        model: Mapping,
        strategies: Sequence[str],
        voting: str = "soft",
        depth_threshold: int = 2,
        metrics: Sequence[str] = METRICS,
        auto_metric: str = DEFAULT_AUTO_METRIC,
        calibration: str = "none",
        save_dir: str | Path | None = None,
        horizons: Sequence[float] | None = None,
    ) -> dict:
        """Phase 4: score every requested strategy on the held-out test rows.

        ``calibration`` is the job's; the site's own ``calibration:`` key, when
        set, takes its place. Without validation rows (``X_val`` is ``None``)
        ``auto``, the calibration and ``wmp`` are fitted on the training rows
        scored out of bag (:mod:`fedforest.prediction.out_of_bag`), from the
        in-bag records :meth:`train` kept. The pooling weights come with the model
        (``settings.owner_weights``). With ``save_dir`` the site keeps the
        model with its *deployment* (the strategy ``auto`` chose for it, its
        calibrator; ``fedforest predict`` uses them) and the metrics.

        Returns
        -------
        dict
            ``{"rows": n, "strategies": {name: {metric: value, ...}}, "privacy":
            policy}``; ``auto`` also names the strategy and calibration it
            chose and the runner-up, and ``privacy`` is the site's effective
            policy (``PrivacyPolicy.to_dict``).
        """
        pooled: PooledModel = read_message(model, "server", protocol.MODEL)
        calibration = self.config.calibration or calibration
        if self.regression or self.survival:
            calibration = "none"
        fitted: dict = {}
        X_fit, y_fit, in_bag = self.X_val, self.y_val, None
        if self.X_val is None:  # fitted out of bag on the training rows
            X_fit, y_fit, in_bag = self.X_train, self.y_train, self._out_of_bag(pooled)
        results = evaluate_strategies(
            pooled,
            self.X_test,
            self.y_test,
            self.schema.classes,
            strategies,
            site=self.site,
            voting=voting,
            depth_threshold=depth_threshold,
            metrics=metrics,
            auto_metric=auto_metric,
            X_val=X_fit,
            y_val=y_fit,
            random_state=self.random_state,
            calibration=calibration,
            models=fitted,
            outcome=self.config.target,
            in_bag=in_bag,
            y_train=self.y_train if self.survival else None,
            horizons=self._horizons(horizons),
        )
        out = {
            "format": protocol.SITE_METRICS,
            "version": protocol.FORMATS[protocol.SITE_METRICS],
            "site": self.site,
            "rows": int(len(self.X_test)),
            "strategies": results,
            "privacy": self.policy.to_dict(),
        }
        if save_dir is not None:
            save_dir = Path(save_dir)
            save_dir.mkdir(parents=True, exist_ok=True)
            saved = self.saved_model(pooled, fitted).to_payload()
            save_payload(save_dir / "pooled_model.npz", saved)
            (save_dir / "metrics.json").write_text(json.dumps(out, indent=2) + "\n")
            logger.info("site %s: saved the pooled model and metrics in %s", self.site, save_dir)
        return out

    def _horizons(self, horizons) -> list[float] | None:
        """The ``horizons`` of the evaluate task (the job's ``survival.horizons``), checked."""
        if horizons is None:
            return None
        if not self.survival:
            raise ValueError(
                f"site {self.site!r}: the evaluate task's horizons are {horizons!r}; allowed: "
                f"null in a {self.task} job (horizons are a survival job's)"
            )
        try:
            return check_grid(horizons, "the evaluate task's horizons", 1, MAX_HORIZONS).tolist()
        except ValueError as err:
            raise ValueError(f"site {self.site!r}: {err}") from None

    def _out_of_bag(self, pooled: PooledModel) -> InBag:
        """Which trees of ``pooled`` trained on which of this site's training rows."""
        if self.in_bag is None:
            raise ValueError(
                f"site {self.site!r}: without validation rows the strategies are fitted on the "
                "training rows out of bag, which needs the in-bag record of this site's "
                "training; none is kept (the site did not train in this process)"
            )
        return InBag.for_model(pooled, self.in_bag)
