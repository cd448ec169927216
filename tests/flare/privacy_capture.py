"""Test-only FLARE components for the privacy tests; shipped into the job's custom/ folder.

* :class:`CaptureResults`, a task-result filter on the **server**: it saves every
  fedforest payload the server receives, as it arrived, into the server's run
  folder (``captured/<site>.<task>.npz``, written by ``save_payload``), so a test
  checks what actually left the sites.
* :class:`SimulatorScope`, a component on a **site**: FLARE's client runtime puts
  the privacy scope a job asks for (``scope`` in its ``meta.json``, looked up in
  the site's ``local/privacy.json``) into the run's context, and applies that
  scope's ``task_result_filters`` to every reply. NVIDIA FLARE 2.9's simulator
  leaves this step out (``SimulatorClientRunManager`` keeps only the job meta),
  so a scope never applies in a simulator run. This component does the same
  step, with FLARE's own function (``fedforest.flare._compat.job_scope_properties``),
  when the run starts; everything else (reading ``privacy.json``, building the
  filters, applying them) is FLARE's.
"""

from __future__ import annotations

import logging
from pathlib import Path

from nvflare.apis.event_type import EventType
from nvflare.apis.filter import Filter
from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_constant import FLContextKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import ReservedHeaderKey, Shareable

from fedforest import protocol
from fedforest.flare import _compat
from fedforest.model.model_files import save_payload

logger = logging.getLogger(__name__)

#: The folder of the server's run folder that :class:`CaptureResults` writes.
CAPTURED = "captured"


class CaptureResults(Filter):
    """Save each OK fedforest reply the server receives (``<run folder>/captured/``)."""

    def __init__(self, folder: str = CAPTURED):
        super().__init__()
        self.folder = folder

    def process(self, shareable: Shareable, fl_ctx: FLContext) -> Shareable:
        try:
            payload = shareable.get(protocol.PAYLOAD)
            if shareable.get_return_code(ReturnCode.OK) == ReturnCode.OK and payload:
                peer = fl_ctx.get_peer_context()
                site = peer.get_identity_name() if peer is not None else "unknown"
                task = shareable.get_header(ReservedHeaderKey.TASK_NAME) or fl_ctx.get_prop(
                    FLContextKey.TASK_NAME
                )
                workspace = fl_ctx.get_engine().get_workspace()
                run_dir = Path(workspace.get_run_dir(fl_ctx.get_job_id()))
                save_payload(run_dir / self.folder / f"{site}.{task}.npz", payload)
        except Exception:  # noqa: BLE001 - a capture never changes the job
            logger.exception("could not capture a reply")
        return shareable


class SimulatorScope(FLComponent):
    """Put the job's privacy scope into the site's run context, as FLARE's client runtime does."""

    def handle_event(self, event_type: str, fl_ctx: FLContext) -> None:
        if event_type != EventType.START_RUN:
            return
        workspace = fl_ctx.get_engine().get_workspace()
        props = _compat.job_scope_properties(workspace, fl_ctx.get_job_id())
        for key in (
            FLContextKey.JOB_SCOPE_NAME,
            FLContextKey.EFFECTIVE_JOB_SCOPE_NAME,
            FLContextKey.SCOPE_PROPERTIES,
            FLContextKey.SCOPE_OBJECT,
        ):
            if fl_ctx.get_prop(key) is None and props.get(key) is not None:
                fl_ctx.set_prop(key, props[key], private=True, sticky=True)
        logger.info(
            "site %s: privacy scope %r in effect",
            fl_ctx.get_identity_name(),
            props.get(FLContextKey.EFFECTIVE_JOB_SCOPE_NAME),
        )
