"""A test-only FLARE filter that records what the server handles; shipped into custom/.

:class:`Inspector` is added on the **server** (``FedForestRecipe(...,
extra_components={"server": [Inspector()]})``), where the job builder makes it
a task-result filter for every task of the job's mode. For every Shareable it
processes it appends one JSON line to ``<server run folder>/<file_name>``:
the task name, the sending site, the return code, the Shareable's top-level
keys, the payload's top-level keys, and every ``format`` value found anywhere
inside the Shareable (nested dicts, lists and tuples walked). It never alters
the Shareable: it reads it and returns the same object.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from nvflare.apis.filter import Filter
from nvflare.apis.fl_constant import FLContextKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import ReservedHeaderKey, Shareable

logger = logging.getLogger(__name__)

#: The file (in the server's run folder) the inspector appends to.
INSPECTED = "inspected.jsonl"
#: The Shareable key of fedforest's payload (``fedforest.protocol.PAYLOAD``); spelt
#: here so the inspector reads the wire, not the code under test.
PAYLOAD_KEY = "fedforest_payload"
#: Deeper than any fedforest payload; a walk stops here.
MAX_DEPTH = 64

_lock = threading.Lock()


def formats_in(value, depth: int = 0) -> list[str]:
    """Every ``format`` value anywhere inside ``value`` (dicts, lists, tuples), in walk order."""
    found: list[str] = []
    if depth > MAX_DEPTH:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "format":
                found.append(item if isinstance(item, str) else repr(item))
            found.extend(formats_in(item, depth + 1))
    elif isinstance(value, (list, tuple)):
        for item in value:
            found.extend(formats_in(item, depth + 1))
    return found


def read_records(run_dir, file_name: str = INSPECTED) -> list[dict]:
    """The inspector's records in a server run folder (none if it wrote nothing)."""
    path = Path(run_dir) / file_name
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Inspector(Filter):
    """Record each Shareable the server processes (see the module docstring)."""

    def __init__(self, file_name: str = INSPECTED):
        super().__init__()
        self.file_name = file_name

    def process(self, shareable: Shareable, fl_ctx: FLContext) -> Shareable:
        try:
            record = self._record(shareable, fl_ctx)
        except Exception as err:  # noqa: BLE001 - an inspection never changes the job
            logger.exception("inspector: could not read a shareable")
            record = {"inspector_error": f"{type(err).__name__}: {err}"}
        try:
            workspace = fl_ctx.get_engine().get_workspace()
            path = Path(workspace.get_run_dir(fl_ctx.get_job_id())) / self.file_name
            with _lock, open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(record, sort_keys=True) + "\n")
        except Exception:  # noqa: BLE001
            logger.exception("inspector: could not write its record")
        return shareable

    @staticmethod
    def _record(shareable: Shareable, fl_ctx: FLContext) -> dict:
        task = shareable.get_header(ReservedHeaderKey.TASK_NAME) or fl_ctx.get_prop(
            FLContextKey.TASK_NAME
        )
        peer = fl_ctx.get_peer_context()
        payload = shareable.get(PAYLOAD_KEY)
        return {
            "task": task,
            "site": peer.get_identity_name() if peer is not None else None,
            "rc": shareable.get_return_code(ReturnCode.OK),
            "keys": sorted(str(k) for k in shareable),
            "payload_keys": sorted(str(k) for k in payload) if isinstance(payload, dict) else None,
            "formats": sorted(set(formats_in(dict(shareable)))),
        }
