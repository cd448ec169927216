"""Calibration fitted out of bag against calibration fitted on held-out rows, at hospitals that differ.

A site with ``validation: oob`` (the job's default) fits its calibrator on its
own training rows scored out of bag: each row predicted by the pooled forest
without the site's trees that trained on it. At test time every tree votes,
the site's own trees included, and a larger share of the votes comes from
them than in any out-of-bag prediction. This benchmark measures what that
does to the calibrated risks a site deploys, on its test rows.

It runs the job (:func:`benchmarks.harness.run_job`, its phase driver in this
process) on the four generated hospitals of ``benchmarks/bench_hospitals.py``
(their sizes, prevalences, case mixes and missing columns; the same data
seeds), ten seeds, twice a seed: once with ``validation: oob`` and once with
``validation: holdout`` (the same test rows; the holdout sites train on fewer
rows, their validation rows held out), both with the job's defaults
(``calibration: auto``, ``auto_metric: log_loss``, the secure default's
trees) and ``site_configs/job.yaml``'s election (tuned). Each site saves its model with what it deploys; the benchmark then
scores, at each hospital and on its test rows:

* ``auto`` (deployed): what the site deploys (``fedforest predict --model``'s
  probabilities: the chosen strategy and its calibrator), in either job;
* ``mp`` uncalibrated, and ``mp`` with a ``sigmoid`` or ``isotonic``
  calibrator fitted by the site (:func:`~fedforest.federation.evaluation.evaluate_strategies`,
  the site's own code);
* in the holdout job, the same calibrators (and ``auto``'s choice) fitted
  *out of bag on the same trees*: the site's training rows scored without the
  trees that trained on them, from the in-bag record the site kept. Against
  the same calibrators fitted on the validation rows, the trees are the same;
  the rows differ (more of them, and scored out of bag);
* in the holdout job, the same calibrators fitted on the validation rows
  scored by the *out-of-bag mixture* of trees (:func:`borrowed_in_bag`: each
  validation row leaves out the own trees a random training row is in bag
  for). Against the same calibrators fitted on the validation rows scored by
  every tree, only the mixture differs: the mechanism alone (for ``auto``, its
  rule differs too: scored out of bag the lowest score wins, on held-out rows
  a candidate within one standard error ties with it).

For each it reports reliability: *calibration-in-the-large* (mean predicted
risk minus the observed rate; negative: risks too low) and the *calibration
slope* (the slope of a logistic regression of the outcome on
``logit(p)``: 1 when calibrated, above 1 when the risks are pulled toward the
base rate, below 1 when they are too extreme), with the Brier score and the
log-loss. Means ± sd over the seeds; the slope also as its median and
interquartile range over the seeds (a site with 31 test rows gives a noisy
slope, sometimes none) and as one slope on every seed's test rows together,
with its 95% Wald interval. The paired differences (out of bag minus held out,
seed by seed) are the measurement of the effect. It also reports the share of
a row's votes that come from the site's own trees at test time and, on
average, out of bag: the mechanism.

Usage::

    python benchmarks/bench_oob_calibration.py [--reps 10] [--trees 100]
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.bench_hospitals import generated_hospitals, write_job

logger = logging.getLogger("bench_oob_calibration")

OUT = harness.RESULTS
NAME = "oob_calibration"
#: The metrics of each scored variant, in the report's order.
METRICS = ("citl", "slope", "brier", "log_loss")
#: The report's names of the metrics.
METRIC_NAMES = {
    "citl": "calibration-in-the-large",
    "slope": "calibration slope",
    "brier": "Brier",
    "log_loss": "log-loss",
}
#: Probabilities are kept within [EPS, 1 - EPS] before the logit.
EPS = 1e-6
#: A fitted slope larger than this in magnitude is a separation, not a slope: undefined.
MAX_SLOPE = 1e3
#: The variants: (key, job's validation mode, rows the calibration is fitted on,
#: strategy, calibration). ``fit`` is ``"oob"`` (training rows out of bag),
#: ``"validation"`` (held-out validation rows), ``"mixture"`` (the validation rows scored
#: by the trees an out-of-bag row gets: :func:`borrowed_in_bag`) or ``None`` (nothing is
#: fitted).
VARIANTS = (
    ("oob/none/mp", "oob", None, "mp", "none"),
    ("oob/oob/mp+sigmoid", "oob", "oob", "mp", "sigmoid"),
    ("oob/oob/mp+isotonic", "oob", "oob", "mp", "isotonic"),
    ("oob/oob/auto", "oob", "oob", "auto", "auto"),
    ("holdout/none/mp", "holdout", None, "mp", "none"),
    ("holdout/validation/mp+sigmoid", "holdout", "validation", "mp", "sigmoid"),
    ("holdout/oob/mp+sigmoid", "holdout", "oob", "mp", "sigmoid"),
    ("holdout/validation/mp+isotonic", "holdout", "validation", "mp", "isotonic"),
    ("holdout/oob/mp+isotonic", "holdout", "oob", "mp", "isotonic"),
    ("holdout/validation/auto", "holdout", "validation", "auto", "auto"),
    ("holdout/oob/auto", "holdout", "oob", "auto", "auto"),
    ("holdout/mixture/mp+sigmoid", "holdout", "mixture", "mp", "sigmoid"),
    ("holdout/mixture/mp+isotonic", "holdout", "mixture", "mp", "isotonic"),
    ("holdout/mixture/auto", "holdout", "mixture", "auto", "auto"),
)
#: The variant each job deploys (what its sites' model files hold).
DEPLOYED = {"oob": "oob/oob/auto", "holdout": "holdout/validation/auto"}
#: The paired comparisons: (title, variant minus variant).
PAIRS = (
    (
        "same trees, `mp` + sigmoid: fitted out of bag − on the validation rows",
        "holdout/oob/mp+sigmoid",
        "holdout/validation/mp+sigmoid",
    ),
    (
        "same trees, `mp` + isotonic: fitted out of bag − on the validation rows",
        "holdout/oob/mp+isotonic",
        "holdout/validation/mp+isotonic",
    ),
    (
        "same trees, `auto`: chosen and fitted out of bag − on the validation rows",
        "holdout/oob/auto",
        "holdout/validation/auto",
    ),
    (
        "same trees and rows, `mp` + sigmoid: fitted on the out-of-bag mixture − on every tree",
        "holdout/mixture/mp+sigmoid",
        "holdout/validation/mp+sigmoid",
    ),
    (
        "same trees and rows, `mp` + isotonic: fitted on the out-of-bag mixture − on every tree",
        "holdout/mixture/mp+isotonic",
        "holdout/validation/mp+isotonic",
    ),
    (
        "same trees and rows, `auto`: on the out-of-bag mixture − on every tree",
        "holdout/mixture/auto",
        "holdout/validation/auto",
    ),
    (
        "deployed: the `oob` job − the `holdout` job",
        "oob/oob/auto",
        "holdout/validation/auto",
    ),
)
FITTED_ON = {
    "oob": "training rows, out of bag",
    "validation": "validation rows",
    "mixture": "validation rows, out-of-bag mixture",
    None: "–",
}


# ------------------------------------------------------------------ the metrics
def logit(p) -> np.ndarray:
    """``log(p / (1 - p))`` of probabilities kept within ``[EPS, 1 - EPS]``.

    Examples
    --------
    >>> logit([0.5, 0.0]).round(2).tolist()
    [0.0, -13.82]
    """
    p = np.clip(np.asarray(p, dtype=float), EPS, 1 - EPS)
    return np.log(p) - np.log1p(-p)


def calibration_in_the_large(y, p) -> float:
    """Mean predicted risk minus the observed rate (0 when calibrated in the large).

    Examples
    --------
    >>> calibration_in_the_large([0, 1, 1, 0], [0.2, 0.8, 0.6, 0.6])
    0.05
    """
    y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
    if len(y) == 0 or y.shape != p.shape:
        raise ValueError(f"y and p must be two equal non-empty vectors, got {y.shape}, {p.shape}")
    return round(float(p.mean() - y.mean()), 15)


def calibration_slope(y, p, max_iter: int = 100) -> tuple[float, float, float]:
    """``(slope, intercept, standard error of the slope)`` of the logistic regression of the
    outcome ``y`` (0/1) on ``logit(p)``, unpenalised (Newton's method).

    The slope is 1 for calibrated risks, above 1 for risks pulled toward the base rate
    (too modest), below 1 for risks too extreme. Undefined (NaN, NaN, NaN) when the rows
    hold one class, when ``logit(p)`` does not vary, or when the outcome is separated by
    ``p`` (the fit does not converge, or the slope exceeds :data:`MAX_SLOPE`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.05, 0.95, 20000)
    >>> y = rng.random(20000) < p
    >>> round(calibration_slope(y, p)[0], 1)
    1.0
    >>> shrunk = 1 / (1 + np.exp(-0.5 * logit(p)))  # pulled toward 0.5
    >>> round(calibration_slope(y, shrunk)[0])
    2
    """
    y = np.asarray(y, dtype=float)
    x = logit(p)
    nan = (float("nan"),) * 3
    if y.shape != x.shape or len(y) < 3 or y.min() == y.max() or np.ptp(x) < 1e-9:
        return nan
    design = np.column_stack([np.ones_like(x), x])
    beta = np.zeros(2)
    for _ in range(max_iter):
        mu = 1 / (1 + np.exp(-(design @ beta)))
        weight = mu * (1 - mu)
        hessian = design.T @ (design * weight[:, None])
        try:
            step = np.linalg.solve(hessian, design.T @ (y - mu))
        except np.linalg.LinAlgError:
            return nan
        beta += step
        if not np.all(np.isfinite(beta)) or abs(beta[1]) > MAX_SLOPE:
            return nan
        if np.max(np.abs(step)) < 1e-10:
            break
    else:
        return nan
    mu = 1 / (1 + np.exp(-(design @ beta)))
    hessian = design.T @ (design * (mu * (1 - mu))[:, None])
    try:
        se = float(np.sqrt(np.linalg.inv(hessian)[1, 1]))
    except np.linalg.LinAlgError:
        se = float("nan")
    return float(beta[1]), float(beta[0]), se


def reliability(y, proba, classes) -> dict:
    """One variant's scores on test rows: ``citl``, ``slope`` (and ``slope_se``), ``brier``
    and ``log_loss`` (the job's, :func:`fedforest.metrics.score`); ``y`` the labels,
    ``proba`` the two classes' probabilities in ``classes`` order (the second the positive).
    """
    from fedforest.metrics import score

    classes = np.asarray(classes)
    if len(classes) != 2:
        raise ValueError(f"a binary outcome is needed, got classes {classes.tolist()}")
    proba = np.asarray(proba, dtype=float)
    hit = (np.asarray(y) == classes[1]).astype(float)
    slope, _, se = calibration_slope(hit, proba[:, 1])
    return {
        "citl": calibration_in_the_large(hit, proba[:, 1]),
        "slope": slope,
        "slope_se": se,
        "brier": score("brier", y, proba, classes),
        "log_loss": score("log_loss", y, proba, classes),
    }


# ------------------------------------------------------------------ the runs
def own_vote_shares(forest, site: str, in_bag: np.ndarray) -> tuple[float, float]:
    """The share of a row's (equal-weight) votes from ``site``'s own trees: at test time
    (every tree votes) and out of bag (the mean over the site's training rows with an
    out-of-bag tree, ``in_bag`` the forest's "tree trained on row" matrix)."""
    own = forest.owner_mask(site)
    out = ~in_bag
    voters = out.sum(axis=0)
    scored = voters > 0
    oob = (out & own[:, None]).sum(axis=0)[scored] / voters[scored]
    return float(own.mean()), float(oob.mean())


def borrowed_in_bag(bag, n_rows: int, random_state):
    """An in-bag matrix for ``n_rows`` rows no tree trained on: each row takes the column of
    a training row of ``bag`` drawn at random (with replacement, ``random_state``).

    Scored with it, a validation row is predicted by the trees an out-of-bag training row
    is predicted by (the other sites' trees, and the site's own trees that did not draw
    that row): the out-of-bag *mixture* of trees, on rows that none of them trained on.
    A calibrator fitted on these scores differs from one fitted on the same rows scored
    by every tree by the mixture alone.

    Examples
    --------
    >>> from fedforest.prediction.out_of_bag import InBag
    >>> bag = InBag(np.array([[True, False, False], [False, False, True]]))
    >>> borrowed_in_bag(bag, 4, 0).forest.shape
    (2, 4)
    """
    from fedforest.prediction.out_of_bag import InBag

    rows = np.random.default_rng(random_state).integers(0, bag.n_rows, n_rows)
    return InBag(
        bag.forest[:, rows], None if bag.intersection is None else bag.intersection[:, rows]
    )


def site_variants(job, site: str, mode: str, model) -> tuple[dict, dict]:
    """The test-row probabilities of every variant of ``mode``'s job at ``site``, and the
    strategy and calibration each used (``{key: (strategy, calibration)}``; a calibration
    the site could not fit is ``none``).

    The deployed variant is the site's saved model (:func:`deployed_probabilities`); every
    other goes through :func:`~fedforest.federation.evaluation.evaluate_strategies` (the
    site's own evaluation) with the site's rows, its seed and the job's settings, and
    ``models=`` hands back the fitted classifier, which predicts the test rows.
    """
    from fedforest.federation.evaluation import evaluate_strategies
    from fedforest.prediction.out_of_bag import InBag

    runner = job.runners[site]
    config = job.config
    X_test = runner.X_test[[c for c in runner.X_test.columns if c in set(model.input_features)]]
    bag = InBag.for_model(model, runner.in_bag)
    fits = {
        "oob": (runner.X_train, runner.y_train, bag),
        "validation": (runner.X_val, runner.y_val, None),
        None: (None, None, None),
    }
    if runner.X_val is not None:
        mixture = borrowed_in_bag(bag, len(runner.X_val), runner.random_state)
        fits["mixture"] = (runner.X_val, runner.y_val, mixture)
    probabilities, used = {}, {}
    for key, run_mode, fit, strategy, calibration in VARIANTS:
        if run_mode != mode:
            continue
        if key == DEPLOYED[mode]:
            deployed = model.deployment
            probabilities[key] = deployed_probabilities(model, runner.X_test)
            used[key] = (deployed.strategy, deployed.calibrator.method)
            continue
        X_fit, y_fit, in_bag = fits[fit]
        fitted: dict = {}
        evaluate_strategies(
            model,
            runner.X_test,
            runner.y_test,
            runner.schema.classes,
            [strategy],
            site=site,
            voting=config.voting,
            depth_threshold=config.depth_threshold,
            metrics=["brier"],
            auto_metric=config.auto_metric,
            X_val=X_fit,
            y_val=y_fit,
            random_state=runner.random_state,
            calibration=calibration,
            models=fitted,
            resamples=0,
            in_bag=in_bag,
        )
        clf = fitted[strategy]
        probabilities[key] = clf.predict_proba(X_test)
        calibrator = getattr(clf, "calibrator_", None)  # none: nothing fitted
        used[key] = (
            getattr(clf, "strategy_", strategy),
            "none" if calibrator is None else calibrator.method,
        )
    return probabilities, used


def deployed_probabilities(model, X_test) -> np.ndarray:
    """What ``fedforest predict --model`` gives for ``X_test``: the deployment's strategy,
    then its calibrator."""
    from fedforest.prediction.classifier import PooledForestClassifier

    deployed = model.deployment
    clf = PooledForestClassifier.from_model(model, strategy=deployed.strategy, site=deployed.site)
    X = X_test[[c for c in X_test.columns if c in set(model.input_features)]]
    return deployed.calibrator.transform(clf.predict_proba(X))


def run_seed(seed: int, trees: int) -> tuple[list[dict], dict, list[dict]]:
    """One seed: both jobs; every variant's scores per site (rows), the test rows' outcomes
    and probabilities per (site, variant) (for the slope over every seed), and the
    mechanism's vote shares per site.

    Raises
    ------
    RuntimeError
        When a deployed model's Brier score on the test rows is not the one its site
        reported to the job.
    """
    from fedforest.model.pooled_model import load_model
    from fedforest.prediction.out_of_bag import InBag

    rows, stacked, shares = [], {}, []
    for mode in ("oob", "holdout"):
        with tempfile.TemporaryDirectory() as folder:
            config = write_job(Path(folder), seed, trees, "auto", "equal", mode)
            saved = Path(folder) / "saved"
            job = harness.run_job(config, save_root=saved)
            results = job.results.to_dict()["metrics"]
            for site, runner in job.runners.items():
                model = load_model(saved / site / "pooled_model.npz")
                probabilities, used = site_variants(job, site, mode, model)
                classes = runner.schema.classes
                y = np.asarray(runner.y_test)
                for key, proba in probabilities.items():
                    scores = reliability(y, proba, classes)
                    if key == DEPLOYED[mode]:
                        reported = results[site]["auto"]["brier"]
                        if not np.isclose(scores["brier"], reported, rtol=0, atol=1e-9):
                            raise RuntimeError(
                                f"seed {seed}, {mode} job, site {site}: the deployed model's "
                                f"Brier score is {scores['brier']}, the site reported {reported}"
                            )
                    strategy, calibration = used[key]
                    rows.append(
                        {
                            "rep": seed,
                            "site": site,
                            "variant": key,
                            "test_rows": len(y),
                            "strategy": strategy,
                            "calibration": calibration,
                            **scores,
                        }
                    )
                    part = stacked.setdefault((site, key), ([], []))
                    part[0].append((y == classes[1]).astype(float))
                    part[1].append(proba[:, 1])
                record, inter_record = runner.in_bag
                bag = InBag.from_records(model.forest, record, model.intersection, inter_record)
                at_test, out_of_bag = own_vote_shares(model.forest, site, bag.forest)
                shares.append(
                    {
                        "rep": seed,
                        "job": mode,
                        "site": site,
                        "training_rows": len(runner.X_train),
                        "validation_rows": 0 if runner.X_val is None else len(runner.X_val),
                        "test_rows": len(runner.X_test),
                        "own_trees": int(model.forest.owner_mask(site).sum()),
                        "trees": int(model.forest.n_trees),
                        "own_share_test": at_test,
                        "own_share_oob": out_of_bag,
                    }
                )
    return rows, stacked, shares


def run(reps: int, trees: int) -> dict:
    """Every seed's rows, the slopes over every seed's test rows and the vote shares."""
    rows, shares, stacked = [], [], {}
    progress = harness.Progress(logger, reps, "seeds")
    for seed in range(reps):
        seed_rows, seed_stacked, seed_shares = run_seed(seed, trees)
        rows += seed_rows
        shares += seed_shares
        for key, (ys, ps) in seed_stacked.items():
            part = stacked.setdefault(key, ([], []))
            part[0].extend(ys)
            part[1].extend(ps)
        progress.step(f"seed {seed}")
    pooled = []
    for (site, key), (ys, ps) in stacked.items():
        y, p = np.concatenate(ys), np.concatenate(ps)
        pooled.append({"site": site, "variant": key, **_pooled(y, p)})
    sites = sorted({s for s, _ in stacked})
    for key, *_ in VARIANTS:
        y = np.concatenate([np.concatenate(stacked[(s, key)][0]) for s in sites])
        p = np.concatenate([np.concatenate(stacked[(s, key)][1]) for s in sites])
        pooled.append({"site": "all", "variant": key, **_pooled(y, p)})
    return {
        "reps": reps,
        "trees": trees,
        "hospitals": generated_hospitals(),
        "rows": rows,
        "pooled": pooled,
        "shares": shares,
    }


def _pooled(y, p) -> dict:
    slope, _, se = calibration_slope(y, p)
    return {
        "rows": len(y),
        "slope": slope,
        "slope_se": se,
        "citl": calibration_in_the_large(y, p),
    }


# ------------------------------------------------------------------ the report
def _mean_sd(values: Sequence[float]) -> tuple[float, float, int]:
    values = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(values) == 0:
        return float("nan"), float("nan"), 0
    sd = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
    return float(values.mean()), sd, len(values)


def summarise(data: dict) -> dict:
    """Per (site, variant): mean, sd and defined seeds of every metric, the slope's median
    and quartiles; per pair and site: the paired differences (mean, sd, seeds) and the
    seeds where the first variant's slope is the larger; per site: the vote shares and the
    row counts; what ``auto`` chose."""
    import pandas as pd

    frame = pd.DataFrame(data["rows"])
    sites = list(data["hospitals"])
    summary: dict = {}
    for (site, key), part in frame.groupby(["site", "variant"], sort=False):
        cell = {m: _mean_sd(part[m].tolist()) for m in METRICS}
        slopes = part["slope"].dropna().to_numpy(dtype=float)
        quartiles = np.percentile(slopes, [25, 50, 75]).tolist() if len(slopes) else [np.nan] * 3
        cell["slope_quartiles"] = quartiles
        summary.setdefault(site, {})[key] = cell
    pairs: dict = {}
    indexed = frame.set_index(["site", "variant", "rep"]).sort_index()
    for title, first, second in PAIRS:
        for site in sites:
            a, b = indexed.loc[(site, first)], indexed.loc[(site, second)]
            out = {}
            for m in METRICS:
                gap = (a[m].astype(float) - b[m].astype(float)).dropna()
                out[m] = _mean_sd(gap.tolist())
            both = (a["slope"].astype(float) - b["slope"].astype(float)).dropna()
            out["slope_larger"] = [int((both > 0).sum()), int(len(both))]
            out["slope_median"] = float(both.median()) if len(both) else float("nan")
            pairs.setdefault(title, {})[site] = out
    shares = pd.DataFrame(data["shares"])
    mechanism = {}
    for (site, mode), part in shares.groupby(["site", "job"], sort=False):
        mechanism.setdefault(site, {})[mode] = {
            "training_rows": float(part["training_rows"].mean()),
            "validation_rows": float(part["validation_rows"].mean()),
            "test_rows": float(part["test_rows"].mean()),
            "own_trees": float(part["own_trees"].mean()),
            "trees": float(part["trees"].mean()),
            "own_share_test": float(part["own_share_test"].mean()),
            "own_share_oob": float(part["own_share_oob"].mean()),
        }
    chosen, skipped = {}, {}
    for key, _, _, strategy, calibration in VARIANTS:
        part = frame[frame["variant"] == key]
        if strategy == "auto":
            picks = part["strategy"] + " + " + part["calibration"]
            chosen[key] = {
                site: picks[part["site"] == site].value_counts().to_dict() for site in sites
            }
        elif calibration != "none":
            missed = part[part["calibration"] != calibration]
            skipped[key] = {site: int((missed["site"] == site).sum()) for site in sites}
    return {
        "summary": summary,
        "pairs": pairs,
        "mechanism": mechanism,
        "chosen": chosen,
        "skipped": skipped,
    }


def _num(value: float, digits: int = 3, signed: bool = False) -> str:
    if value is None or not np.isfinite(value):
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _cell(cell, signed: bool = False) -> str:
    mean, sd, n = cell
    return f"{_num(mean, signed=signed)} ± {_num(sd)}" if n else "–"


def _variant_label(key: str) -> tuple[str, str, str]:
    _, mode, fit, strategy, calibration = next(v for v in VARIANTS if v[0] == key)
    what = f"`{strategy}`" if calibration == "none" else f"`{strategy}` + {calibration}"
    if strategy == "auto":
        what = "`auto` (deployed)" if DEPLOYED[mode] == key else "`auto` (same trees)"
    if calibration == "none":
        what += ", uncalibrated"
    return f"`{mode}`", what, FITTED_ON[fit]


def _label(site: str, facts: dict) -> str:
    lacks = ", all columns" if not facts["lacks"] else ""
    return f"{site} ({facts['rows']}, {facts['prevalence']:.2f}{lacks})"


def markdown(data: dict, result: dict) -> str:
    """The report (``benchmarks/results/oob_calibration.md``)."""
    hospitals = data["hospitals"]
    pooled = {(r["site"], r["variant"]): r for r in data["pooled"]}
    lines = [
        "# Calibration fitted out of bag against held-out rows",
        "",
        f"`python benchmarks/bench_oob_calibration.py --reps {data['reps']} --trees "
        f"{data['trees']}`: the four hospitals of `bench_hospitals.py`, the job in process "
        f"with `validation: oob` and with `validation: holdout` (the same test rows), job "
        f"defaults otherwise (`calibration: auto`; `site_configs/job.yaml`'s election), {data['reps']} seeds. Scored on each "
        "hospital's test rows: calibration-in-the-large (mean predicted risk − observed "
        "rate), calibration slope (logistic regression of the outcome on logit(p); 1 is "
        "calibrated, above 1 risks pulled toward the base rate), Brier score, log-loss.",
        "",
        "## Own trees' share of the votes",
        "",
        "A row's votes from the hospital's own trees, as a share of all the trees that "
        "vote: at test time (every tree) and out of bag (mean over its training rows), "
        "mean over the seeds.",
        "",
        "| hospital (rows, prevalence) | job | training rows | validation rows | test rows "
        "| own trees / trees | own share at test | own share out of bag |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for site, facts in hospitals.items():
        for mode in ("oob", "holdout"):
            m = result["mechanism"][site][mode]
            lines.append(
                f"| {_label(site, facts)} | `{mode}` | {m['training_rows']:.0f} | "
                f"{m['validation_rows']:.0f} | {m['test_rows']:.0f} | "
                f"{m['own_trees']:.0f} / {m['trees']:.0f} | {m['own_share_test']:.3f} | "
                f"{m['own_share_oob']:.3f} |"
            )
    lines += [
        "",
        "## Reliability on the test rows",
        "",
        "Mean ± sd over the seeds; the slope also as median [quartiles] over the seeds "
        "(undefined at a seed whose test rows are separated or hold one class: the seeds "
        "that give one are counted) and as one slope on every seed's test rows together, "
        "± its 95% interval. `all`: the slope of every hospital's test rows together. The "
        "job trains the trees: `oob` on every row but the test rows, `holdout` on those "
        "but its validation rows.",
    ]
    for site, facts in [*hospitals.items(), ("all", None)]:
        title = _label(site, facts) if facts else "All hospitals together"
        lines += ["", f"### {title}", ""]
        if site == "all":
            lines += [
                "| job | model | calibration fitted on | slope, all test rows | "
                "calibration-in-the-large, all test rows |",
                "|---|---|---|---|---|",
            ]
            for key, *_ in VARIANTS:
                p = pooled[("all", key)]
                lines.append(
                    "| " + " | ".join(_variant_label(key)) + f" | {_slope_ci(p)} | "
                    f"{_num(p['citl'], signed=True)} |"
                )
            continue
        lines += [
            "| job | model | calibration fitted on | calibration-in-the-large | slope | "
            "slope, median [quartiles] (seeds) | slope, all seeds' test rows | Brier | "
            "log-loss |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for key, *_ in VARIANTS:
            cell = result["summary"][site][key]
            low, median, high = cell["slope_quartiles"]
            lines.append(
                "| "
                + " | ".join(_variant_label(key))
                + f" | {_cell(cell['citl'], signed=True)} | {_cell(cell['slope'])} | "
                f"{_num(median, 2)} [{_num(low, 2)}, {_num(high, 2)}] ({cell['slope'][2]}) | "
                f"{_slope_ci(pooled[(site, key)])} | {_cell(cell['brier'])} | "
                f"{_cell(cell['log_loss'])} |"
            )
        missed = [
            f"{_variant_label(key)[1]} fitted on the {_variant_label(key)[2]} at {n}"
            for key, per in result["skipped"].items()
            if (n := per[site])
        ]
        if missed:
            lines += [
                "",
                "Calibration skipped (too few rows of a class to fit it; the seeds): "
                + "; ".join(missed)
                + ".",
            ]
    lines += [
        "",
        "## Paired differences",
        "",
        "Seed by seed, the first minus the second, then mean ± sd over the seeds (a "
        "positive slope difference: the first's risks are the more modest; for Brier and "
        "log-loss a positive difference is a loss). *Slope larger*: the seeds where the "
        "first's slope is the larger, of those where both are defined.",
    ]
    for title, *_ in PAIRS:
        lines += [
            "",
            f"**{title[0].upper() + title[1:]}**",
            "",
            "| hospital | calibration-in-the-large | slope | slope, median | slope larger | Brier "
            "| log-loss |",
            "|---|---|---|---|---|---|---|",
        ]
        for site, facts in hospitals.items():
            d = result["pairs"][title][site]
            larger, defined = d["slope_larger"]
            lines.append(
                f"| {_label(site, facts)} | {_cell(d['citl'], signed=True)} | "
                f"{_cell(d['slope'], signed=True)} | {_num(d['slope_median'], 2, True)} | "
                f"{larger} / {defined} | "
                f"{_cell(d['brier'], signed=True)} | {_cell(d['log_loss'], signed=True)} |"
            )
    lines += ["", "## What `auto` chose (count over the seeds)", ""]
    for key, per in result["chosen"].items():
        mode, _, fitted = _variant_label(key)
        lines.append(f"- {mode} job, chosen and calibrated on the {fitted}:")
        lines += [f"  - {site}: {counts}" for site, counts in per.items()]
    return "\n".join(lines) + "\n"


def _slope_ci(p: dict) -> str:
    if p["slope"] is None or not np.isfinite(p["slope"]):
        return "–"
    return f"{p['slope']:.2f} ± {1.96 * p['slope_se']:.2f}"


def main(argv=None) -> None:
    parser = harness.parser(__doc__, out=OUT)
    parser.add_argument("--reps", type=harness.at_least(1), default=10)
    parser.add_argument("--trees", type=harness.at_least(1), default=100)
    args = parser.parse_args(argv)
    harness.start(logger)
    data = run(args.reps, args.trees)
    result = summarise(data)
    text = markdown(data, result)
    harness.write_results(args.out, NAME, {**data, **result}, text, logger)
    print(text)


if __name__ == "__main__":
    main()
