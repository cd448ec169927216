"""The fedforest job, NVIDIA FLARE 2.9 style: one recipe, three execution environments.

Usage (from the project folder, inside its environment)::

    python jobs/fedforest_job.py --env sim                      # the simulator (SimEnv)
    python jobs/fedforest_job.py --env poc                      # POC processes (PocEnv)
    python jobs/fedforest_job.py --env prod --startup-kit DIR   # a provisioned deployment
    python jobs/fedforest_job.py --export --export-dir jobs     # write the job folder only

``--export`` and ``--export-dir`` are NVIDIA FLARE's own recipe flags (FLARE
reserves them and reads them when its recipe module is imported).

The recipe is built from ``site_configs/`` (``--config``); every file is
validated first. Results land in ``--workspace`` (sim) or ``--out`` (poc, prod).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from fedforest.cli.job import format_results
from fedforest.flare._compat import recipe_export_args
from fedforest.flare.environments import run_poc, run_prod, simulate
from fedforest.flare.job import build_job
from fedforest.flare.recipe import FedForestRecipe

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description="Run the fedforest job with NVIDIA FLARE.")
    parser.add_argument("--env", choices=("sim", "poc", "prod"), default="sim")
    parser.add_argument("--config", type=Path, default=HERE.parent / "site_configs")
    parser.add_argument("--no-custom", action="store_true", help="ship no code in custom/")
    parser.add_argument("--workspace", type=Path, default=HERE.parent / "workspaces" / "sim")
    parser.add_argument("--poc-workspace", type=Path, default=Path("/tmp/fedforest-poc"))
    parser.add_argument("--startup-kit", type=Path, help="the admin's startup kit (prod)")
    parser.add_argument("--username", default="admin@nvidia.com", help="the admin (prod)")
    parser.add_argument("--out", type=Path, default=HERE.parent / "workspaces" / "results")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    export, export_dir = recipe_export_args()  # FLARE's --export [--export-dir DIR]
    if export:
        folder = build_job(args.config, export_dir, ship_code=not args.no_custom)
        print(f"job written to {folder}")
        return 0
    recipe = FedForestRecipe(args.config, ship_code=not args.no_custom)
    if args.env == "sim":
        run_dir = simulate(recipe, args.workspace, log_file=args.workspace.with_suffix(".log"))
    elif args.env == "poc":
        run_dir = run_poc(recipe, args.poc_workspace, args.out, timeout=args.timeout)
    else:
        if args.startup_kit is None:
            parser.error("--env prod needs --startup-kit (the admin's startup kit folder)")
        run_dir = run_prod(recipe, args.startup_kit, args.out, args.username, args.timeout)
    results = json.loads((run_dir / "results.json").read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {run_dir / 'results.json'}")
    return 0 if results.get("status") == "finished" else 1


if __name__ == "__main__":
    raise SystemExit(main())
