"""Real payloads and the mutations a hostile or careless sender could make of them.

Shared by ``test_payload_fuzz.py`` (random mutations) and
``test_payload_regressions.py`` (the known failures, one by one). Everything is
built from real scikit-learn forests: two sites with different columns, a
categorical feature, missing values seen in training, surrogate splits,
imputers, an intersection forest and a model bundle.
"""

from __future__ import annotations

import copy
import functools
import io
import struct
import warnings
import zipfile
from collections.abc import Callable

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from fedforest import ImputerSet, PooledForest, PooledForestClassifier, fit_imputers
from fedforest.election.ballot import SiteVote
from fedforest.model.pooled_model import PooledModel, PredictionSettings
from fedforest.model.surrogates import fit_surrogates
from fedforest.vocabulary import STRATEGIES

LEVELS = ["low", "mid", "high"]
SHARED = ["x0", "x1"]
COLS = {"site-a": ["x0", "x1", "x2", "c"], "site-b": ["x0", "x1", "x3"]}
FEATURES = sorted({c for cols in COLS.values() for c in cols})  # the global schema's order


@functools.lru_cache(maxsize=1)
def _parts() -> dict:
    rng = np.random.RandomState(0)
    n = 400
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["x0", "x1", "x2", "x3"])
    X["c"] = np.digitize(X["x0"] + rng.normal(scale=0.5, size=n), [-0.5, 0.5]).astype(float)
    y = ((X["x0"] + 0.8 * X["x2"] - 0.6 * X["x3"] + 0.3 * X["c"]) > 0).astype(int).to_numpy()
    X.loc[rng.rand(n) < 0.08, "x2"] = np.nan  # missing values seen in training
    halves = {"site-a": slice(0, 200), "site-b": slice(200, 400)}
    forests, inters, imputers = [], [], []
    for seed, (owner, cols) in enumerate(COLS.items(), start=1):
        Xs = X.iloc[halves[owner]][cols]
        ys = y[halves[owner]]
        cats = {"c": LEVELS} if "c" in cols else {}
        rf = RandomForestClassifier(n_estimators=4, max_depth=4, random_state=seed)
        rf.fit(Xs.to_numpy(np.float32), ys)
        forest = PooledForest.from_sklearn(rf, cols, owner, X=Xs, categories=cats)
        forests.append(fit_surrogates(forest, Xs, SHARED, min_agreement=-1.0, min_rows=2))
        ri = RandomForestClassifier(n_estimators=2, max_depth=3, random_state=seed)
        ri.fit(Xs[SHARED].to_numpy(np.float32), ys)
        inters.append(PooledForest.from_sklearn(ri, SHARED, owner))
        private = [c for c in cols if c not in SHARED]
        imputers.append(fit_imputers(Xs, private, SHARED, categories=cats, owner=owner, cv=None))
    forest = PooledForest.concat(forests)
    assert (forest.surrogate_feature >= 0).any() and forest.saw_missing.any()
    selected = ImputerSet.select(imputers)
    assert {imp.kind for imp in selected.values()} == {"numeric", "categorical"}
    std = {c: float(X[c].std(ddof=0)) for c in ["x0", "x1", "x2", "x3"]}
    vote = SiteVote(
        "site-a",
        COLS["site-a"],
        np.array([True, True, False, True]),
        np.array([0.5, 0.25, 0.0, 0.125]),
        200,
    )
    return {
        "X": X,
        "y": y,
        "forest": forest,
        "imputers": selected,
        "feature_std": std,
        "intersection": PooledForest.concat(inters),
        "vote": vote,
    }


def parts() -> dict:
    """The real objects (shared; do not modify them)."""
    return _parts()


def forest_payload() -> dict:
    return parts()["forest"].to_payload()


def imputers_payload() -> dict:
    return parts()["imputers"].to_payload()


def vote_payload(by_index: bool = True) -> dict:
    index = {f: i for i, f in enumerate(FEATURES)} if by_index else None
    return parts()["vote"].to_payload(index)


def bundle() -> dict:
    p = parts()
    return PooledModel(
        p["forest"],
        p["imputers"],
        p["feature_std"],
        p["intersection"],
        PredictionSettings(depth_threshold=1, voting="soft", seed=0),
    ).to_payload()


