"""Wall time of the demo job in the NVIDIA FLARE simulator, with its phase timings.

Three sites of 1,000 rows, 100 trees per site, election with auto-tuning over 5
rounds (``site_configs/job.yaml``), in server mode and in swarm mode
(``job.mode: swarm``, the same settings otherwise). Target: under 60 s wall on
2 cores. In swarm mode the phase timings are each site's own (every site runs
every phase); the table shows the slowest site's.

Usage::

    python benchmarks/bench_job.py [--out benchmarks/results] [--modes server,swarm]

Writes ``<out>/job.json`` and ``<out>/job.md``.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

import yaml

from benchmarks import harness
from data_prep.make_demo_data import make_demo_data
from fedforest.flare.environments import simulate
from fedforest.flare.recipe import FedForestRecipe

logger = logging.getLogger("bench_job")

ROOT = harness.ROOT
MODES = ("server", "swarm")


def swarm_configs(folder: Path) -> Path:
    """``site_configs/`` with ``job.mode: swarm`` (data paths made absolute)."""
    folder.mkdir(parents=True)
    job = yaml.safe_load((ROOT / "site_configs" / "job.yaml").read_text())
    job["job"]["mode"] = "swarm"
    (folder / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    for site in job["job"]["sites"]:
        source = ROOT / "site_configs" / f"{site}.yaml"
        cfg = yaml.safe_load(source.read_text())
        cfg["data_path"] = str((source.parent / cfg["data_path"]).resolve())
        (folder / f"{site}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return folder


def run_mode(mode: str, tmp: Path) -> dict:
    configs = ROOT / "site_configs" if mode == "server" else swarm_configs(tmp / "configs")
    with harness.timed() as build:
        recipe = FedForestRecipe(configs)
    job_cfg, sites = recipe.job_config, recipe.sites
    logger.info("%s mode: simulating %d sites", mode, len(sites))
    with harness.timed() as simulation:
        run_dir = simulate(recipe, tmp / "ws", log_file=tmp / "sim.log")
    results = json.loads((run_dir / "results.json").read_text())
    bench = {
        "mode": mode,
        "status": results["status"],
        "sites": len(sites),
        "trees_per_site": job_cfg.forest.n_estimators,
        "auto_tune": job_cfg.election.auto_tune,
        "tuning_rounds": job_cfg.election.tuning_rounds,
        "build_seconds": round(build.seconds, 2),
        "simulator_wall_seconds": round(simulation.seconds, 2),
    }
    if mode == "server":
        bench["phase_seconds"] = results["phase_seconds"]
        bench["payload_bytes"] = results["payload_bytes"]
        bench["model_bytes"] = results.get("model", {}).get("bytes")
        return bench
    per_site = results["phase_seconds"]
    phases = list(dict.fromkeys(p for times in per_site.values() for p in times))
    bench["phase_seconds"] = {p: max(t.get(p, 0.0) for t in per_site.values()) for p in phases}
    bench["phase_seconds_per_site"] = per_site
    site_runs = run_dir.parent.parent
    sizes = json.loads((site_runs / sites[0] / "simulate_job" / "results.json").read_text())
    bench["payload_bytes"] = sizes["payload_bytes"]
    bench["model_digest_agreed"] = results.get("model_digest") is not None
    return bench


def run(out: Path, modes=MODES) -> dict:
    make_demo_data(ROOT / "demo_data", rows=1000, seed=0)
    bench = {}
    progress = harness.Progress(logger, len(modes), "modes")
    for mode in modes:
        with tempfile.TemporaryDirectory() as tmp:
            bench[mode] = run_mode(mode, Path(tmp))
        progress.step(f"{mode} mode, {bench[mode]['simulator_wall_seconds']:.1f} s")
    harness.write_results(out, "job", bench, markdown(bench), logger)
    return bench


def markdown(bench: dict) -> str:
    """The table of ``job.md``; ``bench`` maps each mode run to its row (other keys ignored)."""
    bench = {mode: bench[mode] for mode in MODES if mode in bench}
    first = next(iter(bench.values()))
    lines = [
        f"Demo job, {first['sites']} sites x {first['trees_per_site']} trees, auto-tune "
        f"{first['tuning_rounds']} rounds (target: 60 s wall).",
        "",
        "| mode | simulator wall (s) | " + " | ".join(first["phase_seconds"]) + " |",
        "|---|---|" + "---|" * len(first["phase_seconds"]),
    ]
    for mode, b in bench.items():
        cells = [f"{b['phase_seconds'].get(p, 0.0):.2f}" for p in first["phase_seconds"]]
        lines.append(f"| {mode} | {b['simulator_wall_seconds']:.1f} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Swarm mode: each site's own timings, slowest site shown; `pool` runs at every site.",
        "",
        "Bytes of the training phase: each site's training payload; in server mode the server "
        "receives every site's payload and sends the pooled model to every site, in swarm mode "
        "each site sends its payload to every other site.",
        "",
        "| mode | training payload per site (MB) | pooled model (MB) | bytes moved (MB) |",
        "|---|---|---|---|",
    ]
    for mode, b in bench.items():
        train = [sizes.get("train", 0) for sizes in b["payload_bytes"].values()]
        n = len(train)
        model = b.get("model_bytes")
        moved = sum(train) + n * model if mode == "server" and model else sum(train) * (n - 1)
        per_site = f"{min(train) / 1e6:.2f} to {max(train) / 1e6:.2f}"
        shown = "–" if mode != "server" or not model else f"{model / 1e6:.2f}"
        lines.append(f"| {mode} | {per_site} | {shown} | {moved / 1e6:.2f} |")
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--modes", type=harness.name_list, default=list(MODES), help="job.mode values to run"
    )
    args = parser.parse_args(argv)
    modes = args.modes
    bad = [m for m in modes if m not in MODES]
    if not modes or bad:
        parser.error(f"--modes {','.join(modes)!r}: a comma-separated list of server, swarm")
    harness.start(logger)
    bench = run(args.out, modes)
    print(markdown(bench))


if __name__ == "__main__":
    main()
