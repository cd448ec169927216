"""Edited model files, part by part and field by field.

Every edit of a saved model (the ``.npz`` entries and its JSON structure: the
pooled forest, the intersection forest, the imputers, the standard deviations,
the settings, the deployment with its calibrator, the input mapping) is either
refused naming the file, the field and what a job writes there, or loads and
predicts as a job's own file does. Never a traceback, never a raw numpy
warning: every load and prediction runs with warnings as errors.
"""

from __future__ import annotations

import copy
import io
import json
import warnings
import zipfile

import numpy as np
import pytest

from fedforest import PayloadError, PooledForestClassifier
from fedforest.model.calibrator import MAX_PRIOR_RATIO, MAX_SIGMOID_PARAMETER
from fedforest.model.inputs import FLOAT32_MAX
from fedforest.model.model_files import save_payload
from fedforest.model.pooled_model import load_model
from fedforest.model.site_inputs import SiteInputs
from fedforest.prediction.calibration import fit_calibration, training_prior

from .hostile import bundle, parts

STRATEGIES = ("mp", "ipr", "mi", "fpv", "wmp", "park")
#: How a refusal says what is allowed instead.
FIX = ("expected", "allowed", "must", "the format writes", "reads versions", "is missing")


def _model(method: str = "sigmoid") -> dict:
    """The hostile parts' model as a site saves it: a fitted calibrator and its inputs."""
    p = parts()
    forest = p["forest"]
    rows = p["X"].iloc[:200][forest.feature_names]
    proba = PooledForestClassifier(forest, strategy="mp", random_state=0).predict_proba(rows)
    prior = training_prior(forest.value, forest.tree_start[:-1])
    fit = fit_calibration(proba, p["y"][:200], forest.classes, method, train_prior=prior)
    assert fit.calibrator.method == method
    model = copy.deepcopy(bundle())
    model["deployment"] = {
        "site": "site-a",
        "strategy": "mp",
        "calibrator": fit.calibrator.to_payload(),
        "guess_weight": None,
    }
    model["inputs"] = SiteInputs(site="site-a", target="y", positive_class=1).to_payload()
    return model


@pytest.fixture(scope="module")
def models() -> dict:
    return {m: _model(m) for m in ("sigmoid", "prior", "isotonic")}


def imputer(model: dict, kind: str) -> dict:
    return next(e for e in model["imputers"]["imputers"] if e["kind"] == kind)


def load_quietly(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_model(path)


def assert_predicts(model: dict) -> None:
    """The loaded model predicts finite probabilities that sum to 1, without a warning."""
    X = parts()["X"].iloc[:40].copy()
    X.loc[::3, "x2"] = np.nan
    settings = model.settings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for strategy in STRATEGIES:
            clf = PooledForestClassifier(
                model.forest,
                strategy=strategy,
                imputers=model.imputers,
                feature_std=model.feature_std,
                depth_threshold=2 if settings.depth_threshold is None else settings.depth_threshold,
                owner_weights=settings.owner_weights,
                site="site-a",
                random_state=0,
                guess_weight=0.3,
            )
            for columns in (["x0", "x1", "x3"], ["x0", "x1", "x2", "c"]):
                proba = clf.predict_proba(X[columns])
                if model.deployment is not None and model.deployment.calibrator:
                    proba = model.deployment.calibrator.transform(proba)
                assert np.isfinite(proba).all(), strategy
                np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)


# ------------------------------------------------------------------------ the edits
def _set(*path, value):
    def edit(m):
        target = m
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value(target[path[-1]]) if callable(value) else value

    return edit


def _imp(kind: str, field: str, value):
    def edit(m):
        entry = imputer(m, kind)
        entry[field] = value(entry[field]) if callable(value) else value

    return edit


def _full(v):
    return lambda old: np.full_like(old, v)


def _first(v):
    def change(old):
        new = old.copy()
        new.flat[0] = v
        return new

    return change


def _predictors(names):
    def edit(m):
        entry = imputer(m, "numeric")
        p = len(names)
        entry.update(predictors=names, center=np.zeros(p), scale=np.ones(p), coef=np.zeros(p))

    return edit


