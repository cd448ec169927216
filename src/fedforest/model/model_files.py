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

A saved *model* (:class:`~fedforest.model.pooled_model.PooledModel`, what
each site keeps after a job) is one such file; its reader and
:func:`~fedforest.model.pooled_model.load_model` are in
:mod:`fedforest.model.pooled_model`, which uses the field checks kept here:
:func:`read_feature_std` (also the server's, for a site's models) and
:func:`check_model_dtypes` (every array in the dtype the format writes).
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

from ..errors import PayloadError
from ..validation import Checker, PayloadReader, describe
from .compact_arrays import smallest_int_dtype
from .inputs import FLOAT32_MAX
from .payload_checks import MAX_FEATURES

#: Largest total uncompressed size of a payload file (all entries), in bytes.
MAX_MODEL_BYTES = 2 * 1024**3
#: Entry names a payload file may hold (what :func:`save_payload` writes).
_ENTRY_NAME = re.compile(r"(__structure__|a(?:0|[1-9][0-9]{0,8}))\.npy")
#: dtype kinds of the arrays a payload file may hold.
_KINDS = "iufbU"
#: A checker that raises ValueError (re-raised as PayloadError with the field's message).
_CHECK = Checker()
_META = "__structure__"


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


def check_model_dtypes(r: PayloadReader) -> None:
    """Refuse an array of the model payload ``r`` reads in another dtype than the format
    writes (float16 leaf values, extended precision, int64 node counts): every float array
    is float64, a forest's
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
