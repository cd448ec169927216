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

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "data_prep"))

from make_demo_data import make_demo_data  # noqa: E402

from fedforest.flare.environments import simulate  # noqa: E402
from fedforest.flare.recipe import FedForestRecipe  # noqa: E402

logger = logging.getLogger("bench_job")


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
    start = time.perf_counter()
    recipe = FedForestRecipe(configs)
    job_cfg, sites = recipe.job_config, recipe.sites
    built = time.perf_counter()
    logger.info("%s mode: simulating %d sites", mode, len(sites))
    run_dir = simulate(recipe, tmp / "ws", log_file=tmp / "sim.log")
    done = time.perf_counter()
    results = json.loads((run_dir / "results.json").read_text())
    bench = {
        "mode": mode,
        "status": results["status"],
        "sites": len(sites),
        "trees_per_site": job_cfg.forest["n_estimators"],
        "auto_tune": job_cfg.election["auto_tune"],
        "tuning_rounds": job_cfg.election["tuning_rounds"],
        "build_seconds": round(built - start, 2),
        "simulator_wall_seconds": round(done - built, 2),
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


def run(out: Path, modes=("server", "swarm")) -> dict:
    make_demo_data(ROOT / "demo_data", rows=1000, seed=0)
    bench = {}
    for mode in modes:
        with tempfile.TemporaryDirectory() as tmp:
            bench[mode] = run_mode(mode, Path(tmp))
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.json").write_text(json.dumps(bench, indent=2) + "\n")
    (out / "job.md").write_text(markdown(bench))
    return bench


def markdown(bench: dict) -> str:
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--modes", default="server,swarm", help="job.mode values to run")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ("server", "swarm")]
    if not modes or bad:
        parser.error(f"--modes {args.modes!r}: a comma-separated list of server, swarm")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    bench = run(args.out, modes)
    print(markdown(bench))


if __name__ == "__main__":
    main()
