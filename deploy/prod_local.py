"""Production mode, tested on one machine: ``make prod-local``.

The steps of a real deployment, every participant on localhost:

1. ``nvflare provision -p deploy/project.yml -w <workspace>/provision``: one
   startup kit per participant (server, hospitals, admin);
2. each hospital that keeps its data path to itself writes it into its own
   kit's ``local/fedforest.yaml`` (``--local-data SITE=PATH``);
3. the server and every hospital start from their kits
   (``startup/sub_start.sh --once``, which runs FLARE's server or client with
   the ``python3`` on PATH: this environment's), each a separate process in
   its own session, output in ``<workspace>/logs/<name>.log``;
4. the admin's kit waits until every hospital is connected, submits the recipe
   through FLARE's ``ProdEnv`` (:func:`fedforest.flare.environments.run_prod`),
   waits for it and downloads the results into ``--out``;
5. the per-site table is printed, and every process started here (and every
   process they started) is stopped by its id: terminated, then killed after a
   grace period. Also after a failure, Ctrl-C or SIGTERM.

The workspace is guarded like every fedforest output (``fedforest.outputs``):
only a new, empty or earlier ``prod_local`` workspace is used, never a user's
folder. ``<workspace>/processes.json`` lists what was started.

Usage (from the project folder)::

    .venv/bin/python deploy/prod_local.py                       # site_configs/, demo data
    .venv/bin/python deploy/prod_local.py --local-data site-2=/secure/site-2.csv
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from fedforest import outputs
from fedforest.cli.job import format_results
from fedforest.flare.environments import (
    PROD_COMMAND,
    SITE_HINT,
    check_admin_kit,
    run_prod,
    wait_for_sites,
)
from fedforest.flare.recipe import FedForestRecipe

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COMMAND = "deploy/prod_local.py"
#: Seconds a process has to exit after SIGTERM before it is killed.
GRACE = 10.0
#: The python of this environment: the kits' start scripts run ``python3`` from PATH.
BIN = Path(sys.executable).parent


@dataclass
class Project:
    """What ``prod_local`` needs from ``project.yml``."""

    name: str
    server: str
    host: str
    ports: tuple[int, ...]
    clients: list[str]
    admin: str

    @classmethod
    def load(cls, path: Path) -> Project:
        data = yaml.safe_load(Path(path).read_text())
        people = data.get("participants") or []
        by_type = {
            t: [p for p in people if p.get("type") == t] for t in ("server", "client", "admin")
        }
        if len(by_type["server"]) != 1 or not by_type["client"] or not by_type["admin"]:
            raise ValueError(f"{path}: needs one server, at least one client and one admin")
        server = by_type["server"][0]
        fl_port = int(server.get("fed_learn_port", 8002))
        ports = (fl_port, int(server.get("admin_port", fl_port)))
        return cls(
            name=data["name"],
            server=server["name"],
            host=server.get("default_host", server["name"]),
            ports=tuple(sorted(set(ports))),
            clients=[c["name"] for c in by_type["client"]],
            admin=by_type["admin"][0]["name"],
        )


@dataclass
class Processes:
    """The processes started here, and every process they start, stopped by id.

    Each started process leads its own session (so a Ctrl-C in the terminal
    reaches only this script, which then stops them in order). FLARE starts a
    job's processes in sessions of their own too, so a watcher records every
    descendant while they run: one orphaned by a crash is still stopped.
    """

    record: Path
    started: dict = field(default_factory=dict)  # name -> Popen
    seen: dict = field(default_factory=dict)  # (pid, create_time) -> psutil.Process
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _watcher: threading.Thread | None = None

    def start(self, name: str, args: list[str], cwd: Path, log: Path, env: dict) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                args,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started[name] = proc
        self._remember()
        if self._watcher is None:
            self._watcher = threading.Thread(
                target=self._watch, name="prod_local watcher", daemon=True
            )
            self._watcher.start()

    def dead(self) -> dict[str, int]:
        """Started processes that have exited, with their exit codes."""
        return {n: p.returncode for n, p in self.started.items() if p.poll() is not None}

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            self._remember()

    def _remember(self) -> None:
        import psutil

        found = {}
        for proc in self.started.values():
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(proc.pid)
                for p in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        found[(p.pid, p.create_time())] = p
        with self._lock:
            new = set(found) - set(self.seen)
            self.seen.update(found)
        if new:
            self._write()

    def _write(self) -> None:
        names = {p.pid: n for n, p in self.started.items()}
        with self._lock:
            rows = [
                {"pid": pid, "create_time": created, "started_as": names.get(pid, "(descendant)")}
                for pid, created in sorted(self.seen)
            ]
        self.record.write_text(json.dumps(rows, indent=1) + "\n")

    def stop(self, grace: float = GRACE) -> list[str]:
        """Terminate every recorded process, kill those alive after ``grace`` s; name survivors."""
        import psutil

        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(5)
        self._remember()
        with self._lock:
            procs = list(self.seen.values())
        for p in procs:
            with contextlib.suppress(psutil.Error):  # gone, or its pid reused: not ours
                p.terminate()
        _, alive = psutil.wait_procs(procs, timeout=grace)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        _, alive = psutil.wait_procs(alive, timeout=5)
        for proc in self.started.values():  # reap them
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(1)
        return [f"{p.pid}" for p in alive]

    def running(self) -> list[int]:
        """Recorded processes still running (same pid and start time)."""
        import psutil

        left = []
        for (pid, created), _ in list(self.seen.items()):
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(pid)
        return left


def check_ports_free(project: Project) -> None:
    for port in project.ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as err:
                raise RuntimeError(
                    f"port {port} of the server in the project file is in use ({err}): another "
                    "FLARE server (another `make prod-local`?) is running; stop it or change "
                    "fed_learn_port / admin_port"
                ) from None


def provision(project_file: Path, folder: Path, project: Project) -> Path:
    """``nvflare provision`` into ``folder``; return the kits' folder (``<name>/prod_NN``)."""
    nvflare = BIN / "nvflare"
    args = [str(nvflare)] if nvflare.is_file() else [sys.executable, "-m", "nvflare.cli"]
    args += ["provision", "-p", str(project_file), "-w", str(folder), "--force"]
    done = subprocess.run(args, capture_output=True, text=True, env=_env())
    if done.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(args)}` failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        )
    kits = sorted((folder / project.name).glob("prod_[0-9][0-9]"))
    if not kits:
        raise RuntimeError(f"nvflare provision wrote no prod_NN folder in {folder / project.name}")
    return kits[-1]


def write_local_data(kit: Path, site: str, data: Path) -> Path:
    """Site-owned data path: ``<site kit>/local/fedforest.yaml`` (the server never sees it)."""
    target = kit / site / "local" / "fedforest.yaml"
    target.write_text(
        "# Written by the hospital, read only by its own FLARE client: where its data is.\n"
        + yaml.safe_dump({"data_path": str(data)})
    )
    return target


def allow_class(participant_kit: Path, class_path: str) -> Path:
    """Allow-list ``class_path`` in a participant's ``local/resources.json``.

    FLARE builds a job component whose class is not in the job's ``custom/``
    folder only when the site's ``class_allow_list`` lists it (a full dotted
    path, or a package prefix ending in ``.``). The list in ``resources.json``
    replaces FLARE's default list, so it starts from the kit's
    ``resources.json.default``.
    """
    local = participant_kit / "local"
    target = local / "resources.json"
    source = target if target.is_file() else local / "resources.json.default"
    resources = json.loads(source.read_text())
    allowed = resources.setdefault("class_allow_list", [])
    if class_path not in allowed:
        allowed.append(class_path)
    target.write_text(json.dumps(resources, indent=2) + "\n")
    return target


def fedforest_classes(recipe: FedForestRecipe) -> dict[str, set[str]]:
    """The fedforest classes the job's apps build, by target (``server`` or a site name).

    Read from the job's exported ``config_fed_*.json`` files: the controller on
    the server, the executor at each site, and any other fedforest component the
    job's settings add (the MLflow receiver of ``job.tracking: mlflow``).
    """

    def paths(node) -> set[str]:
        if isinstance(node, dict):
            found = {
                v for k, v in node.items() if k in ("path", "class_path") and isinstance(v, str)
            }
            return found.union(*(paths(v) for v in node.values()))
        if isinstance(node, list):
            return set().union(*(paths(v) for v in node))
        return set()

    with tempfile.TemporaryDirectory(prefix="fedforest-job-") as tmp:
        with contextlib.redirect_stdout(io.StringIO()):
            recipe.export(tmp)
        job = next(Path(tmp).glob("*/meta.json")).parent
        found: dict[str, set[str]] = {}
        for app, targets in json.loads((job / "meta.json").read_text())["deploy_map"].items():
            used = set()
            for config in (job / app / "config").glob("config_fed_*.json"):
                used |= {
                    p for p in paths(json.loads(config.read_text())) if p.startswith("fedforest.")
                }
            for target in targets:
                found.setdefault(target, set()).update(used)
    return found


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("NVFL_WORKSPACE", None)  # sub_start.sh would run the kit from elsewhere
    return env


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(f"    {line}" for line in text[-lines:])


def run(
    recipe: FedForestRecipe,
    project_file,
    workspace,
    out_dir,
    local_data: dict[str, Path] | None = None,
    timeout: float = 900,
    connect_timeout: float = 120,
    ship_code: bool = True,
) -> tuple[Path, Processes]:
    """Provision, start, submit ``recipe`` through ProdEnv, download, stop everything.

    ``ship_code=False`` is for a recipe built without code in ``custom/``
    (fedforest installed at every site): each kit's ``local/resources.json``
    then allow-lists the fedforest class that participant runs, as a site does.

    Returns the downloaded run folder (``results.json``, ``report.md``) and the
    record of the processes started (all stopped when this returns or raises).
    """
    project_file = Path(project_file).resolve()
    workspace, out_dir = Path(workspace).resolve(), Path(out_dir).resolve()
    if workspace.is_relative_to(out_dir) or out_dir.is_relative_to(workspace):
        raise ValueError(
            f"{workspace} and {out_dir} overlap (one holds the other); give two folders"
        )
    project = Project.load(project_file)
    missing = sorted(set(recipe.sites) - set(project.clients))
    if missing:
        raise ValueError(
            f"{project_file}: the job's sites {', '.join(missing)} are not clients of the project; "
            "each site of site_configs/job.yaml needs a client of the same name"
        )
    unknown = sorted(set(local_data or {}) - set(project.clients))
    if unknown:
        raise ValueError(f"--local-data names {', '.join(unknown)}, not clients of the project")
    check_ports_free(project)
    for site, data in (local_data or {}).items():
        if not Path(data).is_file():
            raise ValueError(f"--local-data {site}={data}: no such file")
    outputs.check_dir(out_dir, PROD_COMMAND)
    outputs.claim_dir(workspace, COMMAND)
    procs = Processes(record=workspace / "processes.json")
    logs = workspace / "logs"
    try:
        print(f"provisioning {project_file} into {workspace / 'provision'} ...", flush=True)
        kits = provision(project_file, workspace / "provision", project)
        for site, data in (local_data or {}).items():
            print(
                f"{site} keeps its data path in {write_local_data(kits, site, Path(data).resolve())}"
            )
        if not ship_code:  # each participant allow-lists the installed fedforest classes it runs
            for target, classes in fedforest_classes(recipe).items():
                for class_path in sorted(classes):
                    allow_class(
                        kits / (project.server if target == "server" else target), class_path
                    )
        for name in [project.server, *project.clients]:
            script = kits / name / "startup" / "sub_start.sh"
            procs.start(
                name, ["bash", str(script), "--once"], kits / name, logs / f"{name}.log", _env()
            )
        print(
            f"started the server and {len(project.clients)} sites on {project.host} "
            f"(ports {', '.join(map(str, project.ports))}; logs in {logs}) ...",
            flush=True,
        )
        admin_kit = kits / project.admin
        username = check_admin_kit(admin_kit)
        connected = _wait_connected(procs, admin_kit, project, username, logs, connect_timeout)
        print(
            f"connected: {', '.join(connected)}; submitting the job as {username} ...", flush=True
        )
        run_dir = run_prod(recipe, admin_kit, out_dir, username, timeout, sites_timeout=5)
        return run_dir, procs
    except BaseException:
        if procs.started:
            print(
                f"logs: {logs}/<name>.log (console) and "
                f"{workspace / 'provision' / project.name}/prod_NN/<name>/log.txt (FLARE)",
                file=sys.stderr,
            )
        raise
    finally:
        with _uninterrupted():  # a second Ctrl-C must not leave processes running
            survivors = procs.stop()
        outputs.record_dir(workspace, COMMAND)
        if survivors:
            print(f"could not stop processes {', '.join(survivors)}", file=sys.stderr)
        else:
            print(f"stopped the {len(procs.seen)} processes started ({procs.record})", flush=True)


@contextlib.contextmanager
def _uninterrupted():
    """Ignore Ctrl-C and SIGTERM for a while (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _wait_connected(procs, admin_kit, project, username, logs, timeout) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        dead = procs.dead()
        if dead:
            name, code = next(iter(dead.items()))
            raise RuntimeError(
                f"{name} exited with status {code} before the sites connected; its log "
                f"{logs / (name + '.log')} ends with:\n{_tail(logs / (name + '.log'))}"
            )
        left = deadline - time.monotonic()
        try:
            connected = wait_for_sites(admin_kit, project.clients, username, timeout=min(left, 5))
        except RuntimeError:  # the server does not answer yet
            if time.monotonic() >= deadline:
                raise
            continue
        if set(project.clients) <= set(connected):
            return connected
        if time.monotonic() >= deadline:
            missing = sorted(set(project.clients) - set(connected))
            raise RuntimeError(
                f"{', '.join(missing)} did not connect within {timeout:g} s (logs: "
                + ", ".join(str(logs / f"{m}.log") for m in missing)
                + f"); {SITE_HINT}"
            )


def _local_data(text: str) -> tuple[str, Path]:
    site, sep, path = text.partition("=")
    if not sep or not site or not path:
        raise argparse.ArgumentTypeError(f"{text!r} is not SITE=PATH")
    return site, Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Provision deploy/project.yml, run the server and sites from their startup "
        "kits on this machine, run the job through ProdEnv, stop everything."
    )
    parser.add_argument("--project", type=Path, default=HERE / "project.yml")
    parser.add_argument("--config", type=Path, default=ROOT / "site_configs")
    parser.add_argument("--workspace", type=Path, default=Path("/tmp/fedforest-prod"))
    parser.add_argument("--out", type=Path, default=ROOT / "workspaces" / "prod")
    parser.add_argument(
        "--local-data",
        type=_local_data,
        action="append",
        default=[],
        metavar="SITE=PATH",
        help="write PATH into SITE's own local/fedforest.yaml (repeatable)",
    )
    parser.add_argument(
        "--no-custom",
        action="store_true",
        help="ship no code in custom/: run the installed fedforest, allow-listed in every "
        "participant's local/resources.json",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds for the job")
    parser.add_argument("--connect-timeout", type=float, default=120, help="seconds for sites")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def stop_on_sigterm(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        recipe = FedForestRecipe(args.config, ship_code=not args.no_custom)
        run_dir, _ = run(
            recipe,
            args.project,
            args.workspace,
            args.out,
            dict(args.local_data),
            args.timeout,
            args.connect_timeout,
            ship_code=not args.no_custom,
        )
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError) as err:
        print(f"prod_local: error: {err}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    results = json.loads((run_dir / "results.json").read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {run_dir / 'results.json'}")
    return 0 if results.get("status") == "finished" else 1


if __name__ == "__main__":
    code = main()
    # After an interruption or a timeout, FLARE's admin API may still run threads (a job
    # monitor retrying a server that is gone) that would keep this process alive; every
    # process started here is stopped by now, so leave without waiting for them.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
