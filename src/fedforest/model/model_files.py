"""Saving payloads to disk without pickle.

A payload (nested dicts and lists of numpy arrays and plain values) is written
as one ``.npz`` file: every array is an entry ``aN.npy``, and the structure
with the plain values is a JSON document stored as the string entry
``__structure__.npy``, where each array appears as ``{"__array__": "aN"}``.

Loading (:func:`load_payload`) never unpickles anything and never inflates
more than it has checked. It inspects the zip directory first: every entry
must be ``__structure__.npy`` or ``aN.npy`` and appear once, and the declared
uncompressed sizes must add up to at most ``max_bytes`` (default
:data:`MAX_MODEL_BYTES`, 2 GiB) before a byte is decompressed. Each entry's
``.npy`` header must describe a plain array (dtype kinds ``i u f b U``, never
an object array) whose shape times item size matches the declared size, and
every array entry must be referenced by the structure. Any other file is
refused with a :class:`~fedforest.errors.PayloadError` naming the file.

A saved *model* (what each site keeps after a job) bundles the pooled forest,
the selected imputers, the pooled standard deviations, the intersection
forest (when trained) and the prediction settings, and, in the file a site
keeps, its ``deployment`` (what the job chose for it) and its ``inputs`` (how
its own data file becomes the model's input,
:class:`~fedforest.model.site_inputs.SiteInputs`); :func:`load_model` validates
every part as it would a payload received from another site.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import protocol, rules
from ..errors import PayloadError
from ..validation import Checker, PayloadReader, describe
from ..vocabulary import VOTING
from .calibrator import Calibrator
from .compact_arrays import smallest_int_dtype
from .inputs import FLOAT32_MAX, names_text
from .payload_checks import MAX_FEATURES, MAX_NODES, MAX_SEED
from .site_inputs import SiteInputs

#: Largest total uncompressed size of a payload file (all entries), in bytes.
MAX_MODEL_BYTES = 2 * 1024**3
#: Entry names a payload file may hold (what :func:`save_payload` writes).
_ENTRY_NAME = re.compile(r"(__structure__|a(?:0|[1-9][0-9]{0,8}))\.npy")
#: dtype kinds of the arrays a payload file may hold.
_KINDS = "iufbU"
#: A checker that raises ValueError (re-raised as PayloadError with the field's message).
_CHECK = Checker()
#: Prediction settings of a model bundle and their checks.
_SETTINGS = ("depth_threshold", "voting", "seed", "owner_weights")
#: Fields of a model's ``deployment``: what the job chose for the site that saved it.
DEPLOYMENT_FIELDS = ("site", "strategy", "calibrator", "guess_weight")
_META = "__structure__"
MODEL_FORMAT = protocol.MODEL
MODEL_VERSION = protocol.FORMATS[MODEL_FORMAT]


def save_payload(path, payload: Mapping) -> Path:
    """Write a payload to ``path`` (``.npz`` is appended when missing)."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz")
    arrays: dict[str, np.ndarray] = {}

    def strip(value, key: str):
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "iufbU":
                raise TypeError(f"{key}: arrays of dtype {value.dtype} cannot be saved")
            name = f"a{len(arrays)}"
            arrays[name] = value
            return {"__array__": name}
        if isinstance(value, Mapping):
            return {str(k): strip(v, f"{key}.{k}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [strip(v, f"{key}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, np.generic):
            return value.item()
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        raise TypeError(f"{key}: values of type {type(value).__name__} cannot be saved")

    structure = strip(payload, "payload")
    arrays[_META] = np.array(json.dumps(structure))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return path


def load_payload(path, max_bytes: int = MAX_MODEL_BYTES) -> dict:
    """Read a file written by :func:`save_payload` (never unpickles anything).

    Parameters
    ----------
    path : str or Path
    max_bytes : int, default :data:`MAX_MODEL_BYTES`
        Largest total uncompressed size of the file's entries, as declared in
        the zip directory; checked before anything is decompressed.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    fedforest.PayloadError
        If the file is not a payload file, declares more than ``max_bytes``,
        holds unknown, duplicate or unreferenced entries, an entry whose
        header does not match its declared size, an array that needs pickle,
        or a structure that is not valid JSON. The message names the file.
    """
    path = Path(path)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"max_bytes must be an integer >= 0, got {max_bytes!r}")
    if not path.is_file():
        raise FileNotFoundError(f"no such model file: {path}")
    with open(path, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            raise PayloadError(f"{path} is not a fedforest payload file (not an .npz archive)")
    try:
        with zipfile.ZipFile(path) as zf:
            return _read_npz(zf, path, max_bytes)
    except PayloadError:
        raise
    except RecursionError as err:
        raise PayloadError(f"{path}: its structure is nested too deeply") from err
    except Exception as err:  # noqa: BLE001 - report any unreadable file the same way
        raise PayloadError(f"{path} is not a fedforest payload file: {err}") from err


def _read_npz(zf: zipfile.ZipFile, path: Path, max_bytes: int) -> Any:
    # 1. the zip directory alone: names, duplicates, declared sizes
    infos = zf.infolist()
    entries: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        match = _ENTRY_NAME.fullmatch(info.filename)
        if match is None:
            raise PayloadError(
                f"{path}: unknown entry {info.filename!r}; a payload file holds only "
                "'__structure__.npy' and the arrays 'aN.npy' its structure references"
            )
        if match.group(1) in entries:
            raise PayloadError(f"{path}: entry {info.filename!r} appears twice")
        entries[match.group(1)] = info
    total = sum(info.file_size for info in infos)
    if total > max_bytes:
        raise PayloadError(
            f"{path}: its entries declare {total} bytes uncompressed, more than the limit "
            f"of {max_bytes} bytes; refused before decompressing anything"
        )
    if _META not in entries:
        raise PayloadError(f"{path} is not a fedforest payload file (no structure entry)")
    # 2. the structure, then the entries it references
    meta = _read_entry(zf, entries[_META], path)
    if meta.dtype.kind != "U" or meta.shape != ():
        raise PayloadError(f"{path}: its structure entry is not a string")
    try:
        structure = json.loads(str(meta))
    except ValueError as err:
        raise PayloadError(f"{path}: its structure entry is not valid JSON ({err})") from err
    referenced: set[str] = set()

    def references(value) -> None:
        if isinstance(value, dict):
            if set(value) == {"__array__"}:
                name = value["__array__"]
                if not isinstance(name, str) or name == _META or name not in entries:
                    raise PayloadError(f"{path}: entry {name!r} is missing")
                referenced.add(name)
                return
            for v in value.values():
                references(v)
        elif isinstance(value, list):
            for v in value:
                references(v)

    references(structure)
    unused = sorted(set(entries) - referenced - {_META})
    if unused:
        raise PayloadError(
            f"{path}: unknown entry {entries[unused[0]].filename!r}: its structure does not "
            "reference it"
        )
    arrays = {name: _read_entry(zf, entries[name], path) for name in sorted(referenced)}

    def fill(value):
        if isinstance(value, dict):
            if set(value) == {"__array__"}:
                return arrays[value["__array__"]]
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    return fill(structure)


def _read_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> np.ndarray:
    """One ``.npy`` entry, after checking its header against its declared size."""
    name = info.filename
    try:
        with zf.open(info) as fp:
            version = np.lib.format.read_magic(fp)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fp)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(fp)
            else:
                raise PayloadError(f"{path}: entry {name!r} has .npy format version {version}")
            header = fp.tell()
    except PayloadError:
        raise
    except Exception as err:  # noqa: BLE001 - a corrupt entry or header
        raise PayloadError(f"{path}: entry {name!r} cannot be read ({err})") from err
    if dtype.hasobject:
        raise PayloadError(
            f"{path}: entry {name!r} holds an array of dtype {dtype}, which needs pickle to "
            "load; refused"
        )
    if dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise PayloadError(
            f"{path}: entry {name!r} holds an array of dtype {dtype}; allowed kinds are "
            f"{', '.join(_KINDS)}"
        )
    size = header + math.prod(shape) * dtype.itemsize
    if any(d < 0 for d in shape) or size != info.file_size:
        raise PayloadError(
            f"{path}: entry {name!r} declares {info.file_size} bytes but its header "
            f"describes {size} bytes (shape {shape}, dtype {dtype})"
        )
    try:
        with zf.open(info) as fp:
            array = np.lib.format.read_array(fp, allow_pickle=False)
    except Exception as err:  # noqa: BLE001 - corrupt data (bad CRC, short stream)
        raise PayloadError(f"{path}: entry {name!r} cannot be read ({err})") from err
    if array.shape != tuple(shape) or array.dtype != dtype:  # pragma: no cover - defensive
        raise PayloadError(f"{path}: entry {name!r} does not match its header")
    return array


