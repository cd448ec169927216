"""Wall time of the demo job in the NVIDIA FLARE simulator, with its phase timings.

Three sites of 1,000 rows, 100 trees per site, election with auto-tuning over 5
rounds (``site_configs/job.yaml``). Target: under 60 s wall on 2 cores.

Usage::

    python benchmarks/bench_job.py [--out benchmarks/results]

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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "data_prep"))

from make_demo_data import make_demo_data  # noqa: E402

from fedforest.flare.environments import simulate  # noqa: E402
from fedforest.flare.recipe import FedForestRecipe  # noqa: E402

logger = logging.getLogger("bench_job")


def run(out: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        make_demo_data(ROOT / "demo_data", rows=1000, seed=0)
        recipe = FedForestRecipe(ROOT / "site_configs")
        job_cfg, sites = recipe.job_config, recipe.sites
        built = time.perf_counter()
        run_dir = simulate(recipe, tmp / "ws", log_file=tmp / "sim.log")
        done = time.perf_counter()
        results = json.loads((run_dir / "results.json").read_text())
    bench = {
        "status": results["status"],
        "sites": len(sites),
        "trees_per_site": job_cfg.forest["n_estimators"],
        "auto_tune": job_cfg.election["auto_tune"],
        "tuning_rounds": job_cfg.election["tuning_rounds"],
        "tuning_steps": len((results.get("tuning") or {}).get("history", [])),
        "build_seconds": round(built - start, 2),
        "simulator_wall_seconds": round(done - built, 2),
        "phase_seconds": results["phase_seconds"],
        "payload_bytes": results["payload_bytes"],
        "model_bytes": results.get("model", {}).get("bytes"),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.json").write_text(json.dumps(bench, indent=2) + "\n")
    (out / "job.md").write_text(markdown(bench))
    return bench


def markdown(b: dict) -> str:
    lines = [
        f"Demo job, {b['sites']} sites x {b['trees_per_site']} trees, auto-tune "
        f"{b['tuning_rounds']} rounds: simulator wall {b['simulator_wall_seconds']:.1f} s "
        f"(target 60 s), job built in {b['build_seconds']:.1f} s.",
        "",
        "| phase | seconds |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v:.2f} |" for k, v in b["phase_seconds"].items()]
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    bench = run(args.out)
    print(markdown(bench))


if __name__ == "__main__":
    main()
