"""How swarm sites agree on participants: the canonical payload digest and the receipt rule."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest

from fedforest.federation.agreement import RECEIPT_KINDS, agree, drop_reason, payload_digest

SITES = ["site-1", "site-2", "site-3"]


# --------------------------------------------------------------------------- payload_digest
def test_the_digest_is_a_sha256_in_hex():
    digest = payload_digest({"a": 1})
    assert len(digest) == 64 and set(digest) <= set("0123456789abcdef")
    assert payload_digest({"a": 1}) == digest  # deterministic


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (
            {"a": 1, "b": [2, 3], "c": {"x": 1, "y": 2}},
            {"c": {"y": 2, "x": 1}, "b": [2, 3], "a": 1},
        ),
        ([1, 2, 3], (1, 2, 3)),
        ({"l": [1, (2, [3])]}, {"l": (1, [2, (3,)])}),
        (np.int64(7), 7),
        (np.int32(-7), -7),
        (np.uint8(200), 200),
        (np.float64(0.1), 0.1),
        (np.float32(0.5), 0.5),
        (np.bool_(True), True),
        (np.bool_(False), False),
        (np.str_("age"), "age"),
        (float("nan"), np.float64("nan")),
        ({"n": np.int64(3), "v": [np.float64(1.5)]}, {"n": 3, "v": [1.5]}),
    ],
    ids=repr,
)
def test_the_digest_is_the_same_for_equal_payloads(one, other):
    assert payload_digest(one) == payload_digest(other)


def test_the_digest_of_an_array_ignores_its_memory_layout():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert payload_digest(np.asfortranarray(a)) == payload_digest(a)
    strided = a[:, ::2]
    assert not strided.flags.c_contiguous
    assert payload_digest(strided) == payload_digest(strided.copy())


def test_the_digest_survives_a_deep_copy_of_a_nested_payload():
    payload = {
        "forest": {"threshold": np.linspace(0, 1, 5), "owners": ["site-1", "site-2"]},
        "classes": [0, 1],
        "note": None,
        "raw": b"\x00\x01",
    }
    assert payload_digest(copy.deepcopy(payload)) == payload_digest(payload)


BASE = {"x": np.arange(6, dtype=np.int64), "name": "site-1", "rows": 10}


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({**BASE, "x": np.array([0, 1, 2, 3, 4, 6])}, id="one array value"),
        pytest.param({**BASE, "x": np.arange(6, dtype=np.int32)}, id="array dtype"),
        pytest.param({**BASE, "x": np.arange(6, dtype=np.float64)}, id="array dtype kind"),
        pytest.param({**BASE, "x": np.arange(6).reshape(2, 3)}, id="array shape"),
        pytest.param({**BASE, "x": np.arange(6).reshape(3, 2)}, id="array shape, same bytes"),
        pytest.param({**BASE, "x": np.arange(6).astype(">i8")}, id="array byte order"),
        pytest.param({**BASE, "x": [0, 1, 2, 3, 4, 5]}, id="a list for the array"),
        pytest.param({**BASE, "name": "site-2"}, id="text"),
        pytest.param({**BASE, "name": b"site-1"}, id="bytes for text"),
        pytest.param({**BASE, "rows": 11}, id="number"),
        pytest.param({**BASE, "rows": True}, id="boolean for a number"),
        pytest.param({**BASE, "rows": None}, id="None for a number"),
        pytest.param({**BASE, "extra": 1}, id="a key added"),
        pytest.param({k: v for k, v in BASE.items() if k != "rows"}, id="a key removed"),
    ],
)
def test_the_digest_changes_with_any_value_dtype_or_shape(changed):
    assert payload_digest(changed) != payload_digest(BASE)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (["ab"], ["a", "b"]),
        ({"a": "bc"}, {"ab": "c"}),
        ([[1], 2], [1, [2]]),
        ([], {}),
        ("", None),
        (np.zeros(0, dtype=np.int64), np.zeros((0, 3), dtype=np.int64)),
    ],
    ids=repr,
)
def test_the_digest_does_not_confuse_different_structures(one, other):
    assert payload_digest(one) != payload_digest(other)


def test_integer_keys_are_not_confused_with_text_keys():
    assert payload_digest({"levels": {1: ["a"]}}) != payload_digest({"levels": {"1": ["a"]}})
    assert payload_digest({1: "a", "1": "b"}) == payload_digest({"1": "b", 1: "a"})


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (np.array([1, "a"], dtype=object), "object arrays"),
        ({"trees": np.array([None, None])}, "object arrays"),
        ({"a": {1, 2}}, "set"),
        ({(1, 2): "a"}, "dict keys"),
        ({None: "a"}, "dict keys"),
        ([object()], "object"),
        (1 + 2j, "complex"),
        ({"when": range(3)}, "range"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_object_arrays_and_unknown_types_have_no_digest(value, name):
    with pytest.raises(TypeError, match=name):
        payload_digest(value)


# --------------------------------------------------------------------------- agree
def receipt(**entries) -> dict:
    """A receipt written with underscores for dashes: ``receipt(site_1=("digest", "d1"))``."""
    return {site.replace("_", "-"): {kind: text} for site, (kind, text) in entries.items()}


def all_hold(digests: dict[str, str], responders=SITES) -> dict:
    """Every responder holds the same digest from every site."""
    return {r: {s: {"digest": d} for s, d in digests.items()} for r in responders}


DIGESTS = {s: payload_digest(s) for s in SITES}


def test_equal_receipts_keep_every_site():
    kept, dropped = agree(SITES, all_hold(DIGESTS))
    assert kept == SITES and dropped == {}


def test_a_site_missing_from_one_receipt_is_dropped_with_the_reason():
    receipts = all_hold(DIGESTS)
    del receipts["site-1"]["site-3"]  # site-3's payload never reached site-1
    kept, dropped = agree(SITES, receipts)
    assert kept == ["site-1", "site-2"]
    assert dropped == {"site-3": "its payload reached 2 of the 3 sites that confirmed receipt"}


def test_every_site_applying_the_rule_to_the_same_receipts_drops_the_same_sites():
    receipts = all_hold(DIGESTS)
    del receipts["site-2"]["site-1"]
    results = {site: agree(SITES, dict(receipts)) for site in SITES}
    assert len({repr(r) for r in results.values()}) == 1
    kept, dropped = results["site-3"]
    assert kept == ["site-2", "site-3"] and list(dropped) == ["site-1"]


def test_a_site_that_sent_different_payloads_is_dropped_for_equivocation():
    receipts = all_hold(DIGESTS)
    receipts["site-3"]["site-2"] = {"digest": payload_digest("another payload")}
    kept, dropped = agree(SITES, receipts)
    assert kept == ["site-1", "site-3"]
    assert dropped == {"site-2": "it sent different payloads to different sites (2 versions)"}


def test_three_versions_are_counted():
    receipts = all_hold(DIGESTS)
    receipts["site-1"]["site-2"] = {"digest": payload_digest("v1")}
    receipts["site-3"]["site-2"] = {"digest": payload_digest("v3")}
    _, dropped = agree(SITES, receipts)
    assert dropped["site-2"] == "it sent different payloads to different sites (3 versions)"


def test_a_site_that_failed_is_dropped_with_its_own_reason():
    receipts = {
        "site-1": receipt(
            site_1=("digest", DIGESTS["site-1"]),
            site_2=("failed", "RuntimeError: disk full"),
            site_3=("digest", DIGESTS["site-3"]),
        ),
        "site-3": receipt(
            site_1=("digest", DIGESTS["site-1"]),
            site_2=("failed", "RuntimeError: disk full"),
            site_3=("digest", DIGESTS["site-3"]),
        ),
    }
    kept, dropped = agree(SITES, receipts)
    assert kept == ["site-1", "site-3"]
    assert dropped == {"site-2": "it failed: RuntimeError: disk full"}


def test_a_failure_told_to_one_site_only_still_names_the_failure():
    receipts = all_hold(DIGESTS)
    receipts["site-1"]["site-2"] = {"failed": "ValueError: bad table"}
    receipts["site-3"]["site-2"] = {"refused": "malformed"}
    _, dropped = agree(SITES, receipts)
    assert dropped == {"site-2": "it failed: ValueError: bad table"}  # failure before refusal


def test_a_refused_message_names_the_refusing_site():
    receipts = all_hold(DIGESTS)
    receipts["site-3"]["site-1"] = {"refused": "field 'body' is a list; expected a dict"}
    kept, dropped = agree(SITES, receipts)
    assert kept == ["site-2", "site-3"]
    assert dropped == {
        "site-1": "site-3 refused its message: field 'body' is a list; expected a dict"
    }


def test_the_first_refusing_site_by_name_is_named():
    receipts = all_hold(DIGESTS)
    receipts["site-3"]["site-2"] = {"refused": "reason three"}
    receipts["site-1"]["site-2"] = {"refused": "reason one"}
    _, dropped = agree(SITES, receipts)
    assert dropped == {"site-2": "site-1 refused its message: reason one"}


def test_a_site_whose_receipt_is_missing_is_dropped_even_if_its_payload_arrived():
    receipts = all_hold(DIGESTS, responders=["site-1", "site-2"])  # site-3's receipt is lost
    kept, dropped = agree(SITES, receipts)
    assert kept == ["site-1", "site-2"]
    assert dropped == {"site-3": "its receipt did not reach the other sites in time"}


def test_a_site_nothing_arrived_from_is_dropped():
    receipts = all_hold({s: DIGESTS[s] for s in ("site-1", "site-2")}, ["site-1", "site-2"])
    kept, dropped = agree(SITES, receipts)
    assert kept == ["site-1", "site-2"]
    assert dropped == {"site-3": "no message from it reached any site in time"}


def test_without_any_receipt_every_site_is_dropped():
    kept, dropped = agree(SITES, {})
    assert kept == []
    assert dropped == {s: "no message from it reached any site in time" for s in SITES}


def test_receipts_and_entries_of_sites_that_are_not_candidates_are_ignored():
    receipts = all_hold(DIGESTS)
    receipts["site-9"] = {"site-1": {"digest": payload_digest("forged")}}
    receipts["site-1"]["site-9"] = {"digest": payload_digest("site-9")}
    kept, dropped = agree(SITES, receipts)
    assert kept == SITES and dropped == {}
    # a site left out earlier no longer counts, whatever its receipt says
    kept, dropped = agree(["site-1", "site-2"], receipts)
    assert kept == ["site-1", "site-2"] and dropped == {}


def test_drop_reason_is_the_reason_agree_gives():
    receipts = all_hold(DIGESTS)
    del receipts["site-1"]["site-3"]
    _, dropped = agree(SITES, receipts)
    assert drop_reason("site-3", SITES, receipts) == dropped["site-3"]
    assert RECEIPT_KINDS == ("digest", "failed", "refused")


def shuffled(receipts: dict, rng: random.Random) -> dict:
    """The same receipts, inserted in a random order (the receipts and their entries)."""

    def mix(mapping: dict) -> list:
        items = list(mapping.items())
        rng.shuffle(items)
        return items

    return {r: dict(mix(entries)) for r, entries in mix(receipts)}


MIXED_RECEIPTS = {
    "site-1": {
        "site-1": {"digest": DIGESTS["site-1"]},
        "site-2": {"digest": DIGESTS["site-2"]},
        "site-3": {"refused": "wrong view"},
        "site-4": {"digest": DIGESTS["site-1"]},
        "site-5": {"refused": "r5"},
    },
    "site-2": {
        "site-1": {"digest": DIGESTS["site-1"]},
        "site-2": {"digest": DIGESTS["site-2"]},
        "site-3": {"digest": DIGESTS["site-3"]},
        "site-4": {"digest": DIGESTS["site-2"]},
        "site-5": {"failed": "f5"},
    },
    "site-4": {
        "site-1": {"digest": DIGESTS["site-1"]},
        "site-2": {"digest": DIGESTS["site-2"]},
        "site-4": {"digest": DIGESTS["site-1"]},
    },
}


@pytest.mark.parametrize("seed", range(20))
def test_the_outcome_never_depends_on_the_order_of_the_receipts(seed):
    candidates = ["site-1", "site-2", "site-3", "site-4", "site-5", "site-6"]
    expected = agree(candidates, MIXED_RECEIPTS)
    assert expected == (
        ["site-1", "site-2"],
        {
            "site-3": "site-1 refused its message: wrong view",
            "site-4": "it sent different payloads to different sites (2 versions)",
            "site-5": "it failed: f5",
            "site-6": "no message from it reached any site in time",
        },
    )
    rng = random.Random(seed)
    order = candidates[:]
    rng.shuffle(order)
    kept, dropped = agree(order, shuffled(MIXED_RECEIPTS, rng))
    assert kept == expected[0]
    assert dropped == expected[1] and list(dropped) == list(expected[1])