# ------------------------------------------------------------------ predictions
def view_frames(forest: PooledForest, seed: int = 0) -> list[pd.DataFrame]:
    """Two sites' views of some rows: columns absent, NaN values, codes for categories."""
    rng = np.random.default_rng(seed)
    X = parts()["X"].iloc[:24]
    frames = []
    for cols in (["x0", "x1", "x3"], ["x0", "x1", "c"]):
        cols = [c for c in cols if c in forest.feature_names]
        if not cols:
            cols = [forest.feature_names[0]]
        frame = pd.DataFrame(index=range(len(X)))
        for c in cols:
            levels = forest.categories.get(c)
            if levels is not None:
                values = rng.integers(0, len(levels), size=len(X)).astype(float)
            elif c in X:
                values = X[c].to_numpy(dtype=float).copy()
            else:
                values = rng.normal(size=len(X))
            values[rng.random(len(X)) < 0.2] = np.nan
            frame[c] = values
        frames.append(frame)
    return frames


def assert_valid_predictions(
    forest: PooledForest,
    imputers=None,
    feature_std=None,
    depth_threshold: int = 1,
    voting: str = "soft",
    seed=0,
    strategies=STRATEGIES,
) -> int:
    """Every strategy gives finite probabilities in [0, 1] whose rows sum to 1."""
    checked = 0
    for X in view_frames(forest):
        for strategy in strategies:
            clf = PooledForestClassifier(
                forest,
                strategy=strategy,
                imputers=imputers,
                feature_std=feature_std,
                depth_threshold=depth_threshold,
                voting=voting,
                site=forest.owners[0],
                random_state=seed,
                guess_weight=0.3,
            )
            proba = clf.predict_proba(X)
            where = f"strategy {strategy!r}, columns {list(X.columns)}"
            assert proba.shape == (len(X), forest.n_classes), where
            assert np.isfinite(proba).all(), where
            assert (proba >= 0).all() and (proba <= 1).all(), where
            np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6, err_msg=where)
            checked += 1
    return checked


