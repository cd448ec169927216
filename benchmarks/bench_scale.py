"""How the fedforest job grows with the number of sites and of rows: time, memory, bytes.

For each run a synthetic table (``fedforest.experiments.synthetic``, 30 features,
``--rows`` rows per site) is split into sites at pairwise Jaccard 0.5 with the
code of ``data_prep/jaccard_split.py`` (its site YAMLs and data files), and the
job runs with ``site_configs/job.yaml``'s evaluation, election and surrogate
settings (its strategy list, auto-tuning), ``--trees`` trees per site, and
timeouts high enough for 30 sites. Measured per run:

* the phase times (schema, vote, election, train, pool, evaluate);
* the peak memory (resident set) of each process: the server and every site
  (``VmHWM`` of each process of the simulator, read while it runs);
* the bytes sent: every site's payloads per phase (``payload_bytes`` of
  ``results.json``), the pooled model, and the model's broadcast (its bytes
  times the number of sites);
* each evaluated site's AUPRC with its own trees (``local``) and with the
  pooled forest (``auto``), and the sites where ``auto`` is below ``local``;
* beside them, the reference no federation can beat by much, *pooled data*
  (:func:`fedforest.experiments.reference.config_reference`): one
  scikit-learn random forest with the job's forest settings and seed, trained
  on every site's training and validation rows pooled (the union of the
  columns, a column a site lacks missing in its rows; categorical columns as
  their integer codes), scored on each evaluated site's test rows (the rows
  the job scores: the sites' own split, made again from the config folder in
  a child process after the run, so it adds nothing to the run's times and
  memory). Per site and as the mean ± sd over the evaluated sites: AUPRC, AUC,
  Brier score and log-loss (:data:`QUALITY_METRICS`) of ``local``, ``auto``
  and pooled data, ``auto`` minus pooled data, and the targets of
  :data:`REFERENCE_TOLERANCE` (``--no-reference`` leaves it out).

A run happens in the real NVIDIA FLARE simulator (``SimEnv``, one process per
site) when it has at most ``--max-simulator-sites`` sites, else in one process
with the job's own phase driver (:class:`~fedforest.federation.driver.JobDriver`)
calling the sites' :class:`~fedforest.federation.site.SiteRunner` objects
(:func:`run_in_process`; payloads deep-copied as they cross, as FLARE's
serialisation would). One process cannot show a site's own memory, and runs the
sites one after another: its phase times are given as CPU seconds (whatever else
the machine runs) and as an estimate for ``--cores`` cores (server time + site
time spread over the cores, at least the slowest site; no FLARE overhead). With ``--evaluate-sample K`` only the first K
sites evaluate in process (the evaluation is each site's own; the others'
metrics are left out), and the phase is estimated from their mean.

Usage::

    python benchmarks/bench_scale.py [--sites 3,10,30] [--rows 5000] [--trees 100] \\
        [--row-sweep 1000] [--row-sweep-sites 10] [--mode auto] \\
        [--max-simulator-sites 10] [--evaluate-sample 3] [--validation oob|holdout] \\
        [--out benchmarks/results]
    python benchmarks/bench_scale.py --sites "" --row-sweep 1000 --row-sweep-sites 10 \\
        --out DIR          # the row sweep alone

The default (3, 10 sites in the simulator; 30 sites in process; 10 sites at
1,000 rows) takes about 10 minutes on 2 cores. Writes ``<out>/scale.json`` and
``<out>/scale.md``.

``--validation`` is what each site fits ``auto``'s choice, the calibration and
``wmp``'s weight on: ``oob`` (the job's default; its training rows scored out
of bag, no validation rows held out) or ``holdout`` (validation rows held out
of training; results go to ``scale_holdout.json`` and ``scale_holdout.md``).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks import harness
from benchmarks.pooled_data import QUALITY_METRICS, reference_markdown, reference_quality
from data_prep.jaccard_split import write_split
from fedforest import protocol
from fedforest.experiments.reference import config_reference
from fedforest.experiments.synthetic import make_synthetic
from fedforest.federation.config import JobConfig
from fedforest.vocabulary import DEFAULT_VALIDATION

logger = logging.getLogger("bench_scale")

ROOT = harness.ROOT

TARGET = "target"
N_FEATURES = 30
JACCARD = 0.5
#: Phases in the order the job runs them (``fedforest.federation.driver``).
PHASES = ("schema", "vote", "election", "train", "pool", "evaluate")
#: Phases whose work is done by the sites (the rest is the server's).
SITE_PHASES = {"schema", "vote", "election", "train", "evaluate"}
#: Seconds per phase: enough for 30 sites of 5,000 rows on 2 cores, sites in parallel.
TIMEOUTS = {"schema": 1800, "election": 7200, "train": 7200, "evaluate": 14400}
MODES = ("auto", "simulator", "in-process")


# ------------------------------------------------------------------ the data
def make_job(
    folder: Path,
    n_sites: int,
    rows: int,
    trees: int,
    kind: str = "mix",
    seed: int = 0,
    auto_tune: bool | None = None,
    tuning_rounds: int | None = None,
    site_trees: int | None = None,
    validation: str = DEFAULT_VALIDATION,
) -> Path:
    """Write the sites' data and configs for one run into ``folder``; return the config folder.

    The table has ``rows * n_sites`` rows and :data:`N_FEATURES` features
    (``kind`` as in :func:`~fedforest.experiments.synthetic.make_synthetic`),
    split by ``data_prep/jaccard_split.py``'s :func:`write_split`. The job
    YAML takes ``evaluation``, ``election`` and ``surrogates`` from
    ``site_configs/job.yaml`` (``auto_tune`` and ``tuning_rounds`` may
    override its election; ``site_trees`` sets ``evaluation.trees_per_site``;
    ``validation`` sets ``evaluation.validation``: what the sites fit their
    choices on, ``oob`` or ``holdout``), ``forest`` with ``n_estimators=trees``,
    every site required (``min_sites``) and the :data:`TIMEOUTS`.

    Examples
    --------
    >>> import tempfile
    >>> folder = make_job(Path(tempfile.mkdtemp()), 3, 40, 5, validation="holdout")
    >>> JobConfig.load(folder / "job.yaml").validation
    'holdout'
    """
    X, y, categorical = make_synthetic(
        kind, n_rows=rows * n_sites, n_features=N_FEATURES, random_state=seed
    )
    frame = X.assign(**{TARGET: y})
    info = write_split(
        frame,
        TARGET,
        n_sites,
        JACCARD,
        folder,
        categorical=categorical,
        random_state=seed,
        name=f"scale-{n_sites}sites-{rows}rows",
    )
    job_path = info["job"]
    job = yaml.safe_load(job_path.read_text())
    job.update(harness.shipped_sections("evaluation", "election", "surrogates", "forest"))
    job["forest"]["n_estimators"] = trees
    if auto_tune is not None:
        job["election"]["auto_tune"] = auto_tune
    if tuning_rounds is not None:
        job["election"]["tuning_rounds"] = tuning_rounds
    if site_trees is not None:
        job["evaluation"]["trees_per_site"] = site_trees
    job["evaluation"]["validation"] = validation
    job["job"]["timeouts"] = dict(TIMEOUTS)
    job_path.write_text(yaml.safe_dump(job, sort_keys=False))
    JobConfig.load(job_path)  # a setting the job refuses fails here, not in the run
    return job_path.parent


# ----------------------------------------------------------- in one process
def _cpu() -> float:
    """This process's CPU seconds (every thread): a task's time, whatever else the machine runs."""
    return time.process_time()


class _Clock:
    """CPU seconds per phase, split into the server's and each site's share."""

    def __init__(self):
        self.server: dict[str, float] = {}
        self.sites: dict[str, dict[str, float]] = {}

    def add_server(self, phase: str, seconds: float) -> None:
        self.server[phase] = self.server.get(phase, 0.0) + seconds

    def add_site(self, phase: str, site: str, seconds: float) -> None:
        per = self.sites.setdefault(phase, {})
        per[site] = per.get(site, 0.0) + seconds


def run_in_process(config_dir: Path, evaluate_sample: int = 0, run_dir: Path | None = None):
    """Run the job in this process with the job's own phase driver.

    :class:`~fedforest.federation.driver.JobDriver` (the order the FLARE
    controller runs) over an :class:`~fedforest.federation.driver.InProcessExchange`:
    every task goes to every live site, one after another; task data and
    replies are deep-copied as they cross (no party shares an object with
    another, as after FLARE's serialisation). ``evaluate_sample`` > 0 lets
    only the first that many sites evaluate. Times are CPU seconds of this
    process (:func:`_cpu`), so other work on the machine does not inflate them.

    Returns
    -------
    results : dict
        ``results.json`` as the driver writes it.
    clock : _Clock
        The server's and every site's CPU seconds per phase.

    Raises
    ------
    RuntimeError
        If the job failed (the message is the job's error).
    """
    sample = {protocol.EVALUATE: evaluate_sample} if evaluate_sample else None
    with tempfile.TemporaryDirectory() as tmp:
        job = harness.run_job(
            config_dir, run_dir=Path(run_dir or tmp), clock=_cpu, ask_first=sample
        )
    results, exchange, server = job.results, job.exchange, job.server
    # results.json's phase_seconds: CPU seconds, sites one by one; the server's share is
    # the phase's time less the sites' (the election's rounds are counted once)
    clock = _Clock()
    for timing, per in exchange.seconds.items():
        for site, seconds in per.items():
            clock.add_site(timing, site, seconds)
    for timing, total in server.timings.items():
        clock.add_server(timing, max(0.0, total - sum(exchange.seconds.get(timing, {}).values())))
    return json.loads(json.dumps(results.to_dict(), default=str)), clock


def estimate_phases(clock: _Clock, n_sites: int, cores: int) -> dict[str, float]:
    """Phase times had the sites run in parallel on ``cores`` cores (server time added).

    A phase's site time is spread over the cores, but never below the
    slowest site's; for a sampled evaluation the mean site time stands for
    each of the ``n_sites`` sites.
    """
    out = {}
    for name in PHASES:
        per = clock.sites.get(name, {})
        server = clock.server.get(name, 0.0)
        if not per:
            if name in clock.server:
                out[name] = round(server, 3)
            continue
        times = list(per.values())
        if name == "evaluate" and len(times) < n_sites:
            times = [sum(times) / len(times)] * n_sites
        parallel = max(sum(times) / max(1, min(cores, len(times))), max(times))
        out[name] = round(server + parallel, 3)
    return out


# ------------------------------------------------------------- the simulator
class ProcessMemory(harness.ProcessMemory):
    """The harness's watch of every process's peak memory, told apart by simulator role."""

    def by_role(self) -> dict:
        """``{"server": bytes, "sites": {site: bytes}, "other": [bytes, ...]}``.

        A site is a ``simulator_worker`` process (``--client SITE``); the
        server is the process that started the site processes.
        """
        sites, parents = {}, set()
        for pid, cmd in self.commands.items():
            if any("simulator_worker" in a for a in cmd) and "--client" in cmd:
                site = cmd[cmd.index("--client") + 1]
                sites[site] = max(sites.get(site, 0), self.peaks[pid])
                parents.add(self.parents[pid])
        server = max((self.peaks[p] for p in parents if p in self.peaks), default=None)
        other = sorted(
            (
                self.peaks[pid]
                for pid, cmd in self.commands.items()
                if pid not in parents and not any("simulator_worker" in a for a in cmd)
            ),
            reverse=True,
        )
        return {"server": server, "sites": dict(sorted(sites.items())), "other": other}


def run_simulator(config_dir: Path, workspace: Path) -> tuple[dict, dict, float]:
    """Run the job's recipe in ``SimEnv``; its results, the processes' peaks, the wall time."""
    from fedforest.flare.environments import simulate
    from fedforest.flare.recipe import FedForestRecipe

    recipe = FedForestRecipe(config_dir)
    start = time.perf_counter()
    with ProcessMemory() as memory:
        run_dir = simulate(
            recipe,
            workspace / "ws",
            log_file=workspace / "sim.log",
            timeout=sum(TIMEOUTS.values()) + 600,
        )
    wall = time.perf_counter() - start
    path = run_dir / "results.json"
    if not path.is_file():
        tail = (workspace / "sim.log").read_text()[-3000:]
        raise RuntimeError(f"the simulator wrote no results.json; the log ends:\n{tail}")
    return json.loads(path.read_text()), memory.by_role(), wall


# ---------------------------------------------------------------- one run
_self_peak = harness.self_peak_rss


def bytes_sent(results: dict, n_sites: int) -> dict:
    """The bytes each site sent per phase, the pooled model's, its broadcast to every site."""
    per_site = results["payload_bytes"]
    phases = sorted({p for sizes in per_site.values() for p in sizes})
    totals = {site: sum(sizes.values()) for site, sizes in per_site.items()}
    model = results.get("model") or {}
    model_bytes = model.get("bytes") or 0
    nodes = model.get("nodes") or 0
    dropped = results.get("dropped_sites") or {}
    # the model goes to every site still in the job at the evaluation
    receivers = n_sites - sum(not why.startswith("evaluate") for why in dropped.values())
    up = sum(totals.values())
    site_models = model.get("site_models") or {}
    # with evaluation.trees_per_site each site was sent a model of its own
    broadcast = (
        sum(v["bytes"] for v in site_models.values()) if site_models else model_bytes * receivers
    )
    received = (
        {s: v["bytes"] for s, v in site_models.items()}
        if site_models
        else {s: model_bytes for s in per_site}
    )
    return {
        "per_site": per_site,
        "per_site_mean": {
            p: round(sum(s.get(p, 0) for s in per_site.values()) / max(1, len(per_site)))
            for p in phases
        },
        "site_upload_total": up,
        "model": model_bytes,
        "model_nodes": nodes,
        "model_bytes_per_node": round(model_bytes / nodes, 1) if nodes else None,
        "broadcast": broadcast,
        "received_per_site": received,
        "received_per_site_mean": round(sum(received.values()) / max(1, len(received))),
        "total": up + broadcast,
    }


def run_one(
    n_sites: int,
    rows: int,
    trees: int,
    mode: str,
    cores: int = 2,
    evaluate_sample: int = 0,
    kind: str = "mix",
    seed: int = 0,
    auto_tune: bool | None = None,
    tuning_rounds: int | None = None,
    isolate: bool = True,
    site_trees: int | None = None,
    reference: bool = True,
    validation: str = DEFAULT_VALIDATION,
) -> dict:
    """One job at ``n_sites`` sites of ``rows`` rows in ``mode`` (``simulator``/``in-process``).

    ``isolate``: an in-process run happens in a forked child process, so its
    peak memory is its own (not the largest of every earlier run's).
    ``reference``: pooled data beside the job's metrics (:func:`reference_quality`),
    computed in a child process after the run. ``validation``: what the
    sites fit their choices on (:func:`make_job`).
    """
    with tempfile.TemporaryDirectory(prefix="fedforest-scale-") as tmp:
        tmp = Path(tmp)
        with harness.timed() as data_time:
            configs = make_job(
                tmp / "split",
                n_sites,
                rows,
                trees,
                kind,
                seed,
                auto_tune,
                tuning_rounds,
                site_trees,
                validation,
            )
        data_seconds = data_time.seconds
        logger.info(
            "%d sites x %d rows x %d trees: data ready in %.1f s, running %s",
            n_sites,
            rows,
            trees,
            data_seconds,
            mode,
        )
        job = JobConfig.load(configs / "job.yaml")
        out = {
            "sites": n_sites,
            "rows_per_site": rows,
            "trees_per_site": trees,
            "features": N_FEATURES,
            "jaccard": JACCARD,
            "kind": kind,
            "mode": mode,
            "strategies": list(job.strategies),
            "auto_tune": job.election.auto_tune,
            "tuning_rounds": job.election.tuning_rounds,
            "site_trees": job.trees_per_site,
            "validation": job.validation,
            "data_seconds": round(data_seconds, 2),
        }
        if mode == "simulator":
            results, memory, wall = run_simulator(configs, tmp)
            out["wall_seconds"] = round(wall, 2)
            out["phase_seconds"] = {p: results["phase_seconds"].get(p) for p in PHASES}
            out["phase_seconds"] = {k: v for k, v in out["phase_seconds"].items() if v is not None}
            out["estimated"] = False
            # a site's share of the phase: the sites share the cores
            evaluate = out["phase_seconds"].get("evaluate")
            out["evaluate_per_site"] = (
                None if evaluate is None else round(evaluate * min(cores, n_sites) / n_sites, 3)
            )
            out["peak_rss"] = {
                "server": memory["server"],
                "site_max": max(memory["sites"].values(), default=None),
                "site_mean": round(sum(memory["sites"].values()) / len(memory["sites"]))
                if memory["sites"]
                else None,
                "sites": memory["sites"],
                "other_processes": memory["other"],
                "benchmark_process": _self_peak(),
            }
        else:
            start = time.perf_counter()
            if isolate:
                results, clock, peak, baseline = harness.in_child(
                    _measured_run, configs, evaluate_sample
                )
            else:
                results, clock, peak, baseline = _measured_run(configs, evaluate_sample)
            wall = time.perf_counter() - start
            out["wall_seconds"] = round(wall, 2)
            out["cpu_phase_seconds"] = {p: round(v, 3) for p, v in results["phase_seconds"].items()}
            out["phase_seconds"] = estimate_phases(clock, n_sites, cores)
            out["estimated"] = True
            out["cores"] = cores
            out["server_seconds"] = {p: round(v, 3) for p, v in clock.server.items()}
            out["site_seconds"] = {
                p: {
                    "sum": round(sum(per.values()), 3),
                    "max": round(max(per.values()), 3),
                    "sites": len(per),
                }
                for p, per in clock.sites.items()
            }
            out["evaluated_sites"] = len(clock.sites.get("evaluate", {}))
            per = clock.sites.get("evaluate", {})
            # a site's own evaluation: its CPU seconds (one site at a time in this process)
            out["evaluate_per_site"] = round(sum(per.values()) / len(per), 3) if per else None
            out["peak_rss"] = {
                "server": None,
                "site_max": None,
                "single_process": peak,
                "process_at_start": baseline,
                "isolated": isolate,
                "note": "server and every site in one process: its peak"
                + ("" if isolate else " (this process's whole life: earlier runs included)"),
            }
        out["status"] = results["status"]
        out["dropped_sites"] = results["dropped_sites"]
        out["bytes"] = bytes_sent(results, n_sites)
        out["model_trees"] = (results.get("model") or {}).get("trees")
        site_models = (results.get("model") or {}).get("site_models") or {}
        out["site_tree_counts"] = {s: v["trees"] for s, v in site_models.items()}
        out["selected_features"] = len((results.get("election") or {}).get("selected", []))
        auprc = [
            row["auprc"]
            for per in results["metrics"].values()
            for name, row in per.items()
            if name == "auto" and row.get("auprc") is not None
        ]
        out["auto_auprc_mean"] = round(sum(auprc) / len(auprc), 4) if auprc else None
        out["site_quality"] = site_quality(results["metrics"])
        if reference and results["metrics"]:
            with harness.timed() as ref_time:
                pooled = harness.in_child(
                    config_reference, configs, QUALITY_METRICS, sorted(results["metrics"])
                )
            out["reference"] = reference_quality(results["metrics"], pooled)
            out["reference"]["seconds"] = round(ref_time.seconds, 2)
        logger.info(
            "%d sites x %d rows (%s): %s, wall %.1f s, evaluate %.1f s%s, model %.1f MB",
            n_sites,
            rows,
            mode,
            out["status"],
            out["wall_seconds"],
            out["phase_seconds"].get("evaluate", 0.0),
            " (estimated)" if out["estimated"] else "",
            out["bytes"]["model"] / 1e6,
        )
        return out


def _rss() -> int:
    """This process's resident set now, in bytes."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _measured_run(configs: Path, evaluate_sample: int):
    """:func:`run_in_process` with the process's resident set before and its peak after."""
    baseline = _rss()
    results, clock = run_in_process(configs, evaluate_sample)
    return results, clock, _self_peak(), baseline


def plan(
    sites: list[int], rows: int, row_sweep: list[int], row_sweep_sites: int
) -> list[tuple[int, int]]:
    """The (sites, rows) runs: every ``sites`` at ``rows``, then the row sweep, no repeats."""
    runs = [(n, rows) for n in sites]
    runs += [(row_sweep_sites, r) for r in row_sweep]
    return list(dict.fromkeys(runs))


def choose_mode(mode: str, n_sites: int, max_simulator_sites: int) -> str:
    if mode != "auto":
        return mode
    return "simulator" if n_sites <= max_simulator_sites else "in-process"


def run(
    out: Path,
    sites=(3, 10, 30),
    rows: int = 5000,
    trees: int = 100,
    row_sweep=(1000,),
    row_sweep_sites: int = 10,
    mode: str = "auto",
    max_simulator_sites: int = 10,
    evaluate_sample: int = 3,
    cores: int = 2,
    kind: str = "mix",
    seed: int = 0,
    auto_tune: bool | None = None,
    tuning_rounds: int | None = None,
    isolate: bool = True,
    site_trees: int | None = None,
    reference: bool = True,
    validation: str = DEFAULT_VALIDATION,
) -> dict:
    """Run every planned job; write ``scale.json`` and ``scale.md`` into ``out``.

    With ``validation="holdout"`` (the sites fit their choices on held-out
    validation rows) the files are ``scale_holdout.json`` and ``scale_holdout.md``.
    """
    runs = []
    planned = plan(list(sites), rows, list(row_sweep), row_sweep_sites)
    progress = harness.Progress(logger, len(planned), "runs")
    for n_sites, n_rows in planned:
        run_mode = choose_mode(mode, n_sites, max_simulator_sites)
        runs.append(
            run_one(
                n_sites,
                n_rows,
                trees,
                run_mode,
                cores=cores,
                evaluate_sample=evaluate_sample if run_mode == "in-process" else 0,
                kind=kind,
                seed=seed,
                auto_tune=auto_tune,
                tuning_rounds=tuning_rounds,
                isolate=isolate,
                site_trees=site_trees,
                reference=reference,
                validation=validation,
            )
        )
        progress.step(f"{n_sites} sites x {n_rows} rows ({run_mode})")
    bench = {
        "settings": {
            "features": N_FEATURES,
            "jaccard": JACCARD,
            "trees_per_site": trees,
            "kind": kind,
            "seed": seed,
            "cores": cores,
            "max_simulator_sites": max_simulator_sites,
            "evaluate_sample": evaluate_sample,
            "site_trees": site_trees,
            "validation": validation,
            "cpu_count": os.cpu_count(),
        },
        "runs": runs,
        "growth": growth(runs),
    }
    name = "scale" + harness.validation_suffix(validation)
    harness.write_results(out, name, bench, markdown(bench), logger)
    return bench


def growth(runs: list[dict]) -> list[dict]:
    """Ratios between runs that differ in one of sites or rows (the other equal)."""
    out = []
    for key, other in (("sites", "rows_per_site"), ("rows_per_site", "sites")):
        groups: dict[int, list[dict]] = {}
        for r in runs:
            groups.setdefault(r[other], []).append(r)
        for fixed, group in sorted(groups.items()):
            group = sorted(group, key=lambda r: r[key])
            for a, b in zip(group, group[1:], strict=False):
                total_a = sum(a["phase_seconds"].values())
                total_b = sum(b["phase_seconds"].values())
                out.append(
                    {
                        "varies": key,
                        other: fixed,
                        "from": a[key],
                        "to": b[key],
                        "factor": round(b[key] / a[key], 3),
                        "phase_time": round(total_b / total_a, 3) if total_a else None,
                        "evaluate_time": _ratio(b, a, lambda r: r["phase_seconds"].get("evaluate")),
                        "model_bytes": _ratio(b, a, lambda r: r["bytes"]["model"]),
                        "total_bytes": _ratio(b, a, lambda r: r["bytes"]["total"]),
                        "train_payload_per_site": _ratio(
                            b, a, lambda r: r["bytes"]["per_site_mean"].get("train")
                        ),
                        "site_peak_rss": _ratio(b, a, lambda r: r["peak_rss"].get("site_max")),
                        "server_peak_rss": _ratio(b, a, lambda r: r["peak_rss"].get("server")),
                    }
                )
    return out


def site_quality(metrics: dict, metric: str = "auprc") -> dict:
    """Each evaluated site's ``local`` and ``auto`` score, and how ``auto`` compares.

    Returns ``{"sites": {site: {"local": x, "auto": y}}, "local_mean", "auto_mean",
    "auto_minus_local_min", "auto_below_local"}`` (the number of sites where ``auto``
    scored lower than ``local``); means over the sites that have both.
    """
    sites = {}
    for site, per in sorted(metrics.items()):
        local = (per.get("local") or {}).get(metric)
        auto = (per.get("auto") or {}).get(metric)
        if local is not None and auto is not None:
            sites[site] = {"local": round(local, 4), "auto": round(auto, 4)}
    if not sites:
        return {
            "sites": {},
            "local_mean": None,
            "auto_mean": None,
            "auto_minus_local_min": None,
            "auto_below_local": None,
        }
    local = [v["local"] for v in sites.values()]
    auto = [v["auto"] for v in sites.values()]
    return {
        "sites": sites,
        "local_mean": round(sum(local) / len(local), 4),
        "auto_mean": round(sum(auto) / len(auto), 4),
        "auto_minus_local_min": round(min(a - b for a, b in zip(auto, local, strict=True)), 4),
        "auto_below_local": sum(a < b for a, b in zip(auto, local, strict=True)),
    }


def _ratio(b: dict, a: dict, get) -> float | None:
    x, y = get(b), get(a)
    return round(x / y, 3) if x and y else None


def _mb(value) -> str:
    return "–" if value is None else f"{value / 1e6:.1f}"


def markdown(bench: dict) -> str:
    s = bench["settings"]
    lines = [
        f"Scale of the job: synthetic table, {s['features']} features, pairwise Jaccard "
        f"{s['jaccard']}, {s['trees_per_site']} trees per site, `site_configs/job.yaml`'s "
        f"strategies and election; {s['cpu_count']} cores. Target: 10 sites x 5,000 rows under "
        "60 s in the simulator."
        # results written before the validation modes name none
        + (f" {harness.fitted(s['validation'])}" if s.get("validation") else ""),
        "",
        "| sites | rows/site | mode | wall (s) | "
        + " | ".join(PHASES)
        + " | server peak (MB) | site peak (MB) | train payload/site (MB) | model (MB) "
        "| bytes/node | broadcast (MB) | total sent (MB) | auto AUPRC |",
        "|---|---|---|---|" + "---|" * len(PHASES) + "---|---|---|---|---|---|---|---|",
    ]
    for r in bench["runs"]:
        mark = "~" if r["estimated"] else ""
        phases = [
            f"{mark}{r['phase_seconds'][p]:.1f}" if p in r["phase_seconds"] else "–" for p in PHASES
        ]
        peak = r["peak_rss"]
        server = _mb(peak.get("server"))
        site = _mb(peak.get("site_max"))
        if r["mode"] == "in-process":
            server = site = f"{_mb(peak.get('single_process'))} (one process)"
        b = r["bytes"]
        lines.append(
            f"| {r['sites']} | {r['rows_per_site']} | {r['mode']} | {r['wall_seconds']:.1f} | "
            + " | ".join(phases)
            + f" | {server} | {site} | {_mb(b['per_site_mean'].get('train'))} | "
            f"{_mb(b['model'])} | {b['model_bytes_per_node'] or '–'} | {_mb(b['broadcast'])} | "
            f"{_mb(b['total'])} | {r['auto_auprc_mean'] if r['auto_auprc_mean'] else '–'} |"
        )
    lines += [
        "",
        "What each site was sent and how long it evaluated (in the simulator: its share of the "
        "phase, the sites sharing the cores; in process: its CPU seconds), and each evaluated "
        "site's AUPRC with its own trees (`local`) and with the pooled forest (`auto`):",
        "",
        "| sites | rows/site | trees sent per site | received per site (MB) | evaluate per "
        "site (s) | sites evaluated | local (mean) | auto (mean) | auto - local (worst site) "
        "| sites where auto < local |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in bench["runs"]:
        q = r.get("site_quality") or {}
        if not q.get("sites"):
            continue
        sent = r.get("site_tree_counts") or {}
        trees = (
            f"{min(sent.values())}-{max(sent.values())}"
            if sent and min(sent.values()) != max(sent.values())
            else str(next(iter(sent.values()), r.get("model_trees") or "–"))
        )
        each = r.get("evaluate_per_site")
        lines.append(
            f"| {r['sites']} | {r['rows_per_site']} | {trees} | "
            f"{_mb(r['bytes'].get('received_per_site_mean'))} | "
            f"{'–' if each is None else f'{each:.2f}'} | {len(q['sites'])} | "
            f"{q['local_mean']} | {q['auto_mean']} | {q['auto_minus_local_min']:+.4f} | "
            f"{q['auto_below_local']} |"
        )
    lines += reference_markdown(bench["runs"])
    lines += [
        "",
        "Simulator: `SimEnv`, one process per site; phase seconds from `results.json` (the "
        "server's clock, polling included); peaks are each process's `VmHWM`. In-process (`~`): "
        f"the sites run one after another in one process; phase seconds are estimated for "
        f"{s['cores']} cores from the CPU seconds of each task (server time + the sites' time "
        "spread over the cores, at least the slowest site's; no FLARE overhead); an evaluation of a sample of sites stands for every site "
        "(`evaluate_sample` in scale.json); the peak is the one process's. Wall is the run's own "
        "(the simulator's start-up included). Bytes: every site's payloads "
        "(`payload_bytes`) plus the pooled model sent to every site; bytes/node: the pooled "
        "model's bytes (intersection forest and imputers included) over its forest's nodes.",
        "",
    ]
    if bench["growth"]:
        lines += [
            "Growth (ratio of the larger run to the smaller):",
            "",
            "| varies | from | to | factor | phase time | evaluate | model bytes | total bytes "
            "| train payload/site | site peak | server peak |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for g in bench["growth"]:
            cells = [
                g[k]
                for k in (
                    "phase_time",
                    "evaluate_time",
                    "model_bytes",
                    "total_bytes",
                    "train_payload_per_site",
                    "site_peak_rss",
                    "server_peak_rss",
                )
            ]
            fixed = (
                f"rows {g['rows_per_site']}" if g["varies"] == "sites" else f"sites {g['sites']}"
            )
            lines.append(
                f"| {g['varies']} ({fixed}) | {g['from']} | {g['to']} | {g['factor']} | "
                + " | ".join("–" if c is None else f"{c}" for c in cells)
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--sites",
        type=harness.int_list,
        default=[3, 10, 30],
        help='sites of the runs at --rows rows, e.g. 3,10,30 ("": the row sweep alone)',
    )
    parser.add_argument("--rows", type=int, default=5000, help="rows per site")
    parser.add_argument("--trees", type=int, default=100, help="trees per site")
    parser.add_argument(
        "--site-trees",
        type=int,
        default=None,
        help="evaluation.trees_per_site: the most trees each site is sent (default: all)",
    )
    parser.add_argument(
        "--row-sweep",
        type=harness.int_list,
        default=[1000],
        help="rows per site of extra runs at --row-sweep-sites sites (empty: none)",
    )
    parser.add_argument("--row-sweep-sites", type=int, default=10)
    parser.add_argument("--mode", choices=MODES, default="auto")
    parser.add_argument(
        "--max-simulator-sites",
        type=int,
        default=10,
        help="auto mode: larger runs go in process (30 site processes do not fit 2 cores)",
    )
    parser.add_argument(
        "--evaluate-sample",
        type=int,
        default=3,
        help="in-process runs: sites that evaluate (0: all); the rest is estimated",
    )
    parser.add_argument("--cores", type=int, default=2, help="cores for in-process estimates")
    parser.add_argument("--kind", choices=("num", "cat", "mix"), default="mix")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--auto-tune",
        choices=("job", "on", "off"),
        default="job",
        help="election auto-tuning: as site_configs/job.yaml (default), on or off",
    )
    parser.add_argument("--tuning-rounds", type=int, default=None)
    harness.validation_option(parser)
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="leave out pooled data (one scikit-learn forest on every site's rows pooled)",
    )
    args = parser.parse_args(argv)
    if not args.sites and not args.row_sweep:
        parser.error("--sites and --row-sweep are both empty: no run to make")
    if args.sites and min(args.sites) < 2:
        parser.error(f"--sites {','.join(map(str, args.sites))}: each run needs 2 sites or more")
    if args.row_sweep and args.row_sweep_sites < 2:
        parser.error("--row-sweep-sites must be 2 or more")
    if args.rows < 10 or any(r < 10 for r in args.row_sweep):
        parser.error("--rows and --row-sweep: at least 10 rows per site")
    if args.site_trees is not None and args.site_trees < 1:
        parser.error("--site-trees must be >= 1")
    if args.trees < 1 or args.cores < 1 or args.evaluate_sample < 0:
        parser.error("--trees and --cores must be >= 1, --evaluate-sample >= 0")
    harness.start(logger)
    auto_tune = {"job": None, "on": True, "off": False}[args.auto_tune]
    bench = run(
        args.out,
        sites=args.sites,
        rows=args.rows,
        trees=args.trees,
        row_sweep=args.row_sweep,
        row_sweep_sites=args.row_sweep_sites,
        mode=args.mode,
        max_simulator_sites=args.max_simulator_sites,
        evaluate_sample=args.evaluate_sample,
        cores=args.cores,
        kind=args.kind,
        seed=args.seed,
        auto_tune=auto_tune,
        tuning_rounds=args.tuning_rounds,
        site_trees=args.site_trees,
        reference=not args.no_reference,
        validation=args.validation,
    )
    print(markdown(bench))


if __name__ == "__main__":
    main()
