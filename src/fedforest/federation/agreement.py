"""How the sites of a swarm agree on who takes part, without a leader.

In swarm mode (``job.mode: swarm``) every site computes the schema, the
election, the tuning steps and the pooled model itself, from the payloads the
other sites sent it. Every site must use the same payloads, or the sites would
end with different models. Each exchange therefore has two steps:

1. every site sends its payload (or the reason it failed) to every other site;
2. every site sends a *receipt*: for each site, the digest of the payload it
   holds from it (:func:`payload_digest`), the failure it was told of, or why it
   refused the message. Then every site applies :func:`agree` to the receipts
   it holds.

**The rule.** The *responders* are the sites whose receipt a site holds (its
own included). A site takes part in the rest of the job if it is a responder
and every responder holds a payload from it with the same digest. Every site
applies the same rule to the same receipts, so the survivors agree whenever
each receipt reaches every survivor or none; the reason a site is left out is
derived from the receipts alone (:func:`drop_reason`), so every survivor names
it the same way. A site that sent different payloads to different sites is
left out by all (the digests differ), as is a site whose payload reached only
some. The next exchange carries each site's participant list (its *view*); a
message whose view differs from the receiver's is refused, so a split is
never silent. The pooled model's digest is reported at the end for the same
reason.

What the rule does not cover: a site that lies in its receipts can make the
others leave a third site out (it cannot make them use a payload that was not
sent); the site is named in every survivor's results with the reason.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: What a receipt may say of one site.
RECEIPT_KINDS = ("digest", "failed", "refused")


def payload_digest(value: Any) -> str:
    """SHA-256 of a payload in a canonical form (hex).

    Dict keys are sorted (and keep their type: ``1`` and ``"1"`` differ),
    lists and tuples are the same, numpy scalars equal
    the Python numbers of the same value, arrays are hashed with their dtype
    and shape. A payload therefore has the same digest before and after it
    crossed the network.

    Examples
    --------
    >>> import numpy as np
    >>> payload_digest({"a": [1, 2], "b": np.arange(3)}) == payload_digest(
    ...     {"b": np.arange(3), "a": (np.int64(1), 2)})
    True
    """
    h = hashlib.sha256()
    _feed(h, value)
    return h.hexdigest()


def _feed(h, value: Any) -> None:
    if value is None:
        h.update(b"N")
    elif isinstance(value, (bool, np.bool_)):
        h.update(b"T" if value else b"F")
    elif isinstance(value, (int, np.integer)):
        text = str(int(value)).encode()
        h.update(b"i" + struct.pack("<I", len(text)) + text)
    elif isinstance(value, (float, np.floating)):
        v = float(value)
        h.update(b"f" + (b"nan" if math.isnan(v) else struct.pack("<d", v)))
    elif isinstance(value, str):
        text = value.encode("utf-8", "surrogatepass")
        h.update(b"s" + struct.pack("<Q", len(text)) + text)
    elif isinstance(value, bytes):
        h.update(b"y" + struct.pack("<Q", len(value)) + value)
    elif isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        if arr.dtype.kind == "O":
            raise TypeError("object arrays have no canonical digest")
        head = f"{arr.dtype.str}|{arr.shape}".encode()
        h.update(b"a" + struct.pack("<I", len(head)) + head)
        h.update(arr.tobytes())
    elif isinstance(value, Mapping):
        # a key keeps its type: {1: x} and {"1": x} are different payloads
        items = sorted(value.items(), key=lambda kv: (type(kv[0]).__name__, str(kv[0])))
        h.update(b"d" + struct.pack("<Q", len(items)))
        for k, v in items:
            if not isinstance(k, (str, int, np.integer)) or isinstance(k, bool):
                raise TypeError(f"a payload's dict keys are strings or integers, not {k!r}")
            _feed(h, k)
            _feed(h, v)
    elif isinstance(value, (list, tuple)):
        h.update(b"l" + struct.pack("<Q", len(value)))
        for v in value:
            _feed(h, v)
    else:
        raise TypeError(f"a payload cannot hold a {type(value).__name__}")


def agree(
    candidates: Sequence[str], receipts: Mapping[str, Mapping[str, Mapping[str, str]]]
) -> tuple[list[str], dict[str, str]]:
    """Apply the agreement rule (module docstring) to the receipts a site holds.

    Parameters
    ----------
    candidates : sequence of str
        The sites that took part before this exchange.
    receipts : mapping
        ``{responder: {site: entry}}``: each responder's receipt, an entry
        being ``{"digest": hex}``, ``{"failed": reason}`` or
        ``{"refused": reason}`` (a site it holds nothing from is absent).

    Returns
    -------
    participants : list of str
        The candidates that take part from now on, sorted.
    dropped : dict
        ``{site: reason}`` for every other candidate (:func:`drop_reason`).

    Examples
    --------
    >>> receipts = {"a": {"a": {"digest": "1"}, "b": {"digest": "2"}},
    ...             "b": {"a": {"digest": "1"}, "b": {"digest": "2"}, "c": {"digest": "3"}}}
    >>> agree(["a", "b", "c"], receipts)
    (['a', 'b'], {'c': 'its payload reached 1 of the 2 sites that confirmed receipt'})
    """
    responders = sorted(r for r in receipts if r in candidates)
    kept, dropped = [], {}
    for site in sorted(candidates):
        held = [receipts[r].get(site) for r in responders]
        digests = {e.get("digest") for e in held if e is not None}
        if site in responders and None not in held and len(digests) == 1 and None not in digests:
            kept.append(site)
        else:
            dropped[site] = drop_reason(site, responders, receipts)
    return kept, dropped


def drop_reason(
    site: str, responders: Sequence[str], receipts: Mapping[str, Mapping[str, Mapping[str, str]]]
) -> str:
    """Why ``site`` is left out, from the receipts alone (the same at every survivor)."""
    entries = [(r, receipts[r].get(site)) for r in sorted(responders)]
    for _, e in entries:
        if e is not None and "failed" in e:
            return f"it failed: {e['failed']}"
    for r, e in entries:
        if e is not None and "refused" in e:
            return f"{r} refused its message: {e['refused']}"
    digests = {e["digest"] for _, e in entries if e is not None and "digest" in e}
    holders = sum(1 for _, e in entries if e is not None and "digest" in e)
    if not holders:
        return "no message from it reached any site in time"
    if len(digests) > 1:
        return f"it sent different payloads to different sites ({len(digests)} versions)"
    if holders < len(responders):
        return (
            f"its payload reached {holders} of the {len(responders)} sites that confirmed receipt"
        )
    return "its receipt did not reach the other sites in time"