# ------------------------------------------------------------------ mutations
class Mutator:
    """Random, general mutations of a nested payload (dicts, lists, arrays, plain values)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    # every place a value sits: (container, key) pairs, nested ones included
    def places(self, payload) -> list[tuple]:
        out = []

        def walk(container):
            keys = container.keys() if isinstance(container, dict) else range(len(container))
            for k in list(keys):
                out.append((container, k))
                value = container[k]
                if isinstance(value, (dict, list)):
                    walk(value)

        walk(payload)
        return out

    def mutate(self, payload, n: int = 1, values_only: bool = False) -> tuple[object, list[str]]:
        """A mutated deep copy of ``payload`` and a description of each mutation.

        ``values_only`` changes only elements of arrays and numbers, keeping
        every type and shape: most such payloads are well formed, so their
        predictions get checked.
        """
        payload = copy.deepcopy(payload)
        notes = []
        for _ in range(n):
            places = self.places(payload)
            if values_only:
                places = [
                    (c, k)
                    for c, k in places
                    if isinstance(c[k], (np.ndarray, float)) and not isinstance(c[k], bool)
                ]
            if not places:
                break
            container, key = self.pick(places)
            action = self.pick(
                ["replace", "replace", "element", "element", "element", "delete", "extra"]
            )
            if values_only:
                action = "element"
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")  # casts of NaN to int and such: meant
                self._apply(container, key, action, notes)
        return payload, notes

    def _apply(self, container, key, action: str, notes: list[str]) -> None:
        if action == "delete":
            del container[key]
            notes.append(f"delete {key!r}")
        elif action == "extra":
            name = self.pick(["extra", "code", 1, ("a",), None, 2.5])
            if isinstance(container, dict):
                container[name] = self.wild(container[key])
            else:
                container.append(self.wild(container[key]))
            notes.append(f"extra {name!r} next to {key!r}")
        elif action == "element":
            old = container[key]
            container[key] = self.element(old)
            notes.append(f"element of {key!r}")
        else:
            container[key] = self.wild(container[key])
            notes.append(f"replace {key!r} by {_short(container[key])}")

    # a value of another kind entirely
    def wild(self, old):
        rng = self.rng
        arr = old if isinstance(old, np.ndarray) else None
        makers: list[Callable[[], object]] = [
            lambda: None,
            lambda: True,
            lambda: False,
            lambda: 0,
            lambda: -1,
            lambda: 1,
            lambda: 2**31,
            lambda: 2**63,
            lambda: -(2**70),
            lambda: 10**400,
            lambda: float("nan"),
            lambda: float("inf"),
            lambda: -1e308,
            lambda: 0.5,
            lambda: np.int64(3),
            lambda: np.float32(0.25),
            lambda: np.bool_(True),
            lambda: "",
            lambda: "x0",
            lambda: "fedforest/pooled-forest",
            lambda: "numeric",
            lambda: [],
            lambda: [1, "a", None],
            lambda: ["x0", "x0"],
            lambda: [["x0"]],
            lambda: {},
            lambda: {"a": 1},
            lambda: {1: 2},
            lambda: {"format": "fedforest/imputers", "version": 1},
            lambda: np.array(["a", "b"]),
            lambda: np.array("numeric"),
            lambda: np.array(["fedforest/pooled-forest"]),
            lambda: np.array(1),
            lambda: np.array([1.5, np.nan]),
            lambda: np.array([None, 1], dtype=object),
            lambda: np.zeros(0),
            lambda: np.zeros((2, 2), dtype=np.int32),
            lambda: np.arange(5, dtype=np.uint64) + np.uint64(2**63),
            lambda: rng.normal(size=7),
        ]
        if arr is not None:
            makers += [
                lambda: arr.astype(self.pick([np.float64, np.int32, np.bool_, np.uint8, "U3"])),
                lambda: arr[:-1],
                lambda: arr[1:],
                lambda: np.concatenate([arr, arr[:1]]) if arr.ndim and arr.size else arr,
                lambda: arr.reshape(-1, 1),
                lambda: arr[None],
                lambda: arr.ravel(),
                lambda: arr.T,
                lambda: arr.tolist(),
                lambda: arr[0] if arr.ndim and arr.size else arr,
                lambda: np.broadcast_to(arr.ravel()[:1], (3,)) if arr.size else arr,
                lambda: arr.astype(object),
                lambda: arr.astype(arr.dtype.newbyteorder()),
            ]
        if isinstance(old, list):
            makers += [
                lambda: old[:-1],
                lambda: old + old[:1],
                lambda: old[::-1],
                lambda: np.array(old) if old and all(isinstance(v, str) for v in old) else old,
                lambda: tuple(old),
                lambda: [*old, "zz"],
            ]
        return self.pick(makers)()

    # the same kind of value with one part changed (more payloads get accepted)
    def element(self, old):
        rng = self.rng
        if isinstance(old, np.ndarray) and old.size:
            out = old.copy()
            flat = out.reshape(-1)
            i = int(rng.integers(flat.size))
            kind = out.dtype.kind
            if kind in "iu":
                choice = self.pick(["value", "value", "permute", "huge"])
                if choice == "permute" and out.ndim == 1:
                    return rng.permutation(out)
                info = np.iinfo(out.dtype)
                if choice == "huge":
                    new = self.pick([info.max, info.min])
                else:
                    new = self.pick([-2, -1, 0, 1, 2, 3, 5, 40, int(flat[i]) + 1])
                flat[i] = min(max(new, info.min), info.max)
            elif kind == "f":
                flat[i] = self.pick(
                    [
                        np.nan,
                        np.inf,
                        -np.inf,
                        0.0,
                        1.0,
                        -1.0,
                        1e300,
                        -1e300,
                        1e-300,
                        2.5,
                        float(rng.normal()),
                        float(rng.random()),
                        float(flat[i]) * 10,
                    ]
                )
            elif kind == "b":
                flat[i] = not flat[i]
            elif kind == "U":
                flat[i] = self.pick(["", "x0", "zz", str(flat[i]) + "!"])
            return out
        if isinstance(old, list) and old:
            out = list(old)
            i = int(rng.integers(len(out)))
            choice = self.pick(["set", "set", "shuffle", "drop", "dup"])
            if choice == "shuffle":
                return [out[j] for j in rng.permutation(len(out))]
            if choice == "drop":
                return out[:i] + out[i + 1 :]
            if choice == "dup":
                return [*out, out[i]]
            out[i] = self.pick(["", "x0", "x3", "zz", 0, 2, -1, 2**64, None, True, 1.5, ["a"]])
            return out
        if isinstance(old, bool):
            return not old
        if isinstance(old, int):
            return self.pick([old + 1, old - 1, 0, -1, 2**31, 2**63, 10**30, True])
        if isinstance(old, float):
            return self.pick([old * 1e300, -old, float("nan"), float("inf"), 0.0, 1.0])
        if isinstance(old, str):
            return self.pick(["", old + "x", old.upper(), "x0", "categorical", "site-b"])
        return self.wild(old)


def _short(value) -> str:
    if isinstance(value, np.ndarray):
        return f"array {value.dtype} {value.shape}"
    text = repr(value)
    return text if len(text) < 40 else text[:37] + "..."


# ------------------------------------------------------------------ zip files
def npz_entries(path) -> list[tuple[str, bytes]]:
    """(name, uncompressed bytes) of every entry of a zip file, in order."""
    with zipfile.ZipFile(path) as zf:
        return [(info.filename, zf.read(info)) for info in zf.infolist()]


def write_zip(entries: list[tuple[str, bytes]], compress: bool = True) -> bytes:
    """A zip file of the given entries (duplicate names allowed)."""
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", method) as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name": meant
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            with zf.open(info, "w") as fh:
                fh.write(data)
    return buf.getvalue()


def set_declared_size(data: bytes, index: int, size: int) -> bytes:
    """Patch the uncompressed size of entry ``index`` in the zip's central directory."""
    out = bytearray(data)
    pos = out.find(b"PK\x01\x02")
    for _ in range(index):
        pos = out.find(b"PK\x01\x02", pos + 4)
    struct.pack_into("<I", out, pos + 24, size & 0xFFFFFFFF)
    return bytes(out)


