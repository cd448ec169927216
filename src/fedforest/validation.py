"""One family of validators for everything that enters fedforest.

:class:`Checker` holds the checks (integer, number, boolean, choice, string,
list of strings, class labels, array) and reports a failure as *key, bad
value, what is allowed*. Its subclasses only decide how a failure is raised:

* :class:`ConfigChecker` raises :class:`~fedforest.errors.ConfigError` naming
  the file (``site_configs/site-1.yaml: key 'selector' is 'magic'; allowed:
  ...``);
* :class:`PayloadReader` reads the fields of a received payload and raises
  :class:`~fedforest.errors.PayloadError` naming the sender and the field; it
  also checks the payload's ``format`` and ``version`` against
  :mod:`fedforest.protocol`, and :meth:`PayloadReader.entry` reads a nested
  entry (an item of a list) with its position in every message.

The checks are general rules, not special cases: a value of the wrong type
(``None``, a bool where an integer belongs, an array where a scalar belongs, a
scalar, string or dict where an array belongs, a numpy array where a string
belongs), an array of the wrong dtype kind, number of dimensions or shape,
non-finite numbers, integers outside their range (also outside int64) and
lists longer than their limit are all refused before the value is used.
Arrays come back as plain ndarrays in a canonical dtype (int64, float64, bool
or str), so no later arithmetic can overflow or wrap around.

:class:`PayloadReader` raises nothing but :class:`~fedforest.errors.PayloadError`,
whatever it is given: a mapping that cannot be read, keys that are not
strings, odd objects in any field.

This module imports only :mod:`fedforest.errors` and :mod:`fedforest.protocol`, and
:mod:`fedforest.vocabulary` when it checks a site name.
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

from . import protocol
from .errors import ConfigError, PayloadError

_MISSING = object()
#: numpy dtype kinds accepted for each array kind.
ARRAY_KINDS = {"i": "iu", "f": "f", "b": "b", "U": "U"}
#: the dtype every accepted array of a kind is converted to.
CANONICAL = {"i": np.int64, "f": np.float64, "b": np.bool_, "U": np.str_}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 6
_repr.maxlevel = 3


#: How a configuration value is shown in a message: in full when short, shortened (the
#: middle of a long text, the first entries of a long list) when not, so that a huge value
#: (a megabyte string, a list that aliases expand) never makes a huge message.
_config_repr = reprlib.Repr()
_config_repr.maxstring = _config_repr.maxother = 200
_config_repr.maxlist = _config_repr.maxtuple = _config_repr.maxdict = _config_repr.maxset = 20
_config_repr.maxlevel = 4


def shown(value: Any) -> str:
    """``value`` as a configuration message shows it: ``repr`` when short, else shortened.

    Never raises and never renders a large value in full.

    Examples
    --------
    >>> shown(1e-320), shown("x" * 300)[:12], len(shown("x" * 10**6)) < 250
    ('1e-320', "'xxxxxxxxxxx", True)
    """
    try:
        return _config_repr.repr(value)
    except Exception:  # noqa: BLE001 - an object whose repr fails is still described
        return f"a {type(value).__name__}"


def _range(lo, hi, open_lo=False, open_hi=False) -> str:
    if lo is not None and hi is not None:
        return f" in {'(' if open_lo else '['}{lo}, {hi}{')' if open_hi else ']'}"
    if lo is not None:
        return f" {'>' if open_lo else '>='} {lo}"
    if hi is not None:
        return f" {'<' if open_hi else '<='} {hi}"
    return ""


def describe(value: Any) -> str:
    """A short description of a value for an error message (arrays by dtype and shape).

    Never raises and never renders a large value in full.
    """
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    try:
        text = _repr.repr(value)
    except Exception:  # noqa: BLE001 - an object whose repr fails is still described
        return f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


#: At most this many items of a list are named in a message (:func:`listing`).
MAX_LISTED = 20


def listing(items, limit: int = MAX_LISTED) -> str:
    """Items for a message, comma-separated: the first ``limit``, then "and N more".

    Examples
    --------
    >>> listing(["a", "b"])
    'a, b'
    >>> listing(range(25), limit=3)
    '0, 1, 2 and 22 more'
    """
    items = [str(item) for item in items]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _float_text(text: str) -> bool:
    """Whether ``text`` reads as a number in Python (``"1e-5"``, which YAML leaves as text)."""
    try:
        float(text)
    except (ValueError, OverflowError):
        return False
    return True


def _finite(value) -> bool:
    """``math.isfinite`` that is false (not an error) for integers too large for a float."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


