"""Scoring a pooled model at a site (evaluate_strategies) and reading a site's metrics reply:
the fitted strategy wmp (its guess weight fitted on validation rows) and auto's candidates."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fedforest import PayloadError, PooledForestClassifier, protocol
from fedforest.federation.evaluation import evaluate_strategies, read_site_metrics
from fedforest.metrics import score_all
from fedforest.model.pooled_model import PooledModel
from fedforest.prediction.weighting import GUESS_WEIGHTS
from fedforest.privacy.policy import PrivacyPolicy
from fedforest.vocabulary import FITTED_STRATEGIES

SITE_A = ["x0", "x1", "x2", "x3"]  # site a's columns of the two-site forest (x4, x5 are b's)
METRICS = ["auprc", "auc", "mcc", "accuracy"]
STRATEGIES = ["mp", "wmp", "node", "auto"]


@pytest.fixture(scope="module")
def site_a(two_site_forest, table):
    """The pooled forest and validation and test rows with site a's columns (rows site a's
    own trees never saw)."""
    forest = two_site_forest[0]
    X, y = table
    X = X[SITE_A]
    return forest, X[400:500], y[400:500], X[500:], y[500:]


def evaluate(forest, X_val, y_val, X_te, y_te, strategies=STRATEGIES):
    return evaluate_strategies(
        PooledModel(forest),
        X_te,
        y_te,
        forest.classes,
        strategies,
        site="a",
        metrics=METRICS,
        X_val=X_val,
        y_val=y_val,
        random_state=0,
    )


@pytest.fixture(scope="module")
def scored(site_a):
    return evaluate(*site_a)


def test_wmp_fits_its_guess_weight_on_the_validation_rows(site_a, scored):
    forest, X_val, y_val, X_te, y_te = site_a
    assert FITTED_STRATEGIES == ("wmp",)
    row = scored["wmp"]
    assert row["guess_weight"] in GUESS_WEIGHTS
    assert 0.0 <= row["auprc"] <= 1.0 and 0.0 <= row["auc"] <= 1.0
    assert -1.0 <= row["mcc"] <= 1.0 and 0.0 <= row["accuracy"] <= 1.0
    assert row["rows"] == len(X_te) and row["fallback_rows"] >= 0
    assert 0 < row["mean_trees_kept"] <= forest.n_trees
    # the weight a classifier fits on the same validation rows, and the same test scores
    fitted = PooledForestClassifier(forest, strategy="wmp", site="a", random_state=0)
    fitted.fit(X_val, y_val)
    assert row["guess_weight"] == fitted.guess_weight_
    fixed = PooledForestClassifier(forest, strategy="wmp", guess_weight=fitted.guess_weight_)
    expected = score_all(y_te, fixed.predict_proba(X_te), forest.classes, METRICS)
    assert {m: row[m] for m in METRICS} == pytest.approx(expected, abs=1e-12)
    # only wmp's row carries a guess weight
    assert [s for s, r in scored.items() if "guess_weight" in r] == ["wmp"]


def test_wmp_and_auto_need_validation_rows(site_a):
    forest, _, _, X_te, y_te = site_a
    for strategies in (["mp", "wmp"], ["wmp"]):
        with pytest.raises(ValueError, match="strategy 'wmp' needs validation rows"):
            evaluate(forest, None, None, X_te, y_te, strategies)
    with pytest.raises(ValueError, match="strategy 'auto' needs validation rows"):
        evaluate(forest, None, None, X_te, y_te, ["auto"])
    # the others do not
    assert set(evaluate(forest, None, None, X_te, y_te, ["mp", "node"])) == {"mp", "node"}


def test_auto_never_chooses_wmp(site_a, scored):
    auto = scored["auto"]
    assert auto["chosen"] != "wmp" and "wmp" not in auto["validation"]
    assert {"mp", "node", "fpv", "ipr"} <= set(auto["validation"])
    assert "guess_weight" not in auto
    # even when wmp's guess weight is 1 (wmp is then mp, the preferred tie) it is no candidate
    forest, X_val, y_val, X_te, y_te = site_a
    again = evaluate(forest, X_val, y_val, X_te, y_te, ["auto", "wmp"])
    assert again["auto"]["chosen"] != "wmp" and "wmp" not in again["auto"]["validation"]
    assert again["auto"] == auto


# --------------------------------------------------------------------------- the reply


def reply(scored, site="site-1"):
    """A version 2 ``fedforest/site-metrics`` reply as a site sends it."""
    return {
        "format": protocol.SITE_METRICS,
        "version": protocol.FORMATS[protocol.SITE_METRICS],
        "site": site,
        "rows": 100,
        "strategies": copy.deepcopy(scored),
        "privacy": PrivacyPolicy().to_dict(),
    }


def test_a_wmp_row_with_its_guess_weight_is_read(scored):
    read = read_site_metrics(reply(scored), "site-1", STRATEGIES, METRICS)
    assert read["strategies"]["wmp"]["guess_weight"] == scored["wmp"]["guess_weight"]
    assert read["strategies"]["wmp"] == scored["wmp"]
    assert "guess_weight" not in read["strategies"]["mp"]
    # the limits of [0, 1] and an integer are weights too
    for weight in (0, 0.0, 1, 1.0):
        payload = reply(scored)
        payload["strategies"]["wmp"]["guess_weight"] = weight
        read = read_site_metrics(payload, "site-1", STRATEGIES, METRICS)
        assert read["strategies"]["wmp"]["guess_weight"] == weight


def _drop_weight(m):
    del m["strategies"]["wmp"]["guess_weight"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_drop_weight, "strategies['wmp']: field 'guess_weight' is missing"),
        (lambda m: m["strategies"]["wmp"].update(guess_weight=1.5), "'guess_weight' is 1.5"),
        (lambda m: m["strategies"]["wmp"].update(guess_weight=-0.1), "'guess_weight' is -0.1"),
        (lambda m: m["strategies"]["wmp"].update(guess_weight="x"), "'guess_weight' is 'x'"),
        (lambda m: m["strategies"]["wmp"].update(guess_weight=None), "'guess_weight' is None"),
        (lambda m: m["strategies"]["wmp"].update(guess_weight=True), "'guess_weight' is True"),
        (
            lambda m: m["strategies"]["wmp"].update(guess_weight=float("nan")),
            "'guess_weight' is nan",
        ),
        (
            lambda m: m["strategies"]["mp"].update(guess_weight=0.5),
            "field 'guess_weight' belongs to the wmp row only",
        ),
        (
            lambda m: m["strategies"]["auto"].update(guess_weight=0.5),
            "field 'guess_weight' belongs to the wmp row only",
        ),
    ],
)
def test_a_bad_guess_weight_is_refused_naming_the_sender_and_field(scored, change, reason):
    payload = reply(scored)
    change(payload)
    with pytest.raises(PayloadError) as info:
        read_site_metrics(payload, "site-1", STRATEGIES, METRICS)
    text = str(info.value)
    assert "'site-1'" in text and reason in text, text


def test_a_guess_weight_is_refused_on_a_row_of_a_job_without_wmp(scored):
    payload = reply({s: r for s, r in scored.items() if s != "wmp"})
    payload["strategies"]["node"]["guess_weight"] = scored["wmp"]["guess_weight"]
    with pytest.raises(PayloadError, match="'guess_weight' belongs to the wmp row only"):
        read_site_metrics(payload, "site-1", ["mp", "node", "auto"], METRICS)
    assert np.isfinite(scored["node"]["auprc"])


def test_each_table_is_predicted_once_per_strategy_and_the_rows_are_unchanged(site_a, monkeypatch):
    forest, X_val, y_val, X_te, y_te = site_a
    calls = []
    original = PooledForestClassifier._predict_strategy

    def counted(self, X, strategy, voting, known_mp=None, *rest):
        calls.append((X.index[0], strategy, voting))  # which table, by its first row
        return original(self, X, strategy, voting, known_mp, *rest)

    monkeypatch.setattr(PooledForestClassifier, "_predict_strategy", counted)
    shared = evaluate(forest, X_val, y_val, X_te, y_te, ["fpv", "mp", "wmp", "auto"])
    # fpv and mp predict each table once although fpv, mp, wmp and auto all need them
    assert len(calls) == len(set(calls))
    assert calls.count((X_val.index[0], "mp", "soft")) == 1
    assert calls.count((X_te.index[0], "mp", "soft")) == 1
    assert calls.count((X_te.index[0], "fpv", "soft")) == 1
    monkeypatch.undo()
    # the same rows as each strategy scored on its own, bit for bit
    for strategy in ("fpv", "mp", "wmp", "auto"):
        alone = evaluate(forest, X_val, y_val, X_te, y_te, [strategy])[strategy]
        assert alone == shared[strategy], strategy


# --------------------------------------------------------------- skipped calibration
@pytest.fixture(scope="module")
def few_validation_rows(site_a):
    """Isotonic calibration on 12 validation rows: fewer than 10 of a class, so skipped."""
    forest, X_val, y_val, X_te, y_te = site_a
    return evaluate_strategies(
        PooledModel(forest),
        X_te,
        y_te,
        forest.classes,
        ["mp", "auto"],
        site="a",
        metrics=METRICS,
        X_val=X_val[:12],
        y_val=y_val[:12],
        random_state=0,
        calibration="isotonic",
    )


def test_a_skipped_calibration_says_why_in_the_row(few_validation_rows):
    for strategy, row in few_validation_rows.items():
        assert row["calibration"] == "none", strategy  # isotonic could not be fitted
        text = row["calibration_skipped"]
        assert text.startswith("isotonic: it needs 10 validation rows of every class")
        assert "class counts" in text
    read = read_site_metrics(reply(few_validation_rows), "site-1", ["mp", "auto"], METRICS)
    assert read["strategies"]["mp"]["calibration_skipped"] == text


def test_a_fitted_calibration_skips_nothing(site_a):
    forest, X_val, y_val, X_te, y_te = site_a
    rows = evaluate_strategies(
        PooledModel(forest), X_te, y_te, forest.classes, ["mp"], site="a",
        metrics=METRICS, X_val=X_val, y_val=y_val, random_state=0, calibration="prior",
    )  # fmt: skip
    assert rows["mp"]["calibration"] == "prior" and rows["mp"]["calibration_skipped"] is None


@pytest.mark.parametrize(
    "value",
    [5, "", "x" * 1001, "isotonic:\x1b[2J", "line\nbreak", ["isotonic"], True],
)
def test_a_skipped_calibration_text_no_site_writes_is_refused(few_validation_rows, value):
    payload = reply(few_validation_rows)
    payload["strategies"]["mp"]["calibration_skipped"] = value
    with pytest.raises(PayloadError) as info:
        read_site_metrics(payload, "site-1", ["mp", "auto"], METRICS)
    text = str(info.value)
    assert "'site-1'" in text and "calibration_skipped" in text and "1 to 1000" in text


def test_the_longest_skipped_text_is_cut_to_what_a_reader_takes():
    from fedforest.federation.evaluation import MAX_SKIPPED_TEXT, skipped_text

    text = skipped_text({"isotonic": "x" * 5000, "sigmoid": "y"})
    assert len(text) == MAX_SKIPPED_TEXT and text.endswith("…")
    assert skipped_text({"sigmoid": "reverses"}) == "sigmoid: reverses"


def test_fits_on_out_of_bag_rows_with_in_bag(site_a, caplog):
    """With in_bag the validation rows are training rows scored out of bag; rows no tree left
    out of bag are left out of every fit, once."""
    from fedforest.prediction.out_of_bag import InBag

    forest, X_rows, y_rows, X_te, y_te = site_a
    rng = np.random.default_rng(0)
    own = forest.owner_mask("a")
    matrix = (rng.random((forest.n_trees, len(X_rows))) < 0.63) & own[:, None]
    matrix[:, :2] = True  # two rows every tree trained on
    bag = InBag(matrix)
    model = PooledModel(forest)
    with caplog.at_level("INFO"):
        rows = evaluate_strategies(
            model,
            X_te,
            y_te,
            forest.classes,
            ["wmp", "auto"],
            site="a",
            metrics=METRICS,
            X_val=X_rows,
            y_val=y_rows,
            random_state=0,
            in_bag=bag,
        )
    assert "2 of 100 training rows have no out-of-bag tree" in caplog.text
    wmp = PooledForestClassifier(forest, strategy="wmp", site="a", random_state=0)
    wmp.fit(X_rows, y_rows, in_bag=bag)
    assert rows["wmp"]["guess_weight"] == wmp.guess_weight_
    plain = evaluate(forest, X_rows, y_rows, X_te, y_te, ["wmp", "auto"])
    assert rows["auto"]["validation"] != plain["auto"]["validation"]
    with pytest.raises(ValueError, match="in_bag describes 100 rows, but the rows to fit on"):
        evaluate_strategies(
            model,
            X_te,
            y_te,
            forest.classes,
            ["wmp"],
            site="a",
            X_val=X_rows[:50],
            y_val=y_rows[:50],
            in_bag=bag,
        )


def test_a_survival_rows_curves_are_read_and_bad_ones_refused(survival_job):
    import copy

    from fedforest import PayloadError, protocol
    from fedforest.federation.evaluation import read_site_metrics

    job, _ = survival_job
    config = job.config
    site = "site-1"
    reply = {
        "format": protocol.SITE_METRICS,
        "version": protocol.FORMATS[protocol.SITE_METRICS],
        "site": site,
        "rows": job.results.test_rows[site],
        "strategies": copy.deepcopy(job.results.metrics[site]),
        "privacy": job.results.privacy[site],
        "validation": "oob",
    }
    read = read_site_metrics(reply, site, config.strategies, config.metrics)
    assert (
        read["strategies"]["mp"]["survival_curves"] == reply["strategies"]["mp"]["survival_curves"]
    )
    curves = reply["strategies"]["mp"]["survival_curves"]
    for change, match in [
        (lambda c: c["groups"][0]["observed"].__setitem__(0, 1.5), r"observed\[0\]"),
        (lambda c: c["groups"][0].__setitem__("rows", 40), "holds .* rows, not"),
        (lambda c: c["groups"][0].__setitem__("events", 30), "field 'events' is 30"),
        (lambda c: c.__setitem__("times", [5.0, 5.0]), "strictly increasing"),
        (lambda c: c["horizons"][0].__setitem__("ici", -0.1), "ici"),
        (lambda c: c["horizons"][0].__setitem__("td_auc", 1.2), "td_auc"),
        (lambda c: c["horizons"].reverse(), "strictly increasing order"),
        (lambda c: c["horizons"][-1].__setitem__("horizon", 1e6), "within the grid"),
        (lambda c: c.__setitem__("horizons", c["horizons"] * 4), "a list of 1 to 10 horizons"),
        (lambda c: c.__setitem__("horizons", []), "a list of 1 to 10 horizons"),
        (lambda c: c["groups"][1].__setitem__("risk", [0, 1]), "unknown fields"),
    ]:
        bad = copy.deepcopy(reply)
        change(bad["strategies"]["mp"]["survival_curves"])
        with pytest.raises(PayloadError, match=match):
            read_site_metrics(bad, site, config.strategies, config.metrics)
    # a version 6 reply cannot hold them: they came with version 7
    old = {**copy.deepcopy(reply), "version": 6}
    with pytest.raises(PayloadError, match="survival_curves' belongs to version 7"):
        read_site_metrics(old, site, config.strategies, config.metrics)
    # a version 7 reply held one calibration (at the grid's middle time) and no horizon's AUC
    v7 = {**copy.deepcopy(reply), "version": 7}
    for row in v7["strategies"].values():
        first = row["survival_curves"].pop("horizons")[0]
        row["survival_curves"]["calibration"] = {k: v for k, v in first.items() if k != "td_auc"}
    upgraded = read_site_metrics(v7, site, config.strategies, config.metrics)
    at = upgraded["strategies"]["mp"]["survival_curves"]["horizons"]
    assert at == [{**curves["horizons"][0], "td_auc": None}]
    with pytest.raises(PayloadError, match="horizons' belongs to version 8"):
        read_site_metrics({**reply, "version": 7}, site, config.strategies, config.metrics)
    assert curves["times"] == job.server.schema.times
