"""Run a built job in NVIDIA FLARE's POC mode: server and sites as separate processes.

The steps are exactly what a user types (see the README)::

    export NVFLARE_POC_WORKSPACE=/tmp/fedforest-poc
    nvflare poc prepare -c site-1 site-2 site-3 --force
    nvflare poc start
    nvflare --format json job submit -j jobs/fedforest-demo
    nvflare --format json job wait <job id> --timeout 600
    nvflare job download <job id> -o workspaces/poc
    nvflare poc stop
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

logger = logging.getLogger(__name__)


def _nvflare() -> str:
    local = Path(sys.executable).parent / "nvflare"
    return str(local) if local.exists() else (shutil.which("nvflare") or "nvflare")


def _run(cmd: list[str], env: dict, timeout: float, check: bool = True) -> str:
    logger.info("$ %s", " ".join(cmd))
    done = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if check and done.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(cmd)}` failed ({done.returncode}):\n{done.stdout[-2000:]}\n"
            f"{done.stderr[-2000:]}"
        )
    return done.stdout


def _json(text: str) -> dict:
    """The last JSON object printed by an nvflare --format json command."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise RuntimeError(f"expected JSON from nvflare, got:\n{text[-2000:]}") from err


def _find_job_id(data) -> str | None:
    if isinstance(data, dict):
        for key in ("job_id", "jobId", "id"):
            if isinstance(data.get(key), str):
                return data[key]
        for value in data.values():
            found = _find_job_id(value)
            if found:
                return found
    return None


def run_poc(
    job_dir,
    sites: list[str],
    workspace,
    out_dir,
    timeout: float = 600,
    site_files: dict[str, dict[str, str]] | None = None,
) -> Path:
    """Prepare, start, submit, wait, download and stop; return the server's run folder.

    ``site_files`` maps a site to files (name -> text) written into that site's
    own ``local/`` folder after ``poc prepare``, as a hospital would place its
    ``fedforest.yaml`` with its private data path.
    """
    workspace, out_dir = Path(workspace).resolve(), Path(out_dir).resolve()
    env = dict(os.environ)
    env["NVFLARE_POC_WORKSPACE"] = str(workspace)
    # the POC start scripts use the python3 on PATH: make it this environment's
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    nvflare = _nvflare()
    _run([nvflare, "poc", "prepare", "-c", *sites, "--force"], env, 120)
    for site, files in (site_files or {}).items():
        local = sorted(workspace.glob(f"**/{site}/local"))
        if not local:
            raise RuntimeError(f"poc prepare made no local/ folder for site {site!r}")
        for name, text in files.items():
            (local[0] / name).write_text(text)
    _run([nvflare, "poc", "start"], env, 180)
    try:
        submitted = _json(
            _run(
                [nvflare, "--format", "json", "job", "submit", "-j", str(Path(job_dir).resolve())],
                env,
                300,
            )
        )
        job_id = _find_job_id(submitted)
        if not job_id:
            raise RuntimeError(f"no job id in the submit reply: {submitted}")
        logger.info("submitted job %s", job_id)
        start = time.monotonic()
        _run(
            [nvflare, "--format", "json", "job", "wait", job_id, "--timeout", str(int(timeout))],
            env,
            timeout + 60,
            check=False,
        )
        logger.info("job %s done after %.0f s", job_id, time.monotonic() - start)
        out_dir.mkdir(parents=True, exist_ok=True)
        _run([nvflare, "job", "download", job_id, "-o", str(out_dir)], env, 300)
    finally:
        _run([nvflare, "poc", "stop"], env, 120, check=False)
    found = sorted(out_dir.rglob("results.json"), key=lambda p: p.stat().st_mtime)
    found = [p for p in found if job_id in str(p)] or found
    if not found:
        raise RuntimeError(f"job {job_id} left no results.json under {out_dir}")
    return found[-1].parent
