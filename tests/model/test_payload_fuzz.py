"""Seeded fuzzing of every payload reader and of the model file loader.

Each test mutates a real payload a few hundred times (random fields, nested
ones too, replaced by None, other types, other dtypes, other shapes, NaN/inf,
huge or negative integers, bools, permutations, deleted and extra keys; zip
files with extra, renamed, duplicate or inflated entries and cut or flipped
bytes) and asserts two things:

* only :class:`fedforest.PayloadError` escapes the reader, and it names the
  sender;
* whatever is accepted predicts valid probabilities with every strategy
  (finite, in [0, 1], rows summing to 1) on rows with absent columns and NaN.

The seeds are fixed, so a failure is reproducible; its message lists the
mutations that caused it.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from fedforest import STRATEGIES, ImputerSet, PayloadError, PooledForest, PooledForestClassifier
from fedforest.election.ballot import SiteVote
from fedforest.model.model_files import save_payload
from fedforest.model.pooled_model import PooledModel, load_model

from .hostile import (
    FEATURES,
    Mutator,
    assert_valid_predictions,
    bundle,
    forest_payload,
    imputers_payload,
    npz_entries,
    parts,
    set_declared_size,
    vote_payload,
    write_zip,
)

SENDER = "site-3"
N_MUTATIONS = 300


def fuzz(payload, read, check, seed: int, n: int = N_MUTATIONS, values_only=False) -> dict:
    """Mutate ``payload`` ``n`` times; ``read`` must accept or raise PayloadError."""
    mutator = Mutator(np.random.default_rng(seed))
    counts = {"accepted": 0, "refused": 0}
    for i in range(n):
        bad, notes = mutator.mutate(payload, n=1 + i % 3, values_only=values_only)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)  # no silent overflow or NaN
                result = read(bad)
        except PayloadError as err:
            assert SENDER in str(err), (notes, str(err))
            counts["refused"] += 1
            continue
        except Exception as err:  # noqa: BLE001 - report the mutation that caused it
            raise AssertionError(f"mutation {i} {notes}: {type(err).__name__}: {err}") from err
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                check(result)
        except Exception as err:  # noqa: BLE001
            raise AssertionError(f"mutation {i} {notes} accepted, then: {err!r}") from err
        counts["accepted"] += 1
    # the mutations must exercise both outcomes, or the test proves little
    assert counts["refused"] > n // 10 and counts["accepted"] > n // 20, counts
    return counts


#: "any": every kind of mutation; "values": only array elements and numbers, so
#: that many mutated payloads are accepted and their predictions checked.
MODES = {"any": (N_MUTATIONS, False), "values": (N_MUTATIONS // 2, True)}


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_pooled_forest(mode):
    p = parts()
    n, values_only = MODES[mode]

    def check(forest):
        assert_valid_predictions(forest, p["imputers"], p["feature_std"])

    def read(q):
        return PooledForest.from_payload(q, SENDER)

    fuzz(forest_payload(), read, check, seed=1 + values_only, n=n, values_only=values_only)


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_imputers(mode):
    p = parts()
    n, values_only = MODES[mode]

    def check(imputers):
        assert_valid_predictions(p["forest"], imputers, p["feature_std"])

    def read(q):
        return ImputerSet.from_payload(q, SENDER)

    fuzz(imputers_payload(), read, check, seed=3 + values_only, n=n, values_only=values_only)


@pytest.mark.parametrize("by_index", [True, False], ids=["feature_index", "features"])
def test_fuzz_site_vote(by_index):
    def check(vote):
        assert isinstance(vote.site, str) and vote.site
        n = len(vote.features)
        assert all(isinstance(f, str) for f in vote.features)
        assert vote.mask.dtype == bool and vote.mask.shape == (n,)
        assert vote.scores.dtype == np.float64 and vote.scores.shape == (n,)
        assert np.isfinite(vote.scores).all()
        assert isinstance(vote.n_rows, int) and vote.n_rows >= 1

    def read(q):
        return SiteVote.from_payload(q, SENDER, features=FEATURES)

    fuzz(vote_payload(by_index), read, check, seed=5 + by_index, n=N_MUTATIONS // 2)


def check_model(model: PooledModel) -> None:
    settings = model.settings
    assert_valid_predictions(
        model.forest,
        model.imputers,
        model.feature_std,
        depth_threshold=2 if settings.depth_threshold is None else settings.depth_threshold,
        voting=settings.voting or "soft",
        seed=settings.seed,
    )
    if model.intersection is not None:
        assert_valid_predictions(model.intersection, strategies=("fpv",))


@pytest.mark.parametrize("mode", MODES)
def test_fuzz_model_from_payload(mode):
    n, values_only = MODES[mode]

    def read(q):
        return PooledModel.from_payload(q, SENDER)

    fuzz(bundle(), read, check_model, seed=7 + values_only, n=n, values_only=values_only)


# ------------------------------------------------------------------ model files
def _file_mutation(rng: np.random.Generator, entries, data: bytes) -> tuple[bytes, str]:
    """A zip-level mutation of a valid model file."""
    names = [name for name, _ in entries]
    i = int(rng.integers(len(entries)))
    name, blob = entries[i]
    choice = int(rng.integers(11))
    if choice == 0:  # an extra entry
        extra = str(rng.choice(["a999.npy", "evil.txt", "a1.npy", "__structure__.npy", "dir/"]))
        return write_zip([*entries, (extra, blob)]), f"extra entry {extra}"
    if choice == 1:  # a renamed entry
        new = str(rng.choice(["a999.npy", "x.npy", "a01.npy", names[-1], "../a0.npy"]))
        out = list(entries)
        out[i] = (new, blob)
        return write_zip(out), f"rename {name} -> {new}"
    if choice == 2:  # a deleted entry
        return write_zip(entries[:i] + entries[i + 1 :]), f"delete {name}"
    if choice == 3:  # truncated bytes
        cut = int(rng.integers(len(data)))
        return data[:cut], f"truncate at {cut}"
    if choice == 4:  # flipped bytes
        out = bytearray(data)
        for pos in rng.integers(len(out), size=int(rng.integers(1, 4))):
            out[pos] ^= int(rng.integers(1, 256))
        return bytes(out), "flip bytes"
    if choice == 5:  # an inflated (or shrunk) declared size
        size = int(rng.choice([len(blob) + 1, len(blob) - 1, len(blob) * 1000, 3 * 2**30, 0]))
        return set_declared_size(data, i, size), f"declare {name} as {size} bytes"
    if choice == 6:  # an entry whose bytes are another array's
        j = int(rng.integers(len(entries)))
        out = list(entries)
        out[i] = (name, entries[j][1])
        return write_zip(out), f"{name} holds {entries[j][0]}'s bytes"
    if choice == 7:  # an entry holding an object array (needs pickle)
        import io

        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
        out = list(entries)
        out[i] = (name, buf.getvalue())
        return write_zip(out), f"{name} holds an object array"
    if choice == 8:  # stored instead of deflated, with an entry's bytes cut
        out = list(entries)
        out[i] = (name, blob[: int(rng.integers(len(blob) + 1))])
        return write_zip(out, compress=False), f"cut {name}"
    if choice == 9:  # a structure that references other entries or is not JSON
        meta = dict(entries)["__structure__.npy"]
        text = str(np.lib.format.read_array(__import__("io").BytesIO(meta)))
        new = str(
            rng.choice(
                [
                    text.replace('"a1"', '"a2"', 1),
                    text.replace('"a3"', '"a999"', 1),
                    text[: len(text) // 2],
                    "[" * 100_000 + "]" * 100_000,
                    json.dumps({"format": "fedforest/model", "version": 1}),
                    text.replace("1", "1e999", 3),
                ]
            )
        )
        buf = __import__("io").BytesIO()
        np.lib.format.write_array(buf, np.array(new))
        out = [(n, buf.getvalue() if n == "__structure__.npy" else b) for n, b in entries]
        return write_zip(out), "structure changed"
    # a payload-level mutation written as a file
    return b"", "payload"


def test_fuzz_model_files(tmp_path):
    mutator = Mutator(np.random.default_rng(9))
    rng = np.random.default_rng(10)
    good = save_payload(tmp_path / "good.npz", bundle())
    data = good.read_bytes()
    entries = npz_entries(good)
    counts = {"accepted": 0, "refused": 0, "unsavable": 0}
    path = tmp_path / "mutated.npz"
    for i in range(N_MUTATIONS):
        blob, note = _file_mutation(rng, entries, data)
        if note == "payload":
            bad, notes = mutator.mutate(bundle(), n=1 + i % 2)
            note = f"payload {notes}"
            try:
                save_payload(path, bad)
            except TypeError:  # save_payload writes only payload values
                counts["unsavable"] += 1
                continue
        else:
            path.write_bytes(blob)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                model = load_model(path, max_bytes=64 * 2**20)
        except PayloadError as err:
            assert str(path) in str(err), (note, str(err))
            counts["refused"] += 1
            continue
        except Exception as err:  # noqa: BLE001
            raise AssertionError(f"mutation {i} ({note}): {type(err).__name__}: {err}") from err
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                check_model(model)
        except Exception as err:  # noqa: BLE001
            raise AssertionError(f"mutation {i} ({note}) accepted, then: {err!r}") from err
        counts["accepted"] += 1
    assert counts["refused"] > N_MUTATIONS // 3 and counts["accepted"] > 0, counts


def test_the_unmutated_payloads_are_accepted_and_predict(tmp_path):
    """The fuzzed originals themselves are valid (so refusals come from the mutations)."""
    p = parts()
    forest = PooledForest.from_payload(forest_payload(), SENDER)
    imputers = ImputerSet.from_payload(imputers_payload(), SENDER)
    assert assert_valid_predictions(forest, imputers, p["feature_std"]) == 2 * len(STRATEGIES)
    SiteVote.from_payload(vote_payload(), SENDER, features=FEATURES)
    SiteVote.from_payload(vote_payload(by_index=False), SENDER)
    check_model(PooledModel.from_payload(bundle(), SENDER))
    check_model(load_model(save_payload(tmp_path / "m", bundle())))
    # and equal the originals' predictions
    X = p["X"].iloc[:50][["x0", "x1", "x3"]]
    for strategy in ("mp", "ipr", "ss"):
        kwargs = dict(strategy=strategy, feature_std=p["feature_std"], random_state=0)
        a = PooledForestClassifier(p["forest"], imputers=p["imputers"], **kwargs)
        b = PooledForestClassifier(forest, imputers=imputers, **kwargs)
        np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
