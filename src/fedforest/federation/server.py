"""Everything the server does in a job, without FLARE: the job's rules.

:class:`JobServer` joins the sites' schemas, counts the election (and tunes it
through a callback that asks the sites to score masks), validates and pools the
trained payloads, and fills the results (:meth:`JobServer.results`). A payload
that fails validation is refused: the site is named, dropped from later
phases, and its payload is never used. The order of the phases and the
exchange of payloads are :mod:`fedforest.federation.driver`'s; swarm mode runs
the same rules at every site.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .. import protocol
from ..election.ballot import Ballot, ElectionResult, SiteVote
from ..election.tuning import TuningResult, hill_climb, pool_scores
from ..errors import PayloadError
from ..model.forest import PooledForest
from ..model.pooled_model import PooledModel, PredictionSettings
from ..vocabulary import LOWER_IS_BETTER
from .config import JobConfig
from .evaluation import SiteMetrics
from .job_results import JobResults, ModelSummary
from .messages import MaskScore, SiteModelsReply, read_message
from .results import payload_bytes, write_results_files
from .schema import GlobalSchema, SchemaError, SiteSchema, refuse_no_shared_feature
from .site_trees import forest_for_site
from .time_grid import agree_time_grid
from .training import SiteModels, owner_weights, pool_site_models

logger = logging.getLogger(__name__)


@dataclass
class JobServer:
    """The server's side of the job.

    Parameters
    ----------
    config : JobConfig
    """

    config: JobConfig
    schema: GlobalSchema | None = None
    election: ElectionResult | None = None
    tuning: TuningResult | None = None
    votes: list[SiteVote] = field(default_factory=list)
    classes_missing: dict[str, list] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    payload_sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    site_rows: dict[str, int] = field(default_factory=dict)
    #: The pooled forest and intersection forest of :meth:`pool` (``None`` before it).
    pooled_forest: PooledForest | None = field(default=None, repr=False, compare=False)
    pooled_intersection: PooledForest | None = field(default=None, repr=False, compare=False)
    #: ``{site: {"trees", "bytes"}}`` of the models of their own :meth:`site_models` made.
    site_model_sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The clock of :meth:`timed` (``None``: ``time.monotonic``); benchmarks count CPU seconds.
    clock: Callable[[], float] | None = field(default=None, repr=False, compare=False)

    # ------------------------------------------------------------- helpers
    @contextmanager
    def refusing(self, site: str, phase: str) -> Iterator[None]:
        """Run the handling of one site's payload; any failure drops that site only.

        A :class:`~fedforest.PayloadError` or :class:`~fedforest.SchemaError` is
        the reason as it stands; any other exception (a payload that passed
        validation but still broke the code using it) is named with its type.
        The exception never reaches the caller, so one hostile or broken site
        can never cost the others their results.
        """
        try:
            yield
        except (PayloadError, SchemaError) as err:
            self.drop(site, phase, str(err))
        except Exception as err:  # noqa: BLE001 - whatever a payload did, only its site pays
            logger.exception("site %s: its %s payload broke the server's handling", site, phase)
            self.drop(site, phase, f"its payload could not be used ({type(err).__name__}: {err})")

    def drop(self, site: str, phase: str, reason: str) -> None:
        """Record that ``site`` is out of the job from ``phase`` on."""
        if site not in self.dropped:
            self.dropped[site] = f"{phase}: {reason}"
            logger.warning("site %s dropped in phase %s: %s", site, phase, reason)

    def record_sizes(self, phase: str, payloads: Mapping[str, Any]) -> None:
        for site, payload in sorted(payloads.items()):  # reply order must not matter
            with self.refusing(site, phase):
                self.payload_sizes.setdefault(site, {})[phase] = payload_bytes(payload)

    def add_time(self, phase: str, seconds: float) -> None:
        """Add ``seconds`` to the timing of ``phase`` (``results.json``'s ``phase_seconds``)."""
        self.timings[phase] = self.timings.get(phase, 0.0) + seconds

    def timed(self, phase: str, fn: Callable):
        """Run ``fn`` and add its wall time to ``phase``.

        Steps ``fn`` makes itself that add to the same phase (the election's
        mask-scoring rounds) are part of ``fn``'s wall time, so they are
        counted once.
        """
        clock = self.clock or time.monotonic
        before = self.timings.get(phase, 0.0)
        start = clock()
        try:
            return fn()
        finally:
            self.timings[phase] = before + clock() - start

    def alive(self, sites) -> list[str]:
        return [s for s in sites if s not in self.dropped]

    def check_min_sites(self, alive: list[str], phase: str) -> None:
        """Stop the job when fewer than ``min_sites`` sites are left."""
        if len(alive) < self.config.min_sites:
            dropped = "; ".join(f"{s} ({why})" for s, why in self.dropped.items()) or "none"
            raise RuntimeError(
                f"phase {phase}: only {len(alive)} site(s) left ({', '.join(alive) or 'none'}), "
                f"fewer than min_sites={self.config.min_sites}. Dropped: {dropped}"
            )

    # ------------------------------------------------------------- phase 1
    def build_schema(self, payloads: Mapping[str, Mapping]) -> dict:
        """Join the site schemas; refuse malformed ones (the site is dropped)."""
        self.record_sizes("schema", payloads)
        schemas = []
        for site, payload in self._live(payloads):
            with self.refusing(site, "schema"):
                s: SiteSchema = read_message(payload, site, protocol.SITE_SCHEMA)
                if s.site != site:
                    raise PayloadError(f"it says it is site {s.site!r}", sender=site)
                if self.config.task != "survival" and s.event_times:
                    raise SchemaError(
                        f"site {site!r} sends event-time quantiles, but this job is a "
                        f"{self.config.task} job"
                    )
                if self.config.task == "survival":
                    if s.classes:
                        raise SchemaError(
                            f"site {site!r} describes class labels {s.classes}, but this job "
                            "predicts a time to an event (job.task: survival)"
                        )
                elif self.config.task == "regression":
                    if s.classes:
                        raise SchemaError(
                            f"site {site!r} describes class labels {s.classes}, but this job "
                            "predicts a number (job.task: regression)"
                        )
                elif len(s.classes) < 2:
                    raise SchemaError(
                        f"site {site!r} has a single class {s.classes}; its target needs at "
                        "least two classes"
                    )
                schemas.append(s)
        self.check_min_sites([s.site for s in schemas], "schema")
        self.schema = GlobalSchema.build(schemas)
        self.classes_missing = {
            s.site: [c for c in self.schema.classes if c not in s.classes]
            for s in schemas
            if set(s.classes) != set(self.schema.classes)
        }
        for site, lacking in self.classes_missing.items():
            logger.warning("site %s has no row of class(es) %s", site, lacking)
        self.site_rows = dict(self.schema.site_rows)
        refuse_no_shared_feature(self.schema)
        if self.config.survival:
            self.schema.times = agree_time_grid(
                {s.site: s.event_times for s in schemas},
                grid_points=self.config.grid_points,
                times=self.config.survival_times,
            ).tolist()
            logger.info(
                "schema: a time grid of %d points from %g to %g (%s)",
                len(self.schema.times),
                self.schema.times[0],
                self.schema.times[-1],
                "survival.times"
                if self.config.survival_times is not None
                else "agreed from the sites' event-time quantiles",
            )
        logger.info(
            "schema: %d features (%d shared) over %d sites, classes %s",
            len(self.schema.features),
            len(self.schema.shared),
            len(schemas),
            self.schema.classes,
        )
        return self.schema.to_payload()

    # ------------------------------------------------------------- phase 2
    def read_votes(self, payloads: Mapping[str, Mapping]) -> Ballot:
        """Validate the votes and build the ballot."""
        self.record_sizes("election", payloads)
        votes = []
        for site, payload in self._live(payloads):
            with self.refusing(site, "election"):
                vote: SiteVote = read_message(
                    payload, site, protocol.SITE_VOTE, features=self.schema.features
                )
                if vote.site != site:
                    raise PayloadError(f"it says it is site {vote.site!r}", sender=site)
                unknown = set(vote.features) - set(self.schema.site_columns.get(site, []))
                if unknown:
                    raise PayloadError(
                        f"it votes on columns it does not have: {sorted(unknown)}", sender=site
                    )
                votes.append(vote)
        self.check_min_sites([v.site for v in votes], "election")
        self.votes = votes
        el = self.config.election
        return Ballot(votes, el.aggregation, el.always_keep, el.normalization)

    def elect(self, ballot: Ballot, score: Callable[[list[str]], float] | None) -> list[str]:
        """Count the ballot (hill-climbing the freedom degree when auto-tuning)."""
        el = self.config.election
        if el.auto_tune and score is not None:
            self.tuning = hill_climb(
                ballot,
                score,
                start=el.freedom_degree,
                rounds=el.tuning_rounds,
                every_feature=el.tune_every_feature,
                tolerance=el.tolerance,
                # a lower-is-better metric (rmse, a regression job's) is minimised
                metric=el.metric if el.metric in LOWER_IS_BETTER else None,
            )
            self.election = self.tuning.election
        else:
            self.election = ballot.count(el.freedom_degree)
        logger.info(
            "election: kept %d of %d features %s",
            len(self.election.selected),
            len(self.election.features),
            self.election.stats,
        )
        return list(self.election.selected)

    @staticmethod
    def weighted_score(scores: Mapping[str, MaskScore], metric: str | None = None) -> float:
        """The sites' mask scores pooled (:func:`~fedforest.election.tuning.pool_scores`: the
        row-weighted mean; for ``rmse`` the RMSE over every site's validation rows)."""
        if not scores:
            raise RuntimeError("no site scored the proposed mask")
        ordered = [scores[site] for site in sorted(scores)]  # reply order must not matter
        return pool_scores(metric, [s.score for s in ordered], [s.n_rows for s in ordered])

    def score_replies(self, replies: Mapping[str, Mapping]) -> float:
        """Row-weighted mean score of a proposed mask; a site with a bad reply is dropped."""
        good = {}
        for site, reply in self._live(replies):
            with self.refusing(site, "election"):
                good[site] = read_message(reply, site, protocol.MASK_SCORE)
        self.check_min_sites(list(good), "election")
        return self.weighted_score(good, self.config.election.metric)

    # ------------------------------------------------------------- phase 3
    def pool(self, payloads: Mapping[str, Mapping], want_intersection: bool) -> dict:
        """Validate every site's training payload and pool them into a model bundle."""
        self.record_sizes("train", payloads)
        models: list[SiteModels] = []
        n_rows: dict[str, int] = {}
        elected = set(self.election.selected) if self.election else set(self.schema.features)
        for site, payload in self._live(payloads):
            with self.refusing(site, "train"):
                reply: SiteModelsReply = read_message(payload, site, protocol.SITE_MODELS)
                forest, imps = reply.forest, reply.imputers
                self._check_forest(forest, site, elected, "elected")
                for name, imp in imps.items():
                    levels = self.schema.categories.get(name)
                    if (
                        name not in elected
                        or not set(imp.predictors) <= elected
                        or imp.kind != ("numeric" if levels is None else "categorical")
                        or imp.n_levels != len(levels or ())
                        or imp.owner != site
                    ):
                        raise PayloadError(
                            f"its imputer for {name!r} ({imp.kind}, {imp.n_levels} levels, "
                            f"predictors {imp.predictors}, owner {imp.owner!r}) does not match "
                            "the elected features and the schema",
                            sender=site,
                        )
                n_rows[site] = reply.n_rows
                inter = reply.intersection if want_intersection else None
                if inter is not None:
                    self._check_forest(inter, site, set(self.schema.shared), "shared")
                models.append(SiteModels(forest, imps, reply.feature_std, inter))
        pooled = self._pool_models(models)
        logger.info(
            "pooled %d trees from %d sites; %d imputers",
            pooled.forest.n_trees,
            len(models),
            len(pooled.imputers),
        )
        self.pooled_forest, self.pooled_intersection = pooled.forest, pooled.intersection
        weights = owner_weights(
            self.config.pooling_weights, {s: n_rows[s] for s in pooled.forest.owners}
        )
        settings = PredictionSettings(
            depth_threshold=self.config.depth_threshold,
            voting=self.config.voting,
            seed=self.config.seed,
            owner_weights=weights,  # None (equal weights): no entry, every tree one vote
        )
        return PooledModel(
            pooled.forest, pooled.imputers, pooled.feature_std, pooled.intersection, settings
        ).to_payload()

    def site_models(self, model: dict, sites: Sequence[str]) -> dict[str, dict] | None:
        """Each site's model bundle under ``evaluation.trees_per_site``; ``None``: all the same.

        A site gets its own trees and, the other sites taking turns, those its
        columns (the schema's) reach best, at most ``trees_per_site`` in all
        (:mod:`.site_trees`), and as many of the intersection forest, chosen
        the same way (every site has its columns, so the turns decide); the
        rest of the bundle is the pooled one.
        """
        cap = self.config.trees_per_site
        forest, inter = self.pooled_forest, self.pooled_intersection
        if cap is None or forest is None:
            return None
        if forest.n_trees <= cap and (inter is None or inter.n_trees <= cap):
            return None
        out = {}
        for site in sites:
            columns = self.schema.site_columns.get(site, []) if self.schema else []
            subset = forest_for_site(forest, site, columns, cap)
            out[site] = dict(model, forest=subset.to_payload())
            if inter is not None and model.get("intersection") is not None:
                shared = forest_for_site(inter, site, inter.feature_names, cap)
                out[site]["intersection"] = shared.to_payload()
            self.site_model_sizes[site] = {
                "trees": subset.n_trees,
                "bytes": payload_bytes(out[site]),
            }
        return out

    def _pool_models(self, models: list[SiteModels]) -> SiteModels:
        """Pool the validated models; a site whose model cannot be pooled is dropped.

        Each model was checked against the schema, so pooling should not fail;
        if it does, the models are pooled again one site at a time in site
        order and the site whose model breaks the pool is dropped and named.
        """
        self.check_min_sites([m.forest.owners[0] for m in models], "train")
        try:
            return pool_site_models(models)
        except Exception:  # noqa: BLE001 - find the culprit below
            logger.exception("pooling failed; pooling site by site to find the culprit")
        kept: list[SiteModels] = []
        for m in models:
            site = m.forest.owners[0]
            with self.refusing(site, "train"):
                pool_site_models([*kept, m])
                kept.append(m)
        self.check_min_sites([m.forest.owners[0] for m in kept], "train")
        return pool_site_models(kept)

    def _live(self, payloads: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """The payloads of sites not dropped yet, by site name (reply order must not matter)."""
        return [(s, p) for s, p in sorted(payloads.items()) if s not in self.dropped]

    def _check_forest(self, forest: PooledForest, site: str, allowed: set, word: str) -> None:
        """Refuse a site's forest that breaks the schema (concat would fail on it later)."""
        if forest.owners != [site]:
            raise PayloadError(f"its trees claim owners {forest.owners}", sender=site)
        extra = set(forest.feature_names) - allowed
        if extra:
            raise PayloadError(
                f"its trees use features that were not {word}: {sorted(extra)}", sender=site
            )
        for name in forest.feature_names:
            if forest.categories.get(name) != self.schema.categories.get(name):
                raise PayloadError(
                    f"its trees give feature {name!r} the levels {forest.categories.get(name)}, "
                    f"but the schema has {self.schema.categories.get(name)}",
                    sender=site,
                )
        if forest.task != self.config.task:
            raise PayloadError(
                f"it sent {forest.task} trees, but this job's task is {self.config.task}",
                sender=site,
            )
        if not set(forest.classes.tolist()) <= set(self.schema.classes):
            raise PayloadError(
                f"its trees have classes {forest.classes.tolist()}, "
                f"but the schema has {self.schema.classes}",
                sender=site,
            )

    # ------------------------------------------------------------- phase 4
    def read_metrics(self, replies: Mapping[str, Mapping]) -> dict[str, SiteMetrics]:
        """Validate the sites' metrics; a site with a malformed reply is dropped."""
        metrics = {}
        for site, payload in self._live(replies):
            with self.refusing(site, "evaluate"):
                metrics[site] = read_message(
                    payload,
                    site,
                    protocol.SITE_METRICS,
                    strategies=self.config.strategies,
                    metrics=self.config.metrics,
                )
        return metrics

    def results(
        self,
        metrics: Mapping[str, Mapping],
        model: Mapping | None,
        status: str = "finished",
        error: str | None = None,
    ) -> JobResults:
        """The job's results as they stand (:class:`~fedforest.federation.job_results.JobResults`).

        ``metrics`` are the checked metrics replies (:meth:`read_metrics`);
        ``privacy`` holds each site's effective privacy policy as its metrics
        reply reported it (``{site: policy dict}``; ``None`` for a version 1
        reply; a site that did not reach the evaluation is absent), ``validation``
        each site's validation mode as reported (``{site: "oob" or "holdout"}``).
        """
        return JobResults(
            job=self.config.name,
            status=status,
            error=error,
            sites=self.config.sites,
            dropped_sites=dict(self.dropped),
            classes_missing={s: list(c) for s, c in self.classes_missing.items()},
            strategies=list(self.config.strategies),
            metrics={site: m.get("strategies", {}) for site, m in metrics.items()},
            test_rows={site: m.get("rows") for site, m in metrics.items()},
            schema=self.schema.to_payload() if self.schema else None,
            election=self.election.to_dict() if self.election else None,
            tuning=self.tuning.to_dict() if self.tuning else None,
            phase_seconds={k: round(v, 3) for k, v in self.timings.items()},
            payload_bytes=self.payload_sizes,
            privacy={site: m.get("privacy") for site, m in metrics.items()},
            validation={site: m.get("validation") for site, m in metrics.items()},
            model=None if model is None else model_summary(model, self.site_model_sizes),
        )

    def write_results(
        self,
        run_dir,
        metrics: Mapping[str, Mapping],
        model: Mapping | None,
        status: str = "finished",
        error: str | None = None,
    ) -> dict:
        """Write ``results.json`` and ``report.md`` of :meth:`results` into ``run_dir``.

        Returns
        -------
        dict
            What ``results.json`` holds (:meth:`JobResults.to_dict`).
        """
        results = self.results(metrics, model, status, error)
        write_results_files(run_dir, results)
        logger.info("results written to %s", run_dir)
        return results.to_dict()


def model_summary(model: Mapping, site_models: Mapping | None = None) -> ModelSummary:
    """The pooled model bundle in a few numbers: trees, nodes, features, owners, bytes.

    ``site_models`` (``{site: {"trees", "bytes"}}``) are the models of their own the
    sites were sent (``evaluation.trees_per_site``), in site order.
    """
    forest = model["forest"]
    return ModelSummary(
        trees=int(len(forest["tree_start"]) - 1),
        nodes=int(forest["tree_start"][-1]),
        features=list(forest["feature_names"]),
        owners=list(forest["owners"]),
        bytes=payload_bytes(model),
        site_models={s: dict(v) for s, v in sorted((site_models or {}).items())},
    )