def _cal(**params):
    def edit(m):
        m["deployment"]["calibrator"]["params"].update(
            {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
        )

    return edit


def _pop(*path):
    def edit(m):
        target = m
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


def _padding_bit(m):
    bits = m["forest"]["surrogate_left_le"].copy()
    bits[-1] |= 1  # the last byte's lowest bit: past the last of its 33 flags
    m["forest"]["surrogate_left_le"] = bits


def _older(version, **fields):
    def edit(m):
        for later in ("deployment", "inputs")[version - 1 :]:
            m.pop(later)
        m.update(version=version, **fields)

    return edit


#: (id, calibrator of the model, edit, fragments the refusal names).
REFUSED = [
    # the bundle itself
    ("format", "sigmoid", _set("format", value="fedforest/other"), ["'format'"]),
    ("version-4", "sigmoid", _set("version", value=4), ["version 4 is not supported"]),
    ("version-0", "sigmoid", _set("version", value=0), ["'version'", "positive"]),
    ("version-text", "sigmoid", _set("version", value="3"), ["'version'", "positive integer"]),
    ("version-bool", "sigmoid", _set("version", value=True), ["'version'"]),
    ("extra-field", "sigmoid", _set("notes", value="x"), ["unknown fields ['notes']"]),
    ("no-forest", "sigmoid", _pop("forest"), ["field 'forest' is missing"]),
    ("v1-deployment", "sigmoid", _older(1, deployment=None), ["belongs to version 2"]),
    ("v1-inputs", "sigmoid", _older(1, inputs=None), ["belongs to version 3"]),
    ("v2-inputs", "sigmoid", _older(2, inputs=None), ["belongs to version 3"]),
    # settings
    ("depth-negative", "sigmoid", _set("settings", "depth_threshold", value=-1), ["depth_"]),
    ("depth-huge", "sigmoid", _set("settings", "depth_threshold", value=2**40), ["depth_"]),
    ("depth-float", "sigmoid", _set("settings", "depth_threshold", value=1.5), ["depth_"]),
    ("voting", "sigmoid", _set("settings", "voting", value="majority"), ["settings.voting"]),
    ("seed-negative", "sigmoid", _set("settings", "seed", value=-1), ["settings.seed"]),
    ("seed-huge", "sigmoid", _set("settings", "seed", value=2**32), ["settings.seed"]),
    ("seed-text", "sigmoid", _set("settings", "seed", value="0"), ["settings.seed"]),
    ("setting-extra", "sigmoid", _set("settings", "engine", value="numba"), ["'engine'"]),
    ("weights-empty", "sigmoid", _set("settings", "owner_weights", value={}), ["owner_weights"]),
    (
        "weights-negative",
        "sigmoid",
        _set("settings", "owner_weights", value={"site-a": -1.0, "site-b": 1.0}),
        ["owner_weights.site-a", "-1.0"],
    ),
    (
        "weights-nan",
        "sigmoid",
        _set("settings", "owner_weights", value={"site-a": float("nan"), "site-b": 1.0}),
        ["owner_weights.site-a"],
    ),
    (
        "weights-unknown-site",
        "sigmoid",
        _set("settings", "owner_weights", value={"site-a": 1.0, "site-c": 1.0}),
        ["owner_weights", "site-c"],
    ),
    (
        "weights-path-site",
        "sigmoid",
        _set("settings", "owner_weights", value={"site-a": 1.0, "../b": 1.0}),
        ["owner_weights", "'../b'"],
    ),
    # feature_std
    ("std-negative", "sigmoid", _set("feature_std", "x0", value=-1.0), ["feature_std", "'x0'"]),
    ("std-beyond-float32", "sigmoid", _set("feature_std", "x0", value=1e39), ["feature_std"]),
    ("std-text", "sigmoid", _set("feature_std", "x0", value="1"), ["feature_std", "'x0'"]),
    ("std-nan", "sigmoid", _set("feature_std", "x0", value=float("nan")), ["feature_std"]),
    ("std-missing", "sigmoid", _pop("feature_std", "x2"), ["no entry for 'x2'"]),
    # a numeric imputer
    ("num-coef-huge", "sigmoid", _imp("numeric", "coef", _full(1e300)), ["'coef'"]),
    ("num-coef-nan", "sigmoid", _imp("numeric", "coef", _full(np.nan)), ["'coef'", "finite"]),
    ("num-coef-1e40", "sigmoid", _imp("numeric", "coef", _full(1e40)), ["'coef'", "means"]),
    ("num-intercept-huge", "sigmoid", _imp("numeric", "intercept", _full(1e300)), ["means"]),
    ("num-intercept-inf", "sigmoid", _imp("numeric", "intercept", _full(-np.inf)), ["finite"]),
    ("num-center-beyond", "sigmoid", _imp("numeric", "center", _full(1e39)), ["'center'"]),
    ("num-scale-2", "sigmoid", _imp("numeric", "scale", _full(2.0)), ["'scale'", "1 for"]),
    ("num-scale-0", "sigmoid", _imp("numeric", "scale", _full(0.0)), ["'scale'", "positive"]),
    (
        "num-coef-float16",
        "sigmoid",
        _imp("numeric", "coef", lambda c: c.astype(np.float16)),
        ["coef", "float16"],
    ),
    ("num-predictors-unknown", "sigmoid", _predictors(["nosuch"]), ["'nosuch'", "not a feature"]),
    ("num-predictors-self", "sigmoid", _predictors(["x0", "x2"]), ["imputed feature"]),
    ("num-predictors-twice", "sigmoid", _predictors(["x0", "x0"]), ["'predictors'"]),
    ("num-score-above-1", "sigmoid", _imp("numeric", "score", 1.5), ["'score'"]),
    ("num-n-train-0", "sigmoid", _imp("numeric", "n_train", 0), ["'n_train'"]),
    ("num-owner-path", "sigmoid", _imp("numeric", "owner", "../../etc"), ["owner", "../../etc"]),
    ("num-owner-html", "sigmoid", _imp("numeric", "owner", "<b>x</b>"), ["owner", "<b>x</b>"]),
    ("num-levels", "sigmoid", _imp("numeric", "levels", np.array([0])), ["'levels'"]),
    ("num-extra", "sigmoid", _imp("numeric", "bias", 1.0), ["unknown fields ['bias']"]),
    # a categorical imputer
    ("cat-coef-norm", "sigmoid", _imp("categorical", "coef", _full(1e6)), ["'coef'", "norm"]),
    ("cat-coef-inf", "sigmoid", _imp("categorical", "coef", _full(np.inf)), ["'coef'"]),
    ("cat-intercept-spread", "sigmoid", _imp("categorical", "intercept", _first(1e9)), ["spr"]),
    (
        "cat-intercept-shifted",
        "sigmoid",
        _imp("categorical", "intercept", lambda b: b + 1e300),
        ["'intercept'", "magnitude"],
    ),
    ("cat-scale-0", "sigmoid", _imp("categorical", "scale", _full(0.0)), ["'scale'"]),
    ("cat-scale-beyond", "sigmoid", _imp("categorical", "scale", _full(1e39)), ["'scale'"]),
    ("cat-center-beyond", "sigmoid", _imp("categorical", "center", _full(-1e39)), ["'center'"]),
    (
        "cat-levels-int32",
        "sigmoid",
        _imp("categorical", "levels", lambda v: v.astype(np.int32)),
        ["levels", "int32", "int64"],
    ),
    ("cat-levels-repeated", "sigmoid", _imp("categorical", "levels", _full(0)), ["'levels'"]),
    ("cat-levels-beyond", "sigmoid", _imp("categorical", "levels", _first(99)), ["'levels'"]),
    ("cat-n-levels", "sigmoid", _imp("categorical", "n_levels", 7), ["with 7 levels"]),
    ("cat-score-negative", "sigmoid", _imp("categorical", "score", -0.1), ["'score'"]),
    ("cat-kind", "sigmoid", _imp("categorical", "kind", "ordinal"), ["'kind'"]),
    ("imputer-ghost", "sigmoid", _imp("numeric", "feature", "ghost"), ["'ghost'"]),
    (
        "imputer-twice",
        "sigmoid",
        lambda m: m["imputers"]["imputers"].append(copy.deepcopy(imputer(m, "numeric"))),
        ["two imputers for feature"],
    ),
    ("imputers-not-list", "sigmoid", _set("imputers", "imputers", value={}), ["'imputers'"]),
    # the pooled forest
    (
        "threshold-float64",
        "sigmoid",
        _set("forest", "threshold", value=lambda t: t.astype(np.float64)),
        ["forest.threshold", "float32"],
    ),
    (
        "value-float16",
        "sigmoid",
        _set("forest", "value", value=lambda v: v.astype(np.float16)),
        ["forest.value", "float16"],
    ),
    (
        "leaf-counts-int64",
        "sigmoid",
        _set("forest", "leaf_counts", value=lambda v: v.astype(np.int64)),
        ["forest.leaf_counts", "int64", "uint8"],
    ),
    (
        "tree-owner-int16",
        "sigmoid",
        _set("forest", "tree_owner", value=lambda v: v.astype(np.int16)),
        ["forest.tree_owner", "int16"],
    ),
    (
        "feature-big-endian",
        "sigmoid",
        _set("forest", "feature", value=lambda v: v.astype(">u2")),
        ["forest.feature"],
    ),
    (
        "surrogate-agreement-float32",
        "sigmoid",
        _set("forest", "surrogate_agreement", value=lambda v: v.astype(np.float32)),
        ["surrogate_agreement", "float32"],
    ),
    ("flags-padding", "sigmoid", _padding_bit, ["'surrogate_left_le'", "padding"]),
    (
        "leaf-bits-bool",
        "sigmoid",
        _set("forest", "leaf_bits", value=lambda v: v.astype(bool)),
        ["leaf_bits"],
    ),
    ("tree-start", "sigmoid", _set("forest", "tree_start", value=_first(1)), ["'tree_start'"]),
    ("tree-owner-range", "sigmoid", _set("forest", "tree_owner", value=_first(5)), ["tree_owner"]),
    ("feature-range", "sigmoid", _set("forest", "feature", value=_first(9)), ["'feature'"]),
    ("leaf-samples-0", "sigmoid", _set("forest", "leaf_samples", value=_first(0)), ["leaf_samp"]),
    ("owners-empty", "sigmoid", _set("forest", "owners", value=[]), ["'owners'", "non-empty"]),
    (
        "owners-html",
        "sigmoid",
        _set("forest", "owners", value=["site-a", "<script>"]),
        ["forest.owners[1]", "'<script>'"],
    ),
    (
        "owners-reserved",
        "sigmoid",
        _set("forest", "owners", value=["site-a", "server"]),
        ["forest.owners[1]", "'server'"],
    ),
    ("features-empty", "sigmoid", _set("forest", "feature_names", value=[]), ["feature_names"]),
    (
        "features-twice",
        "sigmoid",
        _set("forest", "feature_names", value=lambda f: [f[0], *f[:-1]]),
        ["feature_names", "duplicates"],
    ),
    ("classes-empty", "sigmoid", _set("forest", "classes", value=[]), ["'classes'"]),
    ("classes-unsorted", "sigmoid", _set("forest", "classes", value=[1, 0]), ["'classes'"]),
    (
        "categories-unknown",
        "sigmoid",
        _set("forest", "categories", value={"ghost": ["a"]}),
        ["'categories'", "'ghost'"],
    ),
    (
        "categories-empty",
        "sigmoid",
        _set("forest", "categories", "c", value=[]),
        ["categories['c']"],
    ),
    ("task", "sigmoid", _set("forest", "task", value="regression"), ["'classes'", "empty"]),
    (
        "surrogate-threshold",
        "sigmoid",
        _set("forest", "surrogate_threshold", value=_first(1e300)),
        ["'surrogate_threshold'"],
    ),
    (
        "surrogate-agreement",
        "sigmoid",
        _set("forest", "surrogate_agreement", value=_first(2.0)),
        ["surrogate_agreement"],
    ),
    ("forest-version", "sigmoid", _set("forest", "version", value=9), ["version 9"]),
    ("forest-extra", "sigmoid", _set("forest", "bias", value=0), ["unknown fields ['bias']"]),
    (
        "intersection-threshold",
        "sigmoid",
        _set("intersection", "threshold", value=lambda t: t.astype(np.float64)),
        ["intersection.threshold"],
    ),
    (
        "intersection-owner",
        "sigmoid",
        _set("intersection", "owners", value=["site-a", "admin"]),
        ["intersection.owners[1]"],
    ),
    # the deployment
    ("site-path", "sigmoid", _set("deployment", "site", value="../.."), ["'site'", "letters"]),
    ("site-html", "sigmoid", _set("deployment", "site", value="<b>a</b>"), ["'site'", "letters"]),
    ("site-reserved", "sigmoid", _set("deployment", "site", value="server"), ["'site'"]),
    ("site-long", "sigmoid", _set("deployment", "site", value="a" * 65), ["'site'", "64"]),
    ("site-space", "sigmoid", _set("deployment", "site", value="site a"), ["'site'"]),
    ("strategy", "sigmoid", _set("deployment", "strategy", value="magic"), ["'strategy'"]),
    (
        "strategy-park-elsewhere",
        "sigmoid",
        lambda m: (m["deployment"].update(site="site-c", strategy="park"), m.pop("inputs")),
        ["'park'", "trained no tree"],
    ),
    (
        "strategy-intersection-none",
        "sigmoid",
        lambda m: (m["deployment"].update(strategy="intersection"), m.update(intersection=None)),
        ["no intersection forest"],
    ),
    ("guess-weight", "sigmoid", _set("deployment", "guess_weight", value=1.5), ["guess_weight"]),
    (
        "guess-weight-missing",
        "sigmoid",
        _set("deployment", "strategy", value="wmp"),
        ["'guess_weight' is null"],
    ),
    ("deployment-extra", "sigmoid", _set("deployment", "notes", value=""), ["'notes'"]),
    (
        "deployment-other-site",
        "sigmoid",
        _set("deployment", "site", value="site-b"),
        ["'inputs.site'", "same site"],
    ),
    # its calibrator
    ("cal-method", "sigmoid", _set("deployment", "calibrator", "method", value="platt"), ["meth"]),
    (
        "cal-extra-param",
        "sigmoid",
        _set("deployment", "calibrator", "params", "c", value=np.ones(1)),
        ["params"],
    ),
    ("sigmoid-steep", "sigmoid", _cal(a=[-1e6], b=[5e5]), ["params.a holds -1000000.0"]),
    ("sigmoid-b-huge", "sigmoid", _cal(b=[1e300]), ["params.b holds 1e+300"]),
    ("sigmoid-reversing", "sigmoid", _cal(a=[2.0]), ["negative slopes"]),
    ("sigmoid-flat", "sigmoid", _cal(a=[0.0]), ["negative slopes"]),
    ("sigmoid-nan", "sigmoid", _cal(a=[np.nan]), ["params.a", "finite"]),
    ("sigmoid-two-columns", "sigmoid", _cal(a=[-1.0, -1.0]), ["params.a and .b"]),
    (
        "sigmoid-float16",
        "sigmoid",
        _set("deployment", "calibrator", "params", "a", value=lambda a: a.astype(np.float16)),
        ["params.a", "float16"],
    ),
    ("prior-zero", "prior", _cal(ratio=[0.0, 0.0]), ["ratio is 0.0", "impossible"]),
    ("prior-one-zero", "prior", _cal(ratio=[1.0, 0.0]), ["ratio is 0.0 for class 1"]),
    ("prior-huge", "prior", _cal(ratio=[1.0, 1e300]), ["ratio is 1e+300"]),
    ("prior-negative", "prior", _cal(ratio=[-1.0, 1.0]), ["ratio is -1.0"]),
    ("prior-one-class", "prior", _cal(ratio=[1.0]), ["params.ratio", "one per class"]),
    (
        "isotonic-zero",
        "isotonic",
        _set("deployment", "calibrator", "params", "y", value=_first(0.0)),
        ["params.y", "strictly between 0 and 1"],
    ),
    (
        "isotonic-one",
        "isotonic",
        _set("deployment", "calibrator", "params", "y", value=lambda y: np.r_[y[:-1], 1.0]),
        ["params.y", "strictly between 0 and 1"],
    ),
    (
        "isotonic-x-beyond",
        "isotonic",
        _set("deployment", "calibrator", "params", "x", value=lambda x: np.r_[x[:-1], 1.5]),
        ["params.x", "[0, 1]"],
    ),
    (
        "isotonic-decreasing",
        "isotonic",
        _set("deployment", "calibrator", "params", "y", value=lambda y: y[::-1].copy()),
        ["increasing"],
    ),
    (
        "isotonic-offsets",
        "isotonic",
        _set("deployment", "calibrator", "params", "offsets", value=np.array([0.0, 1.0])),
        ["params.offsets"],
    ),
    # the input mapping
    ("inputs-site-path", "sigmoid", _set("inputs", "site", value="../x"), ["'site'", "'../x'"]),
    ("inputs-target-feature", "sigmoid", _set("inputs", "target", value="x0"), ["'target'"]),
    (
        "inputs-renames-merge",
        "sigmoid",
        _set("inputs", "renames", value={"a": "x0", "b": "x0"}),
        ["'renames'", "distinct"],
    ),
    (
        "inputs-label-unknown",
        "sigmoid",
        _set("inputs", "label_map", value=[["yes", 7]]),
        ["label_map[0]", "not a class"],
    ),
    ("inputs-positive", "sigmoid", _set("inputs", "positive_class", value=0), ["positive_class"]),
    ("inputs-extra", "sigmoid", _set("inputs", "notes", value=""), ["'notes'"]),
    (
        "inputs-drop-renamed",
        "sigmoid",
        lambda m: m["inputs"].update(renames={"age": "x0"}, drop_columns=["age"]),
        ["'drop_columns'"],
    ),
    ("inputs-name-long", "sigmoid", _set("inputs", "target", value="y" * 1001), ["'target'"]),
]


@pytest.mark.parametrize(
    ("method", "edit", "fragments"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_an_edit_no_job_writes_is_refused_naming_the_file_and_field(
    models, tmp_path, method, edit, fragments
):
    model = copy.deepcopy(models[method])
    edit(model)
    path = save_payload(tmp_path / "pooled_model.npz", model)
    with pytest.raises(PayloadError) as info:
        load_quietly(path)
    message = str(info.value)
    assert str(path) in message, message
    assert any(word in message for word in FIX), message  # what a job writes there
    for fragment in fragments:
        assert fragment in message, message
    assert len(message) < 2000


#: Edits a job could make itself, at the edges of what it writes: the file loads and predicts.
ACCEPTED = [
    ("untouched", "sigmoid", lambda m: None),
    (
        "steepest-sigmoid",
        "sigmoid",
        _cal(a=[-MAX_SIGMOID_PARAMETER], b=[MAX_SIGMOID_PARAMETER / 2]),
    ),
    ("largest-prior", "prior", _cal(ratio=[1.0, MAX_PRIOR_RATIO])),
    ("isotonic", "isotonic", lambda m: None),
    ("std-zero", "sigmoid", _set("feature_std", value=lambda s: dict.fromkeys(s, 0.0))),
    ("std-float32-max", "sigmoid", _set("feature_std", "x2", value=FLOAT32_MAX)),
    ("std-tiny", "sigmoid", _set("feature_std", "x2", value=5e-324)),
    ("depth-zero", "sigmoid", _set("settings", "depth_threshold", value=0)),
    ("seed-null", "sigmoid", _set("settings", "seed", value=None)),
    (
        "weights-one-site",
        "sigmoid",
        _set("settings", "owner_weights", value={"site-a": 0.0, "site-b": 1.0}),
    ),
    ("num-coef-zero", "sigmoid", _imp("numeric", "coef", _full(0.0))),
    ("num-tiny-numbers", "sigmoid", _imp("numeric", "coef", _full(5e-324))),
    ("cat-scale-tiny", "sigmoid", _imp("categorical", "scale", _full(5e-324))),
    ("no-imputers", "sigmoid", _set("imputers", value=None)),
    ("no-intersection", "sigmoid", _set("intersection", value=None)),
    ("no-deployment", "sigmoid", _set("deployment", value=None)),
    ("intersection-deployed", "sigmoid", _set("deployment", "strategy", value="intersection")),
    ("wmp-deployed", "sigmoid", lambda m: m["deployment"].update(strategy="wmp", guess_weight=0.5)),
]


@pytest.mark.parametrize(
    ("method", "edit"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED]
)
def test_an_edit_a_job_could_write_loads_and_predicts_without_a_warning(
    models, tmp_path, method, edit
):
    model = copy.deepcopy(models[method])
    edit(model)
    loaded = load_quietly(save_payload(tmp_path / "pooled_model.npz", model))
    assert_predicts(loaded)


# --------------------------------------------------------------------- the .npz archive
def _entries(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _npy(value) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, value, allow_pickle=True)
    return buffer.getvalue()


def _structure(entries, change) -> dict[str, bytes]:
    with io.BytesIO(entries["__structure__.npy"]) as fh:
        structure = json.loads(str(np.load(fh)))
    change(structure)
    return {**entries, "__structure__.npy": _npy(np.array(json.dumps(structure)))}


ARCHIVE = [
    ("unknown-entry", lambda e: {**e, "notes.txt": b"x"}, ["unknown entry 'notes.txt'"]),
    ("pickled-entry", lambda e: {**e, "a0.npy": _npy(np.array([{}], dtype=object))}, ["pickle"]),
    ("unreferenced", lambda e: {**e, "a9999.npy": _npy(np.zeros(2))}, ["'a9999.npy'"]),
    ("no-structure", lambda e: {k: v for k, v in e.items() if "structure" not in k}, ["structure"]),
    ("structure-not-json", lambda e: {**e, "__structure__.npy": _npy(np.array("{"))}, ["JSON"]),
    (
        "structure-not-text",
        lambda e: {**e, "__structure__.npy": _npy(np.zeros(3))},
        ["not a string"],
    ),
    ("complex-entry", lambda e: {**e, "a0.npy": _npy(np.zeros(2, complex))}, ["complex128"]),
    (
        "missing-reference",
        lambda e: _structure(e, lambda s: s["forest"].update(threshold={"__array__": "a77"})),
        ["'a77' is missing"],
    ),
    (
        "structure-extra-field",
        lambda e: _structure(e, lambda s: s.update(comment="hi")),
        ["unknown fields ['comment']"],
    ),
    (
        "structure-nan-std",
        lambda e: _structure(e, lambda s: s["feature_std"].update(x0=float("nan"))),
        ["feature_std", "'x0'"],
    ),
]


@pytest.mark.parametrize(
    ("change", "fragments"), [c[1:] for c in ARCHIVE], ids=[c[0] for c in ARCHIVE]
)
def test_an_edited_archive_is_refused_naming_the_file(models, tmp_path, change, fragments):
    good = save_payload(tmp_path / "good.npz", models["sigmoid"])
    path = tmp_path / "pooled_model.npz"
    path.write_bytes(_zip(change(_entries(good))))
    with pytest.raises(PayloadError) as info:
        load_quietly(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04broken", b"not a zip", b"\x00" * 64])
def test_a_file_that_is_no_archive_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "pooled_model.npz"
    path.write_bytes(content)
    with pytest.raises(PayloadError) as info:
        load_quietly(path)
    assert str(path) in str(info.value) and "not a fedforest payload file" in str(info.value)
