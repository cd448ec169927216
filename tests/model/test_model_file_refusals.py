"""A model file refuses what no job writes: each case names the field, the value and the rule."""

from __future__ import annotations

import copy
import re
import warnings

import numpy as np
import pytest

from fedforest import PayloadError
from fedforest.federation.config import NAME, RESERVED_NAMES
from fedforest.model.calibrator import MAX_PRIOR_RATIO, MAX_SIGMOID_PARAMETER, Calibrator
from fedforest.model.model_files import load_payload, save_payload
from fedforest.model.pooled_model import load_model
from fedforest.prediction.calibration import fit_calibration, training_prior
from fedforest.vocabulary import RESERVED_SITE_NAMES, SITE_NAME

from .test_model_files import bundle_of, parts  # noqa: F401 - the fixture of real pooled parts


def saved(tmp_path, bundle) -> object:
    return save_payload(tmp_path / "pooled_model.npz", bundle)


def refused(tmp_path, bundle, *fragments) -> str:
    path = saved(tmp_path, bundle)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(PayloadError) as info:
            load_model(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def deployed(parts, method: str, **params) -> dict:  # noqa: F811 - the fixture
    """A bundle with the deployment a job writes: a calibrator fitted on real probabilities
    (``params`` replace its parameters)."""
    forest = parts["forest"]
    rows = parts["X"].iloc[:200][forest.feature_names]
    from fedforest import PooledForestClassifier

    proba = PooledForestClassifier(forest, strategy="mp", random_state=0).predict_proba(rows)
    prior = training_prior(forest.value, forest.tree_start[:-1])
    fit = fit_calibration(proba, parts["y"][:200], forest.classes, method, train_prior=prior)
    assert fit.calibrator.method == method
    payload = fit.calibrator.to_payload()
    payload["params"].update({k: np.asarray(v, dtype=np.float64) for k, v in params.items()})
    return bundle_of(
        parts,
        deployment={
            "site": "site-a",
            "strategy": "mp",
            "calibrator": payload,
            "guess_weight": None,
        },
    )


def test_a_fitted_calibrator_as_a_job_writes_it_loads(parts, tmp_path):  # noqa: F811
    for method in ("prior", "sigmoid", "isotonic"):
        model = load_model(saved(tmp_path, deployed(parts, method)))
        assert model.deployment.calibrator.method == method


# ----------------------------------------------------------------------------- imputers
@pytest.mark.parametrize("predictors", [["nosuch"], ["x0", "nosuch"]])
def test_an_imputer_on_predictors_the_forest_lacks_is_refused(parts, tmp_path, predictors):  # noqa: F811
    bundle = bundle_of(parts)
    entry = bundle["imputers"]["imputers"][0]
    p = len(predictors)
    entry.update(
        predictors=predictors,
        center=np.zeros(p),
        scale=np.ones(p),
        coef=np.zeros((len(entry["intercept"]), p))
        if entry["kind"] == "categorical"
        else np.zeros(p),
    )
    refused(tmp_path, bundle, "field 'imputers'", "'nosuch'", "not a feature of the forest")


def test_an_imputer_for_a_feature_the_forest_lacks_is_refused(parts, tmp_path):  # noqa: F811
    bundle = bundle_of(parts)
    numeric = next(e for e in bundle["imputers"]["imputers"] if e["kind"] == "numeric")
    numeric["feature"] = "ghost"
    refused(tmp_path, bundle, "'ghost'", "not a feature of the forest")


# --------------------------------------------------------------------------- calibrators
@pytest.mark.parametrize(
    ("ratio", "fragment"),
    [
        ([0.0, 0.0], "ratio is 0.0 for class 0"),
        ([1.0, 0.0], "ratio is 0.0 for class 1"),
        ([1.0, 1e300], "ratio is 1e+300 for class 1"),
        ([1e-300, 1.0], "ratio is 1e-300 for class 0"),
    ],
)
def test_a_prior_that_makes_a_class_impossible_is_refused(parts, tmp_path, ratio, fragment):  # noqa: F811
    bundle = deployed(parts, "prior", ratio=ratio)
    refused(tmp_path, bundle, "deployment", fragment, "makes a class impossible")


@pytest.mark.parametrize(
    ("a", "b", "fragment"),
    [
        ([-1e6], [5e5], "params.a holds -1000000.0"),
        ([-3.0], [1e300], "params.b holds 1e+300"),
        ([2.0], [0.0], "params.a holds 2.0; expected negative slopes"),
        ([0.0], [0.0], "params.a holds 0.0; expected negative slopes"),
    ],
)
def test_a_sigmoid_beyond_what_a_fit_gives_is_refused(parts, tmp_path, a, b, fragment):  # noqa: F811
    refused(tmp_path, deployed(parts, "sigmoid", a=a, b=b), fragment)


def test_the_steepest_sigmoid_a_job_keeps_computes_without_a_warning():
    edge = MAX_SIGMOID_PARAMETER
    cal = Calibrator(
        "sigmoid", np.array([0, 1]), {"a": np.array([-edge]), "b": np.array([edge / 2])}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no raw overflow warning
        out = cal.transform(np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]))
    assert out[:, 1].tolist() == [0.0, 0.5, 1.0]
    assert np.allclose(out.sum(axis=1), 1.0)


