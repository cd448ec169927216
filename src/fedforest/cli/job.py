"""``fedforest job build | simulate | poc | prod``: the NVIDIA FLARE job."""

from __future__ import annotations

import argparse

from .options import number


def _job_build(args: argparse.Namespace) -> int:
    from ..flare.job import build_job

    folder = build_job(
        args.config, args.out, ship_code=not args.no_custom, data_checks=not args.skip_data_checks
    )
    print(f"job written to {folder}")
    if args.no_custom:
        print(
            "no code in custom/: every site needs fedforest installed and its classes "
            "allow-listed (see the README, Deploying to hospitals)"
        )
    return 0


def _recipe(args: argparse.Namespace):
    """The recipe of ``args.job`` (a built job folder) or else of ``args.config``."""
    from ..flare.recipe import FedForestRecipe

    if args.job:
        return FedForestRecipe.from_job_folder(args.job)
    return FedForestRecipe(args.config)


def _job_simulate(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..flare.environments import simulate
    from ..flare.job import check_workspace

    workspace = Path(args.workspace)
    log = workspace.with_suffix(".log")
    if args.job and Path(args.job).resolve().is_relative_to(workspace.resolve()):
        raise ValueError(
            f"the job {args.job} is inside the workspace {workspace}, which the simulator clears"
        )
    # a folder that is not a previous simulator workspace is refused, never deleted
    check_workspace(workspace, log)
    recipe = _recipe(args)
    print(
        f"running the job in NVIDIA FLARE's SimEnv with {len(recipe.sites)} sites (log: {log}) ...",
        flush=True,
    )
    run_dir = simulate(recipe, workspace, log_file=log)
    results_path = run_dir / "results.json"
    if not results_path.is_file():
        raise RuntimeError(f"the job wrote no results; see {log} and {workspace}/*/*/log.txt")
    results = json.loads(results_path.read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {results_path}")
    print(f"site models: {run_dir.parent.parent}/<site>/simulate_job/pooled_model.npz")
    return 0 if results.get("status") == "finished" else 1


def _job_poc(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..flare.environments import run_poc

    workspace, out = Path(args.workspace), Path(args.out)
    if args.job:
        for folder in (workspace, out):
            if Path(args.job).resolve().is_relative_to(folder.resolve()):
                raise ValueError(
                    f"the job {args.job} is inside {folder}, which this command clears"
                )
    recipe = _recipe(args)
    print(
        f"running the job in NVIDIA FLARE's PocEnv: {len(recipe.sites)} sites and a server as "
        f"separate processes (POC workspace {workspace}) ...",
        flush=True,
    )
    run_dir = run_poc(recipe, workspace, out, timeout=args.timeout)
    results = json.loads((run_dir / "results.json").read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {run_dir / 'results.json'}")
    return 0 if results.get("status") == "finished" else 1


def _job_prod(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..flare.environments import run_prod
    from ..flare.recipe import FedForestRecipe

    out = Path(args.out)
    if args.job and Path(args.job).resolve().is_relative_to(out.resolve()):
        raise ValueError(f"the job {args.job} is inside {out}, which this command clears")
    ship_code = not args.no_custom
    if args.job:
        recipe = FedForestRecipe.from_job_folder(args.job, ship_code=ship_code)
    else:
        recipe = FedForestRecipe(
            args.config, ship_code=ship_code, data_checks=not args.skip_data_checks
        )
    print(
        f"submitting the job to the deployment of {args.startup_kit} (NVIDIA FLARE ProdEnv, "
        f"{len(recipe.sites)} sites) ...",
        flush=True,
    )
    run_dir = run_prod(recipe, args.startup_kit, out, args.username, args.timeout)
    results = json.loads((run_dir / "results.json").read_text())
    print(format_results(results))
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {run_dir / 'results.json'}")
    print("site models: <site kit>/<job id>/pooled_model.npz at each site")
    return 0 if results.get("status") == "finished" else 1


def format_results(results: dict) -> str:
    """Per-site, per-strategy table of a job's results (``results.json``)."""
    from ..federation.results import results_table

    return results_table(results)


def add_parser(sub) -> None:
    """Add ``job`` and its subcommands to the subcommands ``sub``."""
    job = sub.add_parser("job", help="build or simulate the FLARE job")
    job_sub = job.add_subparsers(dest="job_command", metavar="JOB_COMMAND")
    p = job_sub.add_parser("build", help="validate site_configs/ and write the FLARE job")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument("--out", default="jobs", help="folder to write the job into")
    p.add_argument(
        "--no-custom",
        action="store_true",
        help="ship no code in the apps' custom/ folders (every site installs fedforest)",
    )
    p.add_argument(
        "--skip-data-checks",
        action="store_true",
        help="do not read the sites' data files here (each site checks its own when it starts)",
    )
    p.set_defaults(func=_job_build)
    p = job_sub.add_parser(
        "simulate", help="run the job in NVIDIA FLARE's simulator (SimEnv), one thread per site"
    )
    p.add_argument("job", nargs="?", help="a built job folder (default: build from --config)")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument("--workspace", default="workspaces/simulator", help="simulator workspace")
    p.set_defaults(func=_job_simulate)

    p = job_sub.add_parser(
        "poc", help="run the job in NVIDIA FLARE's POC mode (PocEnv): separate processes"
    )
    p.add_argument("job", nargs="?", help="a built job folder (default: build from --config)")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument("--workspace", default="/tmp/fedforest-poc", help="POC workspace")
    p.add_argument("--out", default="workspaces/poc", help="where the results are downloaded")
    p.add_argument(
        "--timeout", type=number(0, low_open=True), default=900, help="seconds to wait for the job"
    )
    p.set_defaults(func=_job_poc)

    p = job_sub.add_parser(
        "prod",
        help="submit the job to a provisioned deployment (ProdEnv) with an admin's startup kit",
    )
    p.add_argument("job", nargs="?", help="a built job folder (default: build from --config)")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument(
        "--startup-kit", required=True, help="the admin's startup kit (made by nvflare provision)"
    )
    p.add_argument("--username", help="the admin's name (default: the kit's)")
    p.add_argument("--out", default="workspaces/prod", help="where the results are downloaded")
    p.add_argument(
        "--no-custom",
        action="store_true",
        help="ship no code in custom/ (every site installs fedforest and allow-lists its classes)",
    )
    p.add_argument(
        "--skip-data-checks",
        action="store_true",
        help="do not read the sites' data files here (each site checks its own when it starts)",
    )
    p.add_argument(
        "--timeout", type=number(0, low_open=True), default=900, help="seconds to wait for the job"
    )
    p.set_defaults(func=_job_prod)
