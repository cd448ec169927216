"""One family of validators for everything that enters fedforest.

:class:`Checker` holds the checks (integer, number, boolean, choice, string,
list of strings, array) and reports a failure as *key, bad value, what is
allowed*. Its subclasses only decide how a failure is raised:

* :class:`ConfigChecker` raises :class:`~fedforest.errors.ConfigError` naming
  the file (``site_configs/site-1.yaml: key 'selector' is 'magic'; allowed:
  ...``);
* :class:`PayloadReader` reads the fields of a received payload and raises
  :class:`~fedforest.errors.PayloadError` naming the sender and the field; it
  also checks the payload's ``format`` and ``version`` against
  :mod:`fedforest.protocol`, and :meth:`PayloadReader.entry` reads a nested
  entry (an item of a list) with its position in every message.

This module imports only :mod:`fedforest.errors` and :mod:`fedforest.protocol`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

from . import protocol
from .errors import ConfigError, PayloadError

_MISSING = object()
#: numpy dtype kinds accepted for each array kind.
ARRAY_KINDS = {"i": "iu", "f": "f", "b": "b", "U": "U"}


def _range(lo, hi, open_lo=False, open_hi=False) -> str:
    if lo is not None and hi is not None:
        return f" in {'(' if open_lo else '['}{lo}, {hi}{')' if open_hi else ']'}"
    if lo is not None:
        return f" {'>' if open_lo else '>='} {lo}"
    if hi is not None:
        return f" {'<' if open_hi else '<='} {hi}"
    return ""


def describe(value: Any) -> str:
    """A short description of a value for an error message (arrays by dtype and shape)."""
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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
        return value

    def number(self, key, value, lo=None, hi=None, open_lo=False, open_hi=False) -> float:
        allowed = f"a finite number{_range(lo, hi, open_lo, open_hi)}"
        if isinstance(value, (np.integer, np.floating)):
            value = value.item()
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            self.refuse(key, value, allowed)
        bad = (lo is not None and (value <= lo if open_lo else value < lo)) or (
            hi is not None and (value >= hi if open_hi else value > hi)
        )
        if bad:
            self.refuse(key, value, allowed)
        return float(value)

    def boolean(self, key, value) -> bool:
        if not isinstance(value, bool):
            self.refuse(key, value, "true or false")
        return value

    def choice(self, key, value, allowed):
        if not isinstance(value, (str, int, float, type(None))) or value not in allowed:
            self.refuse(key, value, ", ".join(map(str, allowed)))
        return value

    def string(self, key, value) -> str:
        if not isinstance(value, str) or not value.strip():
            self.refuse(key, value, "a non-empty string")
        return value

    def str_list(self, key, value, allowed=None, unique=True, max_len=None) -> list[str]:
        if isinstance(value, np.ndarray) and value.dtype.kind == "U" and value.ndim == 1:
            value = value.tolist()
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            self.refuse(key, value, "a list of strings")
        if max_len is not None and len(value) > max_len:
            self.refuse(key, f"{len(value)} entries", f"at most {max_len} entries")
        if unique and len(set(value)) != len(value):
            self.refuse(key, value, "a list without duplicates")
        for v in value:
            if allowed is not None and v not in allowed:
                self.refuse(key, v, ", ".join(allowed))
        return list(value)

    def array(self, key, value, kind: str, ndim: int = 1, length: int | None = None):
        """``value`` as a numpy array of dtype kind ``kind`` ('i', 'f', 'b' or 'U')."""
        if not isinstance(value, np.ndarray):
            self.refuse(key, value, f"a numpy array of kind {kind!r}")
        if value.dtype.kind not in ARRAY_KINDS[kind]:
            self.refuse(key, value, f"a numpy array of kind {kind!r}")
        if value.ndim != ndim:
            self.refuse(key, value, f"an array with {ndim} dimension(s)")
        if length is not None and value.shape[0] != length:
            self.refuse(key, value, f"an array of length {length}")
        if kind == "f" and not np.all(np.isfinite(value)):
            self.refuse(key, value, "finite values only")
        return value


class ConfigChecker(Checker):
    """Raises :class:`~fedforest.errors.ConfigError` naming the file, key, value and what is allowed."""

    def __init__(self, source: str):
        self.source = source

    def refuse(self, key, value, allowed) -> NoReturn:
        raise ConfigError(f"{self.source}: key '{key}' is {value!r}; allowed: {allowed}")

    # the historical name, used throughout the configuration code
    fail = refuse


class PayloadReader(Checker):
    """Field-by-field reader of a received payload that names the sender on error.

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
        if not isinstance(payload, Mapping):
            self.fail(
                f"expected a dict{' for ' + fmt if fmt else ''}, got {type(payload).__name__}"
            )
        self.payload = payload
        self.version = None
        if fmt is not None:
            found = payload.get("format")
            if not isinstance(found, str) or found != fmt:
                self.fail(f"field 'format' is {describe(found)}, expected {fmt!r}")
            try:
                self.version = protocol.check_version(fmt, payload.get("version"))
            except ValueError as err:
                self.fail(str(err))
            if self.version < protocol.FORMATS[fmt]:  # a reader of an older version
                self.payload = protocol.upgrade(fmt, self.version, payload)

    def fail(self, message: str) -> NoReturn:
        prefix = f"{self.where}: " if self.where else ""
        raise PayloadError(prefix + message, sender=self.sender)

    def refuse(self, key, value, allowed) -> NoReturn:
        self.fail(f"field {key!r} is {describe(value)}; expected {allowed}")

    def entry(self, item: Any, where: str) -> PayloadReader:
        """A reader for a nested entry (no format of its own), e.g. ``imputers[2]``."""
        return PayloadReader(item, None, self.sender, where)

    def check_keys(self, allowed: set[str]) -> None:
        extra = sorted(map(str, set(self.payload) - set(allowed) - {"format", "version"}))
        if extra:
            self.fail(f"unknown fields {extra}; expected only {sorted(allowed)}")

    def get(self, key: str, default: Any = _MISSING):
        if key not in self.payload:
            if default is _MISSING:
                self.fail(f"field {key!r} is missing")
            return default
        return self.payload[key]

    # field readers: the checks of Checker applied to payload[key]
    def read_array(self, key, kind, ndim=1, length=None, default: Any = _MISSING):
        value = self.get(key, default)
        if value is None and default is None:
            return None
        return self.array(key, value, kind, ndim, length)

    def read_str_list(self, key, max_len, unique=True, default: Any = _MISSING) -> list[str]:
        return self.str_list(key, self.get(key, default), unique=unique, max_len=max_len)

    def read_number(self, key, lo=None, hi=None, default: Any = _MISSING) -> float:
        value = self.get(key, default)
        if isinstance(value, (np.integer, np.floating)):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.refuse(key, value, "a number")
        if not math.isfinite(value):
            self.refuse(key, value, "a finite number")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.refuse(key, value, f"a number{_range(lo, hi)}")
        return value

    def read_integer(self, key, lo=None, hi=None) -> int:
        return self.integer(key, self.get(key), lo, hi)

    def read_string(self, key) -> str:
        return self.string(key, self.get(key))

    def read_mapping(self, key) -> Mapping:
        value = self.get(key)
        if not isinstance(value, Mapping):
            self.refuse(key, value, "a dict")
        return value