def model_bundle(
    forest_payload: Mapping,
    imputers_payload: Mapping | None = None,
    feature_std: Mapping[str, float] | None = None,
    intersection_payload: Mapping | None = None,
    settings: Mapping[str, Any] | None = None,
    deployment: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> dict:
    """A model payload: the pooled forest and everything prediction needs.

    ``deployment`` (a site's saved model only) records what the job chose for
    that site: ``site``, ``strategy`` (one of :func:`fedforest.rules.deployable`),
    ``calibrator`` (:meth:`~fedforest.model.calibrator.Calibrator.to_payload`)
    and ``guess_weight`` (``wmp``'s, or ``None``). ``inputs`` (a site's saved
    model only) is its input mapping
    (:meth:`~fedforest.model.site_inputs.SiteInputs.to_payload`).
    """
    return {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "forest": dict(forest_payload),
        "imputers": dict(imputers_payload) if imputers_payload is not None else None,
        "feature_std": {str(k): float(v) for k, v in (feature_std or {}).items()},
        "intersection": dict(intersection_payload) if intersection_payload is not None else None,
        "settings": dict(settings or {}),
        "deployment": dict(deployment) if deployment is not None else None,
        "inputs": dict(inputs) if inputs is not None else None,
    }


def read_feature_std(r: PayloadReader, key: str = "feature_std") -> dict[str, float]:
    """Read a field of pooled standard deviations: feature name -> number in [0, FLOAT32_MAX]
    (the standard deviation of values within float32's range, what a site's table holds)."""
    std = r.read_mapping(key, MAX_FEATURES)
    out = {}
    for name, value in std.items():
        try:
            out[name] = _CHECK.number(name, value, lo=0, hi=FLOAT32_MAX)
            _CHECK.string(name, name)
        except ValueError:
            r.fail(
                f"field {key!r} must map feature names to numbers in [0, {FLOAT32_MAX:.7g}] "
                f"(standard deviations of a site's values, which lie within float32's range); "
                f"{name!r} maps to {describe(value)}"
            )
    return out


def read_settings(r: PayloadReader, key: str = "settings") -> dict[str, Any]:
    """Read a model's prediction settings (each optional): ``depth_threshold`` (integer
    >= 0), ``voting`` (one of :data:`~fedforest.vocabulary.VOTING`) and ``seed`` (an
    integer in [0, 2**32 - 1] or None)."""
    settings = r.read_mapping(key)
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        r.fail(f"field {key!r} has unknown settings {unknown}; expected only {list(_SETTINGS)}")
    out: dict[str, Any] = {}
    if "depth_threshold" in settings:
        out["depth_threshold"] = r.integer(
            f"{key}.depth_threshold", settings["depth_threshold"], 0, MAX_NODES
        )
    if "voting" in settings:
        out["voting"] = r.choice(f"{key}.voting", settings["voting"], VOTING)
    if "seed" in settings:
        seed = settings["seed"]
        out["seed"] = None if seed is None else r.integer(f"{key}.seed", seed, 0, MAX_SEED)
    weights = settings.get("owner_weights")
    if weights is not None:
        if not isinstance(weights, Mapping) or not weights:
            r.refuse(f"{key}.owner_weights", weights, "a mapping of site name to weight, or null")
        out["owner_weights"] = {
            r.site_name(f"{key}.owner_weights", site): r.number(
                f"{key}.owner_weights.{site}", value, 0
            )
            for site, value in weights.items()
        }
    return out


def read_model(payload: Mapping, sender: str | None = None) -> dict:
    """Validate a model payload; return its parts as fedforest objects.

    Every part is read as if received from a peer, and the parts must agree:
    an imputer for a feature of the forest has the feature's kind and, when
    categorical, its number of levels. Only :class:`~fedforest.errors.PayloadError`
    is raised.
    """
    from .forest import PooledForest
    from .imputers import ImputerSet

    r = PayloadReader(payload, MODEL_FORMAT, sender)
    r.check_keys(
        {"forest", "imputers", "feature_std", "intersection", "settings", "deployment", "inputs"}
    )
    _check_dtypes(r)
    forest = PooledForest.from_payload(r.get("forest"), sender, where="forest")
    imps = r.get("imputers")
    imputers = None
    if imps is not None:
        imputers = ImputerSet.from_payload(imps, sender, where="imputers")
    inter = r.get("intersection")
    intersection = None
    if inter is not None:
        intersection = PooledForest.from_payload(inter, sender, where="intersection")
    std = read_feature_std(r)
    settings = read_settings(r)
    for where, part in (("forest", forest), ("intersection", intersection)):
        for i, owner in enumerate([] if part is None else part.owners):
            r.site_name(f"{where}.owners[{i}]", owner)
    if imputers is not None:
        _check_imputers_fit(r, forest, imputers, std)
    weights = settings.get("owner_weights")
    if weights is not None and sorted(weights) != sorted(forest.owners):
        r.fail(
            f"field 'settings.owner_weights' names sites {sorted(weights)}; expected the "
            f"forest's sites {sorted(forest.owners)}, each once"
        )
    deployment = _read_deployment(r, forest, intersection)
    inputs = _read_inputs(r, forest, deployment)
    return {
        "forest": forest,
        "imputers": imputers,
        "feature_std": std,
        "intersection": intersection,
        "settings": settings,
        "deployment": deployment,
        "inputs": inputs,
    }


def _read_inputs(r: PayloadReader, forest, deployment) -> SiteInputs | None:
    """The ``inputs`` field: the input mapping of the site that saved the model."""
    value = r.get("inputs")
    if value is None:
        return None
    inputs = SiteInputs.read(r.entry(value, "inputs"), forest)
    if deployment is not None and deployment["site"] != inputs.site:
        r.fail(
            f"field 'inputs.site' is {inputs.site!r} but the deployment is site "
            f"{deployment['site']!r}'s; expected the same site"
        )
    return inputs


def _read_deployment(r: PayloadReader, forest, intersection) -> dict | None:
    """The ``deployment`` field: what the job chose for the site that saved the model."""
    value = r.get("deployment")
    if value is None:
        return None
    d = r.entry(value, "deployment")
    d.check_keys(set(DEPLOYMENT_FIELDS))
    site = d.site_name("site", d.get("site"))
    strategy = d.read_choice("strategy", rules.deployable())
    rule = rules.get(strategy)
    if rule.needs_intersection and intersection is None:
        d.fail(
            f"field 'strategy' is {strategy!r} but the model has no intersection forest; "
            "expected a strategy the model can run"
        )
    if rule.needs_site and site not in forest.owners:
        d.fail(
            f"field 'strategy' is {strategy!r} but site {site!r} trained no tree of the forest; "
            f"expected a site among the forest's sites {forest.owners}"
        )
    if forest.is_regression:  # a number is not calibrated
        if d.get("calibrator") is not None:
            d.fail("field 'calibrator' must be null for regression trees")
        calibrator = None
    else:
        try:
            calibrator = Calibrator.from_payload(d.get("calibrator"), forest.classes, "calibrator")
        except ValueError as err:
            d.fail(f"field {err}")
    weight = d.get("guess_weight")
    if weight is not None:
        weight = d.number("guess_weight", weight, 0.0, 1.0)
    elif rule.fitted:
        d.fail(
            f"field 'guess_weight' is null; the {strategy!r} strategy needs its fitted weight: "
            "expected a number in [0, 1]"
        )
    return {"site": site, "strategy": strategy, "calibrator": calibrator, "guess_weight": weight}


def _check_imputers_fit(r: PayloadReader, forest, imputers, std: Mapping[str, float]) -> None:
    """An imputer for a forest feature has the feature's kind and levels; a numeric one
    has the feature's pooled standard deviation (``ipr`` and ``mp`` need it)."""
    names = set(forest.feature_names)
    for feature, imp in imputers.items():
        unknown = [p for p in (feature, *imp.predictors) if p not in names]
        if unknown:
            r.fail(
                f"field 'imputers': the imputer for {feature!r} (predictors "
                f"{names_text(list(map(repr, imp.predictors)))}) names "
                f"{names_text(list(map(repr, unknown)))}, which "
                f"{'is' if len(unknown) == 1 else 'are'} not a feature of the forest; expected "
                "features of the forest (a job's imputers predict features of the forest from "
                "features of the forest)"
            )
        r.site_name(f"imputers.{feature}.owner", imp.owner)
        levels = forest.categories.get(feature)
        kind = "numeric" if levels is None else "categorical"
        if imp.kind != kind or (levels is not None and imp.n_levels != len(levels)):
            expected = kind if levels is None else f"{kind} with {len(levels)} levels"
            r.fail(
                f"field 'imputers': the imputer for {feature!r} is {imp.kind} with "
                f"{imp.n_levels} levels, but the forest's feature is {expected}; expected an "
                "imputer of the feature's kind"
            )
        if kind == "numeric" and feature not in std:
            r.fail(
                f"field 'feature_std' has no entry for {feature!r}, which has a numeric imputer; "
                "expected the feature's pooled standard deviation"
            )


#: The float dtype of every float array of a model file, and the exceptions by field.
FLOAT_DTYPE = np.dtype(np.float64)
#: A pooled forest's thresholds: float32 from version 2 on (float64 in version 1).
THRESHOLD_DTYPE = np.dtype(np.float32)
#: Integer fields of a pooled forest from version 2 on, each in the smallest integer dtype
#: that holds its values (:func:`~fedforest.model.compact_arrays.smallest_int_dtype`).
COMPACT_INT_FIELDS = (
    "tree_start",
    "tree_owner",
    "feature",
    "threshold_exact_at",
    "leaf_samples",
    "samples_delta_at",
    "samples_delta",
    "leaf_counts",
    "value_trees",
    "surrogate_feature",
)
#: Integer arrays of a fixed dtype: an imputer's ``levels``, and, in a pooled forest from
#: version 2 on, the packed flags (``numpy.packbits``) and ``threshold_fine``.
FIXED_INT_DTYPES = {
    "levels": np.dtype(np.int64),
    "leaf_bits": np.dtype(np.uint8),
    "missing_left": np.dtype(np.uint8),
    "saw_missing": np.dtype(np.uint8),
    "surrogate_nodes": np.dtype(np.uint8),
    "surrogate_left_le": np.dtype(np.uint8),
    "threshold_fine": np.dtype(np.uint8),
}


def _expected_dtype(key: str, value: np.ndarray, forest_version) -> np.dtype | None:
    """The dtype the format writes for the array ``value`` at ``key`` (None: not checked)."""
    field = key.rsplit(".", 1)[-1]
    if value.dtype.kind == "f":
        if field == "threshold" and forest_version != 1:
            return THRESHOLD_DTYPE
        return FLOAT_DTYPE
    if value.dtype.kind not in "iub":
        return None
    if field == "levels":
        return FIXED_INT_DTYPES[field]
    if forest_version in (None, 1):  # version 1 sends its arrays as they are in memory
        return None
    if field in COMPACT_INT_FIELDS:
        if value.dtype.kind == "b":
            return smallest_int_dtype([])
        return smallest_int_dtype(value) if value.size else np.dtype(np.uint8)
    return FIXED_INT_DTYPES.get(field)


def _check_dtypes(r: PayloadReader) -> None:
    """Refuse an array of another dtype than the format writes (float16 leaf values,
    extended precision, int64 node counts): every float array is float64, a forest's
    ``threshold`` float32; a forest's integer fields (version 2 on) are in the smallest
    integer dtype that holds them, its packed flags uint8; an imputer's ``levels`` int64."""

    def walk(value, key: str, forest_version) -> None:
        if isinstance(value, np.ndarray):
            expected = _expected_dtype(key, value, forest_version)
            if expected is not None and value.dtype != expected:
                r.fail(
                    f"field {key!r} holds {value.dtype} values; the format writes {expected} "
                    "there (an array of another dtype was not written by fedforest)"
                )
        elif isinstance(value, Mapping):
            version = value.get("version") if key in _FORESTS else forest_version
            if isinstance(version, bool) or not isinstance(version, int):
                version = None  # the forest's reader refuses it, naming the field
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else str(k), version)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{key}[{i}]", forest_version)

    for field in ("forest", "imputers", "intersection", "deployment"):
        walk(r.get(field, None), field, None)


_FORESTS = ("forest", "intersection")


def load_model(path, max_bytes: int = MAX_MODEL_BYTES) -> dict:
    """Load and validate a saved model; returns the parts as in :func:`read_model`.

    The file is read by :func:`load_payload` (size limit ``max_bytes``) and
    validated as a ``fedforest/model`` payload whose sender is the file path.
    """
    return read_model(load_payload(path, max_bytes), sender=str(path))