def deflate_bomb(name: str, size: int, declared: int | None = None) -> tuple[bytes, bytes]:
    """One ``.npy`` entry of ``size`` bytes (a header, then zeros), deflated by hand.

    Returns the entry's local part and its central directory record (offset
    0; :func:`append_raw_entry` sets it). The zeros are repeated compressed
    blocks, so gigabytes cost a few megabytes and no time to build. With
    ``declared``, the zip headers and the ``.npy`` header claim that many
    bytes instead (the stream inflates to more than the entry declares), and
    the CRC is that of the first ``declared`` bytes.
    """
    import zlib

    header = npy_header(np.dtype(np.uint8), size if declared is None else declared)
    zeros = size - len(header)
    chunk = 1 << 20
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = comp.compress(header) + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(bytes(chunk)) + comp.flush(zlib.Z_FULL_FLUSH)
    full, rest = divmod(zeros, chunk)
    body = first + block * full + comp.compress(bytes(rest)) + comp.flush()
    crc = 0  # never checked: the entry must be refused before it is inflated
    if declared is not None:
        crc = zlib.crc32(header + bytes(declared - len(header)))
        size = declared
    raw = name.encode()
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(body), size, len(raw), 0
    )
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        *(0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(body), size, len(raw), 0, 0, 0, 0, 0, 0),
    )
    return local + raw + body, central + raw


def npy_header(dtype: np.dtype, total: int) -> bytes:
    """The .npy header of a 1-d array whose entry (header and data) has ``total`` bytes."""
    n = total
    for _ in range(3):  # the header's length depends on the digits of the shape
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            buf,
            {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n,)},
        )
        n = (total - len(buf.getvalue())) // dtype.itemsize
    return buf.getvalue()


def append_raw_entry(data: bytes, local: bytes, central: bytes) -> bytes:
    """Append a hand-built entry (local part and central record) to a zip file."""
    end = data.rfind(b"PK\x05\x06")
    (sig, disk, cd_disk, n_disk, n_total, cd_size, cd_offset, comment_len) = struct.unpack(
        "<IHHHHIIH", data[end : end + 22]
    )
    central_dir = data[cd_offset : cd_offset + cd_size]
    head = data[:cd_offset]
    new_offset = len(head)
    central = central[:42] + struct.pack("<I", new_offset) + central[46:]
    cd = central_dir + central
    start = new_offset + len(local)
    tail = struct.pack("<IHHHHIIH", sig, disk, cd_disk, n_disk + 1, n_total + 1, len(cd), start, 0)
    return head + local + cd + tail