class Checker:
    """Checks single values; a failure calls :meth:`refuse` with key, value and what is allowed."""

    def refuse(self, key: str, value: Any, allowed: str) -> NoReturn:
        raise ValueError(f"{key} is {describe(value)}; allowed: {allowed}")

    def integer(self, key, value, lo=None, hi=None) -> int:
        if isinstance(value, np.integer):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.refuse(key, value, f"an integer{_range(lo, hi)}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.refuse(key, value, f"an integer{_range(lo, hi)}")
        return int(value)

    def number(self, key, value, lo=None, hi=None, open_lo=False, open_hi=False) -> float:
        allowed = f"a finite number{_range(lo, hi, open_lo, open_hi)}"
        if isinstance(value, str) and _float_text(value):
            allowed += (
                f" (the text {value!r} is not a number here: YAML reads a number with an "
                "exponent only with a dot and a signed exponent, such as 1.0e-5, or write 0.00001)"
            )
        if isinstance(value, (np.integer, np.floating)):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            self.refuse(key, value, allowed)
        bad = (lo is not None and (value <= lo if open_lo else value < lo)) or (
            hi is not None and (value >= hi if open_hi else value > hi)
        )
        if bad:
            self.refuse(key, value, allowed)
        return float(value)

    def boolean(self, key, value) -> bool:
        if isinstance(value, np.bool_):
            value = bool(value)
        if not isinstance(value, bool):
            self.refuse(key, value, "true or false")
        return value

    def choice(self, key, value, allowed):
        if isinstance(value, (np.str_, np.integer, np.floating)):
            value = value.item()
        if not isinstance(value, (str, int, float, type(None))) or value not in allowed:
            self.refuse(key, value, ", ".join(map(str, allowed)))
        return value

    def string(self, key, value) -> str:
        if not isinstance(value, str) or not value.strip():
            self.refuse(key, value, "a non-empty string")
        return str(value)

    def site_name(self, key, value) -> str:
        """A site's name (:data:`~fedforest.vocabulary.SITE_NAME`, as job configs check it)."""
        from .vocabulary import RESERVED_SITE_NAMES, SITE_NAME, SITE_NAME_RULE

        if (
            not isinstance(value, str)
            or not re.fullmatch(SITE_NAME, value)
            or value in RESERVED_SITE_NAMES
        ):
            self.refuse(key, value, SITE_NAME_RULE)
        return value

    def str_list(
        self, key, value, allowed=None, unique=True, max_len=None, allow_empty=False
    ) -> list[str]:
        """A list (or tuple, or 1-d string array) of strings.

        Empty strings are refused unless ``allow_empty``; duplicates unless not
        ``unique``; more than ``max_len`` entries always.
        """
        if isinstance(value, np.ndarray) and value.dtype.kind == "U" and value.ndim == 1:
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            self.refuse(key, value, "a list of strings")
        if max_len is not None and len(value) > max_len:
            self.refuse(key, f"{len(value)} entries", f"at most {max_len} entries")
        for v in value:
            if not isinstance(v, str) or not (v or allow_empty):
                rule = "" if allow_empty else "non-empty; "
                self.refuse(key, value, f"a list of strings ({rule}found {describe(v)})")
        value = [str(v) for v in value]
        if unique and len(set(value)) != len(value):
            self.refuse(key, value, "a list without duplicates")
        for v in value:
            if allowed is not None and v not in allowed:
                self.refuse(key, v, ", ".join(allowed))
        return value

    def labels(self, key, value, max_len=None) -> list:
        """Class labels: a non-empty, sorted list of unique strings or of unique int64 integers."""
        what = "a non-empty sorted list of unique labels, all strings or all integers"
        if not isinstance(value, (list, tuple)) or not value:
            self.refuse(key, value, what)
        if max_len is not None and len(value) > max_len:
            self.refuse(key, f"{len(value)} entries", f"at most {max_len} entries")
        if all(isinstance(v, str) for v in value):
            out = [str(v) for v in value]
        elif all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            out = [int(v) for v in value]
            if any(v < INT64_MIN or v > INT64_MAX for v in out):
                self.refuse(key, value, f"integer labels in [{INT64_MIN}, {INT64_MAX}]")
        else:
            self.refuse(key, value, what)
        if len(set(out)) != len(out) or out != sorted(out):
            self.refuse(key, value, what)
        return out

    def array(
        self,
        key,
        value,
        kind: str,
        ndim: int = 1,
        length: int | None = None,
        *,
        width: int | None = None,
        max_len: int | None = None,
        lo=None,
        hi=None,
        finite: bool = True,
    ) -> np.ndarray:
        """``value`` as a numpy array of dtype kind ``kind`` ('i', 'f', 'b' or 'U').

        The shape is checked first (``ndim``; ``length`` or at most ``max_len``
        rows; ``width`` columns of a 2-d array), then the values: integers must
        fit in int64, floats must be finite (unless ``finite`` is false: the
        caller then checks NaN and infinities itself) and numbers must lie in
        ``[lo, hi]``. The result is a plain ndarray of the canonical dtype
        (:data:`CANONICAL`).
        """
        expected = f"a numpy array of kind {kind!r}"
        if not isinstance(value, np.ndarray) or isinstance(value, np.ma.MaskedArray):
            self.refuse(key, value, expected)
        if value.dtype.kind not in ARRAY_KINDS[kind] or value.dtype.hasobject:
            self.refuse(key, value, expected)
        if value.ndim != ndim:
            self.refuse(key, value, f"an array with {ndim} dimension(s)")
        if length is not None and value.shape[0] != length:
            self.refuse(key, value, f"an array of length {length}")
        if max_len is not None and value.shape[0] > max_len:
            self.refuse(key, value, f"an array of length at most {max_len}")
        if width is not None and value.shape[1] != width:
            self.refuse(key, value, f"an array with {width} columns")
        original = value
        value = np.asarray(value).view(np.ndarray)
        if kind == "i":
            if value.size and value.dtype.kind == "u" and value.max() > INT64_MAX:
                self.refuse(key, original, f"integers in [{INT64_MIN}, {INT64_MAX}]")
            value = value.astype(np.int64)
        elif kind == "f":
            with np.errstate(over="ignore"):  # a long double beyond float64 becomes inf
                value = value.astype(np.float64)
            if finite and not np.isfinite(value).all():
                self.refuse(key, original, "finite values only")
        else:
            value = value.astype(CANONICAL[kind])
        if kind in "if" and value.size:
            if lo is not None and np.any(value < lo):
                self.refuse(key, original, f"values{_range(lo, hi)}")
            if hi is not None and np.any(value > hi):
                self.refuse(key, original, f"values{_range(lo, hi)}")
        return value


class ConfigChecker(Checker):
    """Raises :class:`~fedforest.errors.ConfigError` naming the file, key, value and what is allowed."""

    def __init__(self, source: str):
        self.source = source

    def refuse(self, key, value, allowed) -> NoReturn:
        raise ConfigError(f"{self.source}: key '{key}' is {shown(value)}; allowed: {allowed}")

    # the historical name, used throughout the configuration code
    fail = refuse


class PayloadReader(Checker):
    """Field-by-field reader of a received payload that names the sender on error.

    The payload is copied into a plain dict first; a mapping that cannot be
    read, or whose keys are not all strings, is refused. Every method raises
    :class:`~fedforest.errors.PayloadError` and nothing else.

    Parameters
    ----------
    payload : mapping
        The received payload.
    fmt : str, optional
        Its expected format (a key of :data:`fedforest.protocol.FORMATS`);
        ``format`` and ``version`` are then checked first. ``None`` reads a
        nested entry that has no format of its own.
    sender : str, optional
        Named in every error message.
    where : str, optional
        Position of a nested entry (``imputers[3]``), named in every message.
    """

    def __init__(self, payload: Any, fmt: str | None, sender: str | None = None, where=""):
        self.sender = sender
        self.where = where
        self.payload = self._plain_dict(payload, f"a dict{' for ' + fmt if fmt else ''}")
        self.version = None
        if fmt is not None:
            found = self.payload.get("format")
            if not isinstance(found, str) or found != fmt:
                self.fail(f"field 'format' is {describe(found)}, expected {fmt!r}")
            version = self.payload.get("version")
            if isinstance(version, np.integer):
                version = int(version)
            if isinstance(version, bool) or not isinstance(version, int):
                self.refuse("version", version, "a positive integer")
            try:
                self.version = protocol.check_version(fmt, version)
            except (ValueError, TypeError, OverflowError) as err:
                self.fail(str(err))
            if self.version < protocol.FORMATS[fmt]:  # a reader of an older version
                try:
                    upgraded = protocol.upgrade(fmt, self.version, self.payload)
                except PayloadError:
                    raise
                except Exception as err:  # noqa: BLE001 - a malformed old payload
                    self.fail(f"version {self.version} cannot be upgraded: {err}")
                self.payload = self._plain_dict(upgraded, "a dict after the upgrade")

    def _plain_dict(self, payload: Any, expected: str) -> dict:
        if not isinstance(payload, Mapping):
            self.fail(f"expected {expected}, got {type(payload).__name__}")
        try:
            items = list(payload.items())
        except Exception as err:  # noqa: BLE001 - a mapping that cannot be read
            self.fail(f"expected {expected}; its items cannot be read ({type(err).__name__})")
        out: dict[str, Any] = {}
        for k, v in items:
            if not isinstance(k, str):
                self.fail(f"field names must be strings, found {describe(k)}")
            name = str.__str__(k)
            if name in out:
                self.fail(f"field {name!r} appears twice")
            out[name] = v
        return out

    def fail(self, message: str) -> NoReturn:
        prefix = f"{self.where}: " if self.where else ""
        raise PayloadError(prefix + message, sender=self.sender)

    def refuse(self, key, value, allowed) -> NoReturn:
        self.fail(f"field {key!r} is {describe(value)}; expected {allowed}")

    def entry(self, item: Any, where: str) -> PayloadReader:
        """A reader for a nested entry (no format of its own), e.g. ``imputers[2]``."""
        where = f"{self.where}: {where}" if self.where else where
        return PayloadReader(item, None, self.sender, where)

    def check_keys(self, allowed: set[str]) -> None:
        extra = sorted(set(self.payload) - set(allowed) - {"format", "version"})
        if extra:
            self.fail(f"unknown fields {extra}; expected only {sorted(allowed)}")

    def has(self, key: str) -> bool:
        """Whether the payload has field ``key``."""
        return key in self.payload

    def get(self, key: str, default: Any = _MISSING):
        """The raw value of field ``key``; a missing field without ``default`` is refused."""
        if key not in self.payload:
            if default is _MISSING:
                self.fail(f"field {key!r} is missing")
            return default
        return self.payload[key]

    # field readers: the checks of Checker applied to payload[key]
    def read_array(self, key, kind, ndim=1, length=None, default: Any = _MISSING, **checks):
        """Field ``key`` checked by :meth:`Checker.array` (keywords: ``width``,
        ``max_len``, ``lo``, ``hi``, ``finite``).

        A required field (no ``default``) is never returned as ``None``. Only
        with ``default=None`` is the field optional: absent or ``None`` gives
        ``None``.
        """
        value = self.get(key, default)
        if value is None and default is None:
            return None
        return self.array(key, value, kind, ndim, length, **checks)

    def read_str_list(
        self, key, max_len, unique=True, default: Any = _MISSING, allow_empty=False
    ) -> list[str]:
        return self.str_list(
            key, self.get(key, default), unique=unique, max_len=max_len, allow_empty=allow_empty
        )

    def read_labels(self, key, max_len) -> list:
        return self.labels(key, self.get(key), max_len=max_len)

    def read_number(self, key, lo=None, hi=None, default: Any = _MISSING) -> float:
        return self.number(key, self.get(key, default), lo, hi)

    def read_integer(self, key, lo=None, hi=None, default: Any = _MISSING) -> int:
        return self.integer(key, self.get(key, default), lo, hi)

    def read_boolean(self, key, default: Any = _MISSING) -> bool:
        return self.boolean(key, self.get(key, default))

    def read_string(self, key, default: Any = _MISSING) -> str:
        return self.string(key, self.get(key, default))

    def read_choice(self, key, allowed, default: Any = _MISSING):
        return self.choice(key, self.get(key, default), allowed)

    def read_mapping(self, key, max_len=None, default: Any = _MISSING) -> dict:
        """Field ``key`` as a plain dict whose keys are all strings."""
        value = self.get(key, default)
        if not isinstance(value, Mapping):
            self.refuse(key, value, "a dict")
        try:
            items = list(value.items())
        except Exception:  # noqa: BLE001 - a mapping that cannot be read
            self.refuse(key, value, "a dict")
        if max_len is not None and len(items) > max_len:
            self.refuse(key, f"a dict of {len(items)} entries", f"at most {max_len} entries")
        out = {}
        for k, v in items:
            if not isinstance(k, str):
                self.refuse(key, value, f"a dict with string keys (found {describe(k)})")
            out[str.__str__(k)] = v
        return out
