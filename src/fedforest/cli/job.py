"""``fedforest job build | simulate | poc | prod``: the NVIDIA FLARE job."""

from __future__ import annotations

import argparse
from pathlib import Path

from .console import add_quiet
from .options import number

#: Where ``fedforest job poc`` (and ``make poc``) keeps the POC workspace by default.
POC_WORKSPACE = "workspaces/poc-env"


def _job_build(args: argparse.Namespace) -> int:
    from ..flare.job import build_job

    folder = build_job(
        args.config, args.out, ship_code=not args.no_custom, data_checks=not args.skip_data_checks
    )
    print(f"job written to {folder}")
    if args.no_custom:
        print(
            "no code in custom/: every site needs fedforest installed and its classes "
            "allow-listed (see docs/deploying.md, Without shipping code)"
        )
    return 0


def _recipe(args: argparse.Namespace):
    """The recipe of ``args.job`` (a built job folder) or else of ``args.config``."""
    from ..flare.recipe import FedForestRecipe

    if args.job:
        return FedForestRecipe.from_job_folder(args.job)
    return FedForestRecipe(args.config)


def _job_simulate(args: argparse.Namespace) -> int:
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
        f"running the job in NVIDIA FLARE's SimEnv with {len(recipe.sites)} sites "
        f"(FLARE's output: {log}) ...",
        flush=True,
    )
    run_dir = simulate(recipe, workspace, log_file=log)
    results_path = run_dir / "results.json"
    if not results_path.is_file():
        raise RuntimeError(f"the job wrote no results; see {log} and {workspace}/*/*/log.txt")
    models = sorted(run_dir.parent.parent.glob("*/simulate_job/pooled_model.npz"))
    return _show_results(results_path, log, [p for p in models if p.parent.parent.name != "server"])


def _show_results(results_path: Path, log: Path | None, models=()) -> int:
    """Print a job's tables and the paths of the files it wrote (only those that exist)."""
    import json

    results = json.loads(results_path.read_text())
    print(format_results(results))
    print()
    for name, path in (("report", results_path.parent / "report.md"), ("results", results_path)):
        if path.is_file():
            print(f"{name}: {path}")
    if models:
        print("site models:\n" + "\n".join(f"  {path}" for path in models))
    finished = results.get("status") == "finished"
    if not finished and log is not None and log.is_file():
        print(f"FLARE's output: {log}")
    return 0 if finished else 1


def _job_poc(args: argparse.Namespace) -> int:
    from ..flare.environments import run_poc

    workspace, out = Path(args.workspace), Path(args.out)
    log = out.with_suffix(".log")
    if args.job:
        for folder in (workspace, out):
            if Path(args.job).resolve().is_relative_to(folder.resolve()):
                raise ValueError(
                    f"the job {args.job} is inside {folder}, which this command clears"
                )
    recipe = _recipe(args)
    print(
        f"running the job in NVIDIA FLARE's PocEnv: {len(recipe.sites)} sites and a server as "
        f"separate processes (POC workspace {workspace}, FLARE's output: {log}) ...",
        flush=True,
    )
    run_dir = run_poc(recipe, workspace, out, timeout=args.timeout, log_file=log)
    return _show_results(run_dir / "results.json", log)


def _job_prod(args: argparse.Namespace) -> int:
    from ..flare.environments import run_prod
    from ..flare.recipe import FedForestRecipe

    out = Path(args.out)
    log = out.with_suffix(".log")
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
        f"{len(recipe.sites)} sites; FLARE's output: {log}) ...",
        flush=True,
    )
    run_dir = run_prod(recipe, args.startup_kit, out, args.username, args.timeout, log_file=log)
    code = _show_results(run_dir / "results.json", log)
    if code == 0:
        print("site models: <site kit>/<job id>/pooled_model.npz at each site")
    return code


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
    p.add_argument(
        "--workspace",
        default="workspaces/simulator",
        help="simulator workspace (FLARE's output goes to <workspace>.log)",
    )
    add_quiet(p)
    p.set_defaults(func=_job_simulate)

    p = job_sub.add_parser(
        "poc", help="run the job in NVIDIA FLARE's POC mode (PocEnv): separate processes"
    )
    p.add_argument("job", nargs="?", help="a built job folder (default: build from --config)")
    p.add_argument("--config", default="site_configs", help="folder with job.yaml and site YAMLs")
    p.add_argument(
        "--workspace",
        default=POC_WORKSPACE,
        help="POC workspace: FLARE's startup kits and the processes' logs",
    )
    p.add_argument(
        "--out",
        default="workspaces/poc",
        help="where the results are downloaded (FLARE's output goes to <out>.log)",
    )
    p.add_argument(
        "--timeout", type=number(0, low_open=True), default=900, help="seconds to wait for the job"
    )
    add_quiet(p)
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
    p.add_argument(
        "--out",
        default="workspaces/prod",
        help="where the results are downloaded (FLARE's output goes to <out>.log)",
    )
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
    add_quiet(p)
    p.set_defaults(func=_job_prod)