@pytest.mark.parametrize("level", [0.0, 1.0])
def test_an_isotonic_step_at_certainty_is_refused(parts, tmp_path, level):  # noqa: F811
    bundle = deployed(parts, "isotonic")
    y = bundle["deployment"]["calibrator"]["params"]["y"]
    y[-1 if level else 0] = level
    bundle["deployment"]["calibrator"]["params"]["y"] = np.sort(y)
    refused(tmp_path, bundle, "params.y must lie strictly between 0 and 1")


def test_the_prior_a_site_fits_stays_within_the_bound():
    proba = np.tile([[0.5, 0.5]], (40, 1))
    y = np.r_[np.zeros(20, int), np.ones(20, int)]
    fit = fit_calibration(
        proba, y, np.array([0, 1]), "prior", train_prior=np.array([1 - 1e-12, 1e-12])
    )
    assert fit.calibrator.params["ratio"].max() == MAX_PRIOR_RATIO


# ---------------------------------------------------------------------------- site names
def test_model_files_and_job_configs_share_the_site_name_grammar():
    assert NAME.pattern == SITE_NAME
    assert tuple(RESERVED_NAMES) == RESERVED_SITE_NAMES


@pytest.mark.parametrize("site", ["../..", "<b>a</b>", "site a", "-x", "server", "", "a" * 65])
def test_a_deployment_site_outside_the_grammar_is_refused(parts, tmp_path, site):  # noqa: F811
    bundle = deployed(parts, "prior")
    bundle["deployment"]["site"] = site
    refused(tmp_path, bundle, "field 'site' is", "letters, digits, '_', '.' and '-'")


def test_site_names_elsewhere_in_the_file_follow_the_grammar(parts, tmp_path):  # noqa: F811
    bundle = bundle_of(parts, settings={"owner_weights": {"site-a": 1.0, "../b": 1.0}})
    refused(tmp_path, bundle, "settings.owner_weights", "'../b'")
    bundle = bundle_of(parts)
    bundle["forest"]["owners"] = ["site-a", "<script>"]
    refused(tmp_path, bundle, "forest.owners[1]", "'<script>'")
    bundle = bundle_of(parts)
    bundle["imputers"]["imputers"][0]["owner"] = "../../etc"
    refused(tmp_path, bundle, "owner", "'../../etc'")


# ------------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize(
    ("field", "dtype", "expected"),
    [
        ("value", np.float16, "float64"),
        ("threshold", np.float64, "float32"),
        ("threshold", np.float16, "float32"),
        ("surrogate_agreement", np.float32, "float64"),
    ],
)
def test_float_arrays_of_another_dtype_are_refused(parts, tmp_path, field, dtype, expected):  # noqa: F811
    bundle = bundle_of(parts)
    bundle["forest"][field] = bundle["forest"][field].astype(dtype)
    refused(tmp_path, bundle, f"field 'forest.{field}' holds {np.dtype(dtype)} values", expected)


def test_imputer_coefficients_of_another_dtype_are_refused(parts, tmp_path):  # noqa: F811
    bundle = bundle_of(parts)
    entry = bundle["imputers"]["imputers"][0]
    entry["coef"] = entry["coef"].astype(np.float16)
    refused(tmp_path, bundle, "imputers.imputers[0].coef", "float16", "float64")


# ------------------------------------------------------------------------------ versions
@pytest.mark.parametrize(
    ("version", "field", "value"),
    [
        (1, "deployment", {"site": "site-a", "strategy": "mp", "calibrator": None}),
        (1, "deployment", None),
        (2, "inputs", {"site": "site-a", "target": "y"}),
    ],
)
def test_fields_of_a_later_version_are_refused(parts, tmp_path, version, field, value):  # noqa: F811
    bundle = bundle_of(parts)
    for later in ("deployment", "inputs")[version - 1 :]:
        bundle.pop(later)  # a payload of that version as it was written
    bundle.update({"version": version, field: value})  # plus a field of a later version
    message = refused(tmp_path, bundle, f"field {field!r} belongs to version {version + 1}")
    assert re.search(rf"declares version {version}\b", message)


def test_an_untampered_file_still_loads(parts, tmp_path):  # noqa: F811
    bundle = copy.deepcopy(bundle_of(parts))
    model = load_model(saved(tmp_path, bundle))
    assert load_payload(saved(tmp_path, bundle))["version"] == 3
    assert model.forest.n_trees == parts["forest"].n_trees
