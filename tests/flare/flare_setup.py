"""Demo data and small job configs in a temporary folder, and :class:`Run`, one simulator run."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from pathlib import Path

import pandas as pd
import yaml

from data_prep.make_demo_data import make_demo_data
from data_prep.make_survival_data import make_survival_data
from fedforest.flare.environments import simulate
from fedforest.flare.recipe import FedForestRecipe

from .swarm_inspector import Inspector, read_records

ROOT = Path(__file__).resolve().parents[2]

#: xdist group of the tests reading the demo configs' simulator runs (``demo_server_run``,
#: ``demo_swarm_run`` in tests/conftest.py): the simulator tests of those configs, and the POC
#: and production tests, which compare their runs of the same configs with them. POC and
#: production use fixed ports: in one group they also never run at the same time.
DEMO_RUNS = "flare-demo-runs"


#: Job overrides for runs that test failures, not calibration: the demo job's calibration
#: (auto) is run by the shared demo runs and POC; other runs skip its cost.
UNCALIBRATED = {"calibration": "none"}


def write_configs(
    folder: Path,
    rows: int = 400,
    copies: dict[str, str] | None = None,
    task: str = "classification",
    **job_overrides,
) -> Path:
    """Demo data for three sites and a small, fast job config; returns the config folder.

    ``copies`` adds sites: ``{new name: demo site}`` gives the new site a copy of that
    demo site's YAML and data file (the job's ``sites`` list grows accordingly).
    ``task="regression"``: the regression demo (``site_configs/regression``, the length
    of stay as the target). ``task="survival"``: the survival demo
    (``site_configs/survival``, the GBSG2 trial's hospitals; ``rows`` does not apply).
    """
    data = folder / "data"
    if task == "survival":
        make_survival_data(data, seed=1)
    else:
        make_demo_data(data, rows=rows, seed=1, task=task)
    configs = folder / "site_configs"
    configs.mkdir(parents=True)
    shipped = ROOT / "site_configs" / (task if task != "classification" else "")
    job = yaml.safe_load((shipped / "job.yaml").read_text())
    job["forest"]["n_estimators"] = 30
    job["election"]["tuning_rounds"] = 3
    for section, values in job_overrides.items():
        job[section].update(values)
    sites = {s: s for s in ("site-1", "site-2", "site-3")} | dict(copies or {})
    job["job"]["sites"] = list(sites)
    (configs / "job.yaml").write_text(yaml.safe_dump(job))
    for site, template in sites.items():
        cfg = yaml.safe_load((shipped / f"{template}.yaml").read_text())
        cfg["site"] = site
        cfg["data_path"] = str(data / f"{template}.csv")
        if site != template:  # one table per site: the copy's rows in another order
            own = pd.read_csv(data / f"{template}.csv")
            own.sample(frac=1.0, random_state=len(site) + sum(map(ord, site))).to_csv(
                data / f"{site}.csv", index=False
            )
            cfg["data_path"] = str(data / f"{site}.csv")
        (configs / f"{site}.yaml").write_text(yaml.safe_dump(cfg))
    return configs


@contextlib.contextmanager
def terminal(path: Path):
    """What the run writes to its standard output and error, into ``path``: what a user's
    terminal would show.

    As in the ``fedforest`` command: ``sys.stdout`` and ``sys.stderr`` write to file
    descriptors 1 and 2 (pytest's capture writes elsewhere), which the child processes
    share, and warnings are logged to standard error (``logging.basicConfig``).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    streams = sys.stdout, sys.stderr
    root = logging.getLogger()
    with open(path, "w") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        try:
            yield
        finally:
            root.removeHandler(handler)
            for stream in (sys.stdout, sys.stderr):
                stream.close()  # the descriptors stay open (closefd=False)
            sys.stdout, sys.stderr = streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


class Run:
    """One simulator run of the job in ``configs``: the server's results, folders and the
    progress lines the console would show.

    ``inspect`` adds the server-side :class:`~swarm_inspector.Inspector`, which
    records what the server handles and changes nothing.
    """

    def __init__(self, folder: Path, configs: Path, custom=None, inspect: bool = True):
        extra = {"server": [Inspector()]} if inspect else None
        recipe = FedForestRecipe(configs, job_custom=custom, extra_components=extra)
        self.log = folder / "sim.log"
        #: The progress lines handed on while the job ran, each with whether the server's
        #: results.json existed yet when it came (False: it came as the job ran).
        self.progress: list[tuple[str, bool]] = []
        results = folder / "ws" / recipe.name / "server" / "simulate_job" / "results.json"
        #: What reached the terminal (FLARE's output goes to the log only).
        self.terminal = folder / "terminal.txt"
        with terminal(self.terminal):
            self.run_dir = simulate(
                recipe,
                folder / "ws",
                log_file=self.log,
                timeout=600,
                progress=lambda line: self.progress.append((line, results.exists())),
            )
        path = self.run_dir / "results.json"
        assert path.is_file(), self.log.read_text()[-3000:]
        self.results = json.loads(path.read_text())
        self.records = read_records(self.run_dir)
        self.ws = self.run_dir.parent.parent  # <workspace>/<job name>

    def site_dir(self, site: str) -> Path:
        return self.ws / site / "simulate_job"

    def site_results(self, site: str) -> dict:
        return json.loads((self.site_dir(site) / "results.json").read_text())
