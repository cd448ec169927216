"""Feature election over sites with different columns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedforest.election.ballot import NORMALIZATIONS, Ballot, SiteVote, elect


def reference_feature_election(masks, scores, n_samples, freedom_degree):
    """The reference rule of the Feature Election article (seed 002), verbatim."""
    masks = np.asarray(masks, dtype=bool)
    scores = np.abs(np.asarray(scores, dtype=float))
    n = np.asarray(n_samples, dtype=float)
    intersection = masks.all(axis=0)
    union = masks.any(axis=0)
    disputed = np.flatnonzero(union & ~intersection)
    lo = scores.min(axis=1, keepdims=True)
    span = scores.max(axis=1, keepdims=True) - lo
    norm = np.divide(scores - lo, span, out=np.zeros_like(scores), where=span > 0)
    weights = n / n.sum()
    votes = weights @ norm
    k = math.ceil(freedom_degree * len(disputed))
    winners = disputed[np.argsort(-votes[disputed], kind="stable")[:k]]
    global_mask = intersection.copy()
    global_mask[winners] = True
    stats = {
        "intersection": int(intersection.sum()),
        "union": int(union.sum()),
        "disputed": len(disputed),
        "kept": int(global_mask.sum()),
    }
    return global_mask, stats


NAMES = [f"f{i:02d}" for i in range(30)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("fd", [0.0, 0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("aggregation", ["weighted", "uniform"])
def test_all_on_identical_columns_equals_the_papers_reference_rule(seed, fd, aggregation):
    rng = np.random.default_rng(seed)
    masks = rng.random((3, 30)) < 0.5
    scores = rng.normal(size=(3, 30)) * (1 + masks)
    n = rng.integers(50, 500, size=3)
    weights = n if aggregation == "weighted" else np.ones(3)
    expected, stats = reference_feature_election(masks, scores, weights, fd)
    votes = [SiteVote(f"s{i}", NAMES, masks[i], scores[i], int(n[i])) for i in range(3)]
    result = elect(votes, freedom_degree=fd, aggregation=aggregation, normalization="all")
    assert result.mask.tolist() == expected.tolist()
    assert result.stats == stats
    assert result.normalization == "all"


def test_absent_sites_abstain():
    # 'rare' exists only at site c, which selects it: it is in the intersection
    a = SiteVote("a", ["age", "bmi"], [True, False], [1.0, 0.2], 100)
    b = SiteVote("b", ["age", "bmi"], [True, True], [0.2, 1.0], 100)
    c = SiteVote("c", ["age", "bmi", "rare"], [True, False, True], [0.5, 0.1, 1.0], 10)
    for fd in (0.0, 0.5, 1.0):
        result = elect([a, b, c], freedom_degree=fd)
        assert "rare" in result.selected
    result = elect([a, b, c], freedom_degree=0.0)
    assert result.intersection == ["age", "rare"]
    assert result.sites_with["rare"] == ["c"]
    # its vote is c's normalised score alone, not diluted by a and b
    assert result.votes["rare"] == pytest.approx(1.0)
    assert result.votes["bmi"] == pytest.approx((100 * 0.0 + 100 * 1.0 + 10 * 0.0) / 210)


def test_a_private_feature_the_site_did_not_select_is_dropped():
    a = SiteVote("a", ["age", "x"], [True, False], [1.0, 0.0], 100)
    b = SiteVote("b", ["age", "y"], [True, True], [1.0, 0.5], 100)
    result = elect([a, b], freedom_degree=1.0)
    assert result.selected == ["age", "y"]


def test_freedom_degree_picks_top_disputed_by_vote_with_ties_by_name():
    feats = ["d", "c", "b", "a", "keep"]
    a = SiteVote("a", feats, [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], 10)
    b = SiteVote("b", feats, [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], 10)
    ballot = Ballot([a, b], normalization="all")
    assert ballot.count(0.0).selected == ["keep"]
    # every disputed vote ties at 0.5 (a: 1, b: 0): names decide
    assert ballot.count(0.25).selected == ["a", "keep"]
    assert ballot.count(0.5).selected == ["a", "b", "keep"]
    assert ballot.count(1.0).selected == ["a", "b", "c", "d", "keep"]


def test_selected_breaks_ties_by_the_last_name_as_flare_takes_the_later_column():
    feats = ["d", "c", "b", "a", "keep"]
    a = SiteVote("a", feats, [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], 10)
    b = SiteVote("b", feats, [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], 10)
    ballot = Ballot([a, b], normalization="selected")
    # a's selected scores are all equal: 0.5 each; b's only selection too. Disputed votes tie
    assert ballot.count(0.0).selected == ["keep"]
    assert ballot.count(0.25).selected == ["d", "keep"]
    assert ballot.count(0.5).selected == ["c", "d", "keep"]
    assert ballot.count(1.0).selected == ["a", "b", "c", "d", "keep"]


def test_weighted_and_uniform_differ_as_expected():
    a = SiteVote("a", ["x", "y", "z"], [1, 1, 1], [1.0, 0.0, 0.5], 1000)
    b = SiteVote("b", ["x", "y", "z"], [1, 0, 0], [1.0, 1.0, 0.0], 10)
    # y: big site a scores it lowest; z: a scores it in the middle
    assert elect([a, b], 0.5, "weighted").selected == ["x", "z"]
    assert elect([a, b], 0.5, "uniform").selected == ["x", "y"]


def test_always_keep():
    a = SiteVote("a", ["x", "y"], [True, False], [1.0, 0.0], 10)
    b = SiteVote("b", ["x", "y"], [True, False], [1.0, 0.0], 10)
    assert elect([a, b], 0.0, always_keep=["y"]).selected == ["x", "y"]
    with pytest.raises(ValueError, match="always_keep"):
        elect([a, b], 0.0, always_keep=["nope"])


@pytest.mark.parametrize("fd", [-0.1, 1.5, "half", None, True])
def test_bad_freedom_degree_is_refused(fd):
    a = SiteVote("a", ["x"], [True], [1.0], 10)
    with pytest.raises(ValueError, match="freedom_degree"):
        elect([a], freedom_degree=fd)


def test_sites_sharing_no_column_are_refused():
    a = SiteVote("a", ["x"], [True], [1.0], 10)
    b = SiteVote("b", ["y"], [True], [1.0], 10)
    with pytest.raises(ValueError, match="share no column"):
        elect([a, b])


def test_other_bad_ballots():
    a = SiteVote("a", ["x", "y"], [True, False], [1.0, 0.0], 10)
    with pytest.raises(ValueError, match="aggregation"):
        elect([a], aggregation="median")
    for bad in ("minmax", "ALL", None, ["all"]):
        with pytest.raises(ValueError, match=r"normalization=.*\['all', 'selected'\]"):
            elect([a], normalization=bad)
    with pytest.raises(ValueError, match="same site"):
        elect([a, a])
    with pytest.raises(ValueError, match="one entry per feature"):
        elect([SiteVote("b", ["x", "y"], [True], [1.0, 0.0], 10)])
    with pytest.raises(ValueError, match="finite"):
        elect([SiteVote("b", ["x", "y"], [True, True], [1.0, np.nan], 10)])
    with pytest.raises(ValueError, match="at least one"):
        elect([])


# ------------------------------------------------------------------ normalization: all | selected
def test_the_two_normalizations_differ_and_are_recorded():
    # b scores r highly but does not select it: "all" counts that score, "selected" does not
    a = SiteVote("a", ["p", "q", "r"], [1, 1, 1], [10.0, 9.0, 1.0], 100)
    b = SiteVote("b", ["p", "q", "r"], [1, 0, 0], [10.0, 0.0, 10.0], 100)
    paper = elect([a, b], 0.5, "uniform", normalization="all")
    flare = elect([a, b], 0.5, "uniform", normalization="selected")
    assert paper.selected == ["p", "r"] and flare.selected == ["p", "q"]
    assert paper.votes["r"] == pytest.approx(0.5) and flare.votes["r"] == 0.0
    # b's only selection, p, scores 0.5 under "selected" (scores equal over the selection)
    assert flare.votes["p"] == pytest.approx(0.75) and paper.votes["p"] == pytest.approx(1.0)
    assert paper.normalization == "all" and flare.normalization == "selected"
    assert paper.to_dict()["normalization"] == "all"
    assert flare.to_dict()["normalization"] == "selected"
    assert Ballot([a, b]).normalization == "all" == elect([a, b]).normalization
    assert NORMALIZATIONS == ("all", "selected")


def test_selected_keeps_the_intersection_up_to_0_01_and_the_union_from_0_99():
    a = SiteVote("a", ["x", "y", "z"], [1, 1, 1], [3.0, 2.0, 1.0], 10)
    b = SiteVote("b", ["x", "y", "z"], [1, 0, 0], [3.0, 2.0, 1.0], 10)
    for fd, paper, flare in [
        (0.0, ["x"], ["x"]),
        (0.005, ["x", "y"], ["x"]),  # "all": ceil(0.005 * 2) = 1 disputed feature
        (0.01, ["x", "y"], ["x"]),
        (0.011, ["x", "y"], ["x", "y"]),
        (0.5, ["x", "y"], ["x", "y"]),
        (0.98, ["x", "y", "z"], ["x", "y", "z"]),
        (1.0, ["x", "y", "z"], ["x", "y", "z"]),
    ]:
        assert elect([a, b], fd, normalization="all").selected == paper, fd
        assert elect([a, b], fd, normalization="selected").selected == flare, fd
    # with more than 100 disputed features, 0.99 stops short of the union under "all"
    names = [f"f{i:03d}" for i in range(150)]
    a = SiteVote("a", names, np.ones(150, dtype=bool), np.arange(150.0), 10)
    b = SiteVote("b", names, np.arange(150) == 0, np.arange(150.0), 10)
    assert len(elect([a, b], 0.99, normalization="all").selected) == 1 + math.ceil(0.99 * 149)
    assert len(elect([a, b], 0.99, normalization="selected").selected) == 150


def test_selected_leaves_out_a_site_that_selected_nothing():
    a = SiteVote("a", ["x", "y", "z"], [1, 1, 0], [3.0, 2.0, 1.0], 10)
    b = SiteVote("b", ["x", "y", "z"], [1, 0, 0], [3.0, 2.0, 1.0], 10)
    empty = SiteVote("c", ["x", "y", "z"], [0, 0, 0], [9.0, 1.0, 5.0], 1000)
    paper = elect([a, b, empty], 0.0, normalization="all")
    flare = elect([a, b, empty], 0.0, normalization="selected")
    assert paper.intersection == [] and paper.selected == []  # c votes against everything
    assert flare.intersection == ["x"] and flare.selected == ["x"]
    assert flare.sites_with["x"] == ["a", "b", "c"] and flare.selected_by["x"] == ["a", "b"]
    # c's weight and scores are not counted: the same votes as without c
    without = elect([a, b], 0.0, normalization="selected")
    assert flare.votes == without.votes
    # nobody selecting anything elects nothing (but always_keep)
    nobody = elect([empty], 1.0, normalization="selected", always_keep=["z"])
    assert nobody.selected == ["z"] and nobody.union == []


def test_selected_over_different_columns_lets_absent_sites_abstain():
    a = SiteVote("a", ["age", "bmi"], [True, False], [1.0, 0.2], 100)
    b = SiteVote("b", ["age", "bmi"], [True, True], [0.2, 1.0], 100)
    c = SiteVote("c", ["age", "bmi", "rare", "x"], [True, False, True, True], [5, 0, 4, 3], 10)
    result = elect([a, b, c], freedom_degree=0.0, normalization="selected")
    assert result.intersection == ["age", "rare", "x"] and result.selected == result.intersection
    # a vote is the weighted mean over the sites that have the feature: rare and x are c's
    # own scaled scores (over c's selection {age: 5, rare: 4, x: 3}), not diluted by a and b
    assert result.votes["rare"] == pytest.approx(0.5)
    assert result.votes["x"] == pytest.approx(0.0)
    # bmi: a did not select it (0); b selected it with its highest score (1); c lacks it
    assert result.votes["bmi"] == pytest.approx(100 / 210 * 1.0)
    assert elect([a, b, c], 0.5, normalization="selected").selected == [
        "age",
        "bmi",
        "rare",
        "x",
    ]


# ---------------------------------------------------------- "selected" equals NVIDIA FLARE 2.9
def flare_mask(masks, scores, n_rows, freedom_degree, aggregation):
    """The mask NVIDIA FLARE's own FeatureElectionController elects from these replies.

    The replies go through the controller's real code path: how it reads the votes
    (``fedforest.flare._compat.feature_election_votes``, which drops a client whose
    mask is all False) and ``aggregate_selections``.
    """
    controller_module = pytest.importorskip("nvflare.app_opt.feature_election.controller")
    from nvflare.apis.shareable import Shareable

    from fedforest.flare import _compat

    controller = controller_module.FeatureElectionController(
        freedom_degree=freedom_degree, aggregation_mode=aggregation, min_clients=len(masks)
    )
    replies = {}
    for i, (mask, score, n) in enumerate(zip(masks, scores, n_rows, strict=True)):
        reply = Shareable()  # what FeatureElectionExecutor returns
        reply["selected_features"] = mask.tolist()
        reply["feature_scores"] = score.tolist()
        reply["num_samples"] = int(n)
        replies[f"site-{i}"] = reply
    votes = _compat.feature_election_votes(controller, replies)
    return np.asarray(controller.aggregate_selections(votes))


FLARE_FDS = (0.0, 0.005, 0.01, 0.0101, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98, 0.99, 1.0)
FLARE_BALLOTS = 100  # per seed and aggregation


def random_ballot(rng):
    """Masks, scores and rows of a random ballot, rich in edge cases and ties."""
    n_sites = int(rng.choice([1, 2, 3, 4, 5, 8]))
    n_feat = int(rng.choice([1, 2, 3, 5, 8, 13, 40]))
    masks = rng.random((n_sites, n_feat)) < rng.choice([0.1, 0.3, 0.5, 0.8, 0.95])
    for s in range(n_sites):
        kind = rng.random()
        if kind < 0.12:
            masks[s] = False
        elif kind < 0.22:
            masks[s] = True
        elif kind < 0.3:
            masks[s] = False
            masks[s, rng.integers(n_feat)] = True  # a single selection: scaled to 0.5
    style = rng.choice(["uniform", "integers", "constant", "sparse", "wide"])
    if style == "uniform":
        scores = rng.random((n_sites, n_feat))
    elif style == "integers":  # many exact ties
        scores = rng.integers(0, 4, size=(n_sites, n_feat)).astype(float)
    elif style == "constant":
        scores = np.full((n_sites, n_feat), float(rng.choice([0.0, 1.0, 0.3])))
    elif style == "sparse":
        scores = rng.random((n_sites, n_feat)) * (rng.random((n_sites, n_feat)) < 0.4)
    else:
        scores = 10.0 ** rng.uniform(-6, 6, size=(n_sites, n_feat))
    n_rows = (
        rng.integers(1, 5000, size=n_sites)
        if rng.random() < 0.7
        else np.full(n_sites, int(rng.integers(1, 100)))
    )
    return masks, scores, n_rows


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("aggregation", ["weighted", "uniform"])
def test_selected_on_identical_columns_equals_nvidia_flare(seed, aggregation):
    pytest.importorskip("nvflare.app_opt.feature_election.controller")
    rng = np.random.default_rng(seed)
    names = [f"f{j:03d}" for j in range(40)]  # name order = column order
    seen = {"empty site": 0, "all differs": 0, "tie at the cut": 0, "nothing elected": 0}
    compared = 0
    for _ in range(FLARE_BALLOTS):
        masks, scores, n_rows = random_ballot(rng)
        n_sites, n_feat = masks.shape
        votes = [
            SiteVote(f"site-{i}", names[:n_feat], masks[i], scores[i], int(n_rows[i]))
            for i in range(n_sites)
        ]
        selected = Ballot(votes, aggregation, normalization="selected")
        paper = Ballot(votes, aggregation, normalization="all")
        seen["empty site"] += bool((~masks.any(axis=1)).any())
        for fd in (*FLARE_FDS, float(rng.random())):
            expected = flare_mask(masks, scores, n_rows, fd, aggregation)
            result = selected.count(fd)
            assert result.mask.tolist() == expected.tolist(), (
                f"fd={fd} masks={masks.astype(int).tolist()} scores={scores.tolist()} "
                f"n_rows={n_rows.tolist()}"
            )
            compared += 1
            seen["all differs"] += paper.count(fd).mask.tolist() != expected.tolist()
            seen["nothing elected"] += not expected.any()
            k = math.ceil(fd * len(selected.disputed_order))
            order = selected.disputed_order
            if 0.01 < fd < 0.99 and 0 < k < len(order):
                seen["tie at the cut"] += selected.votes[order[k - 1]] == selected.votes[order[k]]
    assert compared == FLARE_BALLOTS * (len(FLARE_FDS) + 1)
    # the random ballots do reach the cases where the two rules part ways
    assert all(count > 0 for count in seen.values()), seen


def test_vote_payload_round_trip_by_index_and_refusals():
    from fedforest import PayloadError

    vote = SiteVote("a", ["bmi", "age"], [True, False], [0.4, 0.1], 42)
    features = ["age", "bmi", "hba1c"]
    payload = vote.to_payload({f: i for i, f in enumerate(features)})
    assert payload["feature_index"].tolist() == [1, 0]
    back = SiteVote.from_payload(payload, sender="a", features=features)
    assert back.features == vote.features and back.mask.tolist() == [True, False]
    assert back.n_rows == 42
    bad = dict(payload, feature_index=np.array([1, 9], dtype=np.int32))
    with pytest.raises(PayloadError, match="feature_index"):
        SiteVote.from_payload(bad, sender="a", features=features)
    bad = dict(payload, scores=np.array([np.inf, 0.0]))
    with pytest.raises(PayloadError, match="scores"):
        SiteVote.from_payload(bad, sender="a", features=features)
    by_name = SiteVote.from_payload(vote.to_payload())
    assert by_name.features == ["bmi", "age"]


# ------------------------------------------------------------------ hostile vote payloads
def _vote_payload(by_index=True):
    vote = SiteVote("a", ["bmi", "age"], [True, False], [0.4, 0.1], 42)
    return vote.to_payload({"age": 0, "bmi": 1, "hba1c": 2} if by_index else None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("format", np.array("fedforest/site-vote")),
        ("format", np.array(["fedforest/site-vote"])),
        ("version", np.array([1])),
        ("version", True),
        ("site", None),
        ("site", np.array("a")),
        ("site", ""),
        ("feature_index", None),
        ("feature_index", np.array([1, 0], dtype=np.uint64) + np.uint64(2**63)),
        ("feature_index", np.array([[1, 0]])),
        ("feature_index", np.array([1.0, 0.0])),
        ("feature_index", np.array([True, False])),
        ("feature_index", np.array([1, 1])),
        ("feature_index", np.array([1, -1])),
        ("feature_index", [1, 0]),
        ("feature_index", np.arange(10**3)),
        ("mask", None),
        ("mask", np.array([1, 0])),
        ("mask", True),
        ("scores", None),
        ("scores", np.array([0.4, np.nan])),
        ("scores", np.array(["0.4", "0.1"])),
        ("scores", 0.5),
        ("n_rows", None),
        ("n_rows", 0),
        ("n_rows", True),
        ("n_rows", 42.0),
        ("n_rows", 10**400),
        ("n_rows", np.array(42)),
        ("n_rows", "42"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_malformed_vote_fields_are_refused_naming_the_sender_and_field(field, value):
    from fedforest import PayloadError

    payload = dict(_vote_payload(), **{field: value})
    with pytest.raises(PayloadError) as info:
        SiteVote.from_payload(payload, sender="site-3", features=["age", "bmi", "hba1c"])
    message = str(info.value)
    assert message.startswith("payload from 'site-3' refused: ") and f"'{field}'" in message
    assert "truth value" not in message


@pytest.mark.parametrize(
    "features",
    [None, ["bmi", 3], ["bmi", None], [["bmi"], "age"], ["bmi", "bmi"], ["bmi", ""], "bmi"],
    ids=repr,
)
def test_vote_features_must_be_distinct_names(features):
    from fedforest import PayloadError

    payload = dict(_vote_payload(by_index=False), features=features)
    with pytest.raises(PayloadError, match="'features'"):
        SiteVote.from_payload(payload, sender="site-3")


def test_a_vote_with_both_names_and_indices_is_refused():
    from fedforest import PayloadError

    payload = dict(_vote_payload(), features=["bmi", "age"])
    with pytest.raises(PayloadError, match="both present"):
        SiteVote.from_payload(payload, sender="site-3", features=["age", "bmi", "hba1c"])


@pytest.mark.parametrize("key", [1, None, ("site",)], ids=repr)
def test_a_vote_with_a_key_that_is_not_a_string_is_refused(key):
    from fedforest import PayloadError

    payload = _vote_payload()
    payload[key] = "a"
    with pytest.raises(PayloadError, match="field names must be strings"):
        SiteVote.from_payload(payload, sender="site-3", features=["age", "bmi", "hba1c"])


def test_every_feature_keeps_each_column_and_reports_the_vote_as_counted():
    a = SiteVote("a", ["age", "bmi", "hba1c"], [True, False, False], [0.9, 0.1, 0.2], 60)
    b = SiteVote("b", ["age", "bmi"], [True, False], [0.8, 0.3], 40)
    ballot = Ballot([a, b], always_keep=["bmi"])
    every, counted = ballot.every_feature(), ballot.count(1.0)
    assert every.selected == ["age", "bmi", "hba1c"] and every.mask.all()
    assert every.freedom_degree is None and every.to_dict()["freedom_degree"] is None
    assert counted.selected == ["age", "bmi"]  # the union and always_keep: no hba1c
    for field in ("features", "intersection", "union", "disputed", "votes", "sites_with"):
        assert getattr(every, field) == getattr(counted, field)
    assert every.stats == {**counted.stats, "kept": 3}
