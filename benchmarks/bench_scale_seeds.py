"""The deployed model against each site's own forest, over seeds: what one seed cannot tell.

``bench_scale.py`` runs each setting once. At 10 sites of 1,000 rows each
site scores on about 250 test rows, so one seed's per-site difference
between ``auto`` (what the site deploys) and ``local`` (its own forest)
mixes what the federation does with which rows happened to be drawn. This
benchmark repeats ``bench_scale.py``'s job (:func:`bench_scale.make_job`:
the same synthetic table, split at pairwise Jaccard 0.5, ``site_configs/job.yaml``'s
evaluation, election and surrogates, ``--trees`` trees per site) for every
seed of ``--seeds`` (the seed of the table, the split and the job), in one
process with the job's own phase driver (:func:`bench_scale.run_in_process`),
and scores pooled data beside it
(:func:`fedforest.experiments.reference.config_reference`).

Reported (AUPRC and Brier score), per seed: the mean over the sites of
``local``, ``auto`` and pooled data, the sites where ``auto`` is more than
0.01 below ``local`` in AUPRC (the per-site target of ``bench_scale.py``)
and the worst of them; over the seeds: the mean of every site's ``auto`` minus
``local`` with its standard error over the seeds (each seed's mean over its
sites is one draw), the standard deviation of the per-site differences, and
the share of site-seeds that miss the per-site target. A systematic gap shows
as a mean several standard errors below zero; a target missed at some sites
of some seeds while the mean is near zero is the noise of the test rows.

Usage::

    python benchmarks/bench_scale_seeds.py [--sites 10] [--rows 1000] [--trees 100] \\
        [--seeds 0,1,2,3,4] [--validation oob|holdout] [--out benchmarks/results]

The default takes about 6 minutes on 2 cores. Writes ``<out>/scale_seeds.json`` and
``<out>/scale_seeds.md`` (``--validation holdout``: ``scale_seeds_holdout.*``).
"""

from __future__ import annotations

import logging
import math
import statistics
import tempfile
from pathlib import Path

from benchmarks import harness
from benchmarks.bench_scale import make_job, run_in_process
from benchmarks.pooled_data import LOCAL_TOLERANCE, QUALITY_METRICS
from fedforest.experiments.reference import config_reference
from fedforest.vocabulary import DEFAULT_VALIDATION

logger = logging.getLogger("bench_scale_seeds")

#: The metrics of the report (AUPRC is the target's; Brier score the proper scoring rule).
METRICS = ("auprc", "brier")
#: How far below ``local`` a site's ``auto`` AUPRC may be (``bench_scale.py``'s target).
TOLERANCE = LOCAL_TOLERANCE["auprc"]


def run_seed(n_sites: int, rows: int, trees: int, seed: int, validation: str) -> dict:
    """One job and its pooled-data reference: ``{site: {metric: {local, auto, pooled_data}}}``
    over the sites that evaluated, and the number of features the election kept."""
    with tempfile.TemporaryDirectory(prefix="fedforest-seeds-") as tmp:
        configs = make_job(Path(tmp) / "split", n_sites, rows, trees, seed=seed,
                           validation=validation)  # fmt: skip
        results, _ = run_in_process(configs)
        if results["status"] != "finished":
            raise RuntimeError(f"seed {seed}: the job failed: {results['error']}")
        pooled = harness.in_child(
            config_reference, configs, QUALITY_METRICS, sorted(results["metrics"])
        )
    sites = {
        site: {
            m: {
                "local": per["local"][m],
                "auto": per["auto"][m],
                "pooled_data": pooled[site][m],
            }
            for m in METRICS
        }
        for site, per in sorted(results["metrics"].items())
        if site in pooled
    }
    kept = len((results.get("election") or {}).get("selected", []))
    return {"seed": seed, "features_kept": kept, "sites": sites}


def summarise(runs: list[dict]) -> dict:
    """Per seed and over the seeds (module docstring).

    Examples
    --------
    >>> site = lambda lo, au: {"auprc": {"local": lo, "auto": au, "pooled_data": 0.6},
    ...                        "brier": {"local": 0.2, "auto": 0.2, "pooled_data": 0.2}}
    >>> runs = [{"seed": 0, "features_kept": 3, "sites": {"a": site(0.70, 0.68)}},
    ...         {"seed": 1, "features_kept": 3, "sites": {"a": site(0.60, 0.62)}}]
    >>> s = summarise(runs)
    >>> s["auto_minus_local"]["mean"], s["below_local"]
    (0.0, {'site_seeds': 1, 'of': 2, 'seeds_with_a_miss': 1})
    """
    per_seed = []
    diffs: list[float] = []
    seed_means: list[float] = []
    for run in runs:
        sites = run["sites"]
        row = {"seed": run["seed"], "features_kept": run["features_kept"], "sites": len(sites)}
        for m in METRICS:
            for who in ("local", "auto", "pooled_data"):
                row[f"{m}_{who}"] = statistics.fmean(s[m][who] for s in sites.values())
        d = {site: s["auprc"]["auto"] - s["auprc"]["local"] for site, s in sites.items()}
        below = sorted(site for site, v in d.items() if v < -TOLERANCE)
        worst = min(d, key=d.get)
        row.update(below_local=below, worst_site=worst, worst=d[worst])
        per_seed.append(row)
        diffs += list(d.values())
        seed_means.append(statistics.fmean(d.values()))
    n = len(seed_means)
    se = statistics.stdev(seed_means) / math.sqrt(n) if n > 1 else None
    return {
        "per_seed": per_seed,
        "auto_minus_local": {
            "mean": round(statistics.fmean(diffs), 4),
            "se_over_seeds": None if se is None else round(se, 4),
            "sd_per_site": round(statistics.stdev(diffs), 4) if len(diffs) > 1 else None,
        },
        "below_local": {
            "site_seeds": sum(len(r["below_local"]) for r in per_seed),
            "of": len(diffs),
            "seeds_with_a_miss": sum(bool(r["below_local"]) for r in per_seed),
        },
    }


def markdown(bench: dict) -> str:
    """The report of :func:`summarise`'s numbers and the run's settings."""
    s = bench["settings"]
    lines = [
        f"# {s['sites']} sites x {s['rows']} rows over {len(s['seeds'])} seeds",
        "",
        f"`python benchmarks/bench_scale_seeds.py --sites {s['sites']} --rows {s['rows']} "
        f"--trees {s['trees']} --seeds {','.join(map(str, s['seeds']))} --validation "
        f"{s['validation']}`: `bench_scale.py`'s job (synthetic table, 30 features, pairwise "
        "Jaccard 0.5, `site_configs/job.yaml`'s evaluation and election) in one process, once "
        "per seed (the table, the split and the job), with pooled data beside it. `local`: "
        "the site's own forest; `auto`: what the site deploys.",
        "",
        "## Per seed",
        "",
        "Means over the sites; the sites where `auto`'s AUPRC is more than "
        f"{TOLERANCE} below `local`'s (`bench_scale.py`'s per-site target) and the worst "
        "site's difference:",
        "",
        "| seed | features kept | AUPRC: local | auto | pooled data | Brier: local | auto | "
        f"pooled data | sites more than {TOLERANCE} below local | worst auto − local |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in bench["per_seed"]:
        below = ", ".join(r["below_local"]) or "none"
        lines.append(
            f"| {r['seed']} | {r['features_kept']} | {r['auprc_local']:.4f} | "
            f"{r['auprc_auto']:.4f} | {r['auprc_pooled_data']:.4f} | {r['brier_local']:.4f} | "
            f"{r['brier_auto']:.4f} | {r['brier_pooled_data']:.4f} | {below} | "
            f"{r['worst']:+.4f} ({r['worst_site']}) |"
        )
    d, b = bench["auto_minus_local"], bench["below_local"]
    se = "–" if d["se_over_seeds"] is None else f"{d['se_over_seeds']:.4f}"
    sd = "–" if d["sd_per_site"] is None else f"{d['sd_per_site']:.4f}"
    lines += [
        "",
        "## Over the seeds",
        "",
        "| auto − local AUPRC: mean over site-seeds | standard error over seeds | sd per site "
        f"| site-seeds more than {TOLERANCE} below local | seeds with such a site |",
        "|---|---|---|---|---|",
        f"| {d['mean']:+.4f} | {se} | {sd} | {b['site_seeds']} of {b['of']} | "
        f"{b['seeds_with_a_miss']} of {len(bench['per_seed'])} |",
        "",
        "A mean several standard errors below zero would be a systematic gap; a per-site "
        "target missed at some sites of some seeds around a mean near zero is the noise of "
        "each site's test rows.",
    ]
    return "\n".join(lines) + "\n"


def run(
    out: Path,
    sites: int = 10,
    rows: int = 1000,
    trees: int = 100,
    seeds=(0, 1, 2, 3, 4),
    validation: str = DEFAULT_VALIDATION,
) -> dict:
    """Every seed's job, the summary, and the files ``scale_seeds[_holdout].{json,md}``."""
    progress = harness.Progress(logger, len(seeds), "seeds")
    runs = []
    for seed in seeds:
        runs.append(run_seed(sites, rows, trees, seed, validation))
        progress.step(f"seed {seed}")
    settings = {
        "sites": sites,
        "rows": rows,
        "trees": trees,
        "seeds": list(seeds),
        "validation": validation,
    }
    bench = {"settings": settings, "runs": runs, **summarise(runs)}
    name = "scale_seeds" + harness.validation_suffix(validation)
    harness.write_results(out, name, bench, markdown(bench), logger)
    return bench


def main(argv=None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--sites", type=harness.at_least(2), default=10)
    parser.add_argument("--rows", type=harness.at_least(40), default=1000, help="rows per site")
    parser.add_argument("--trees", type=harness.at_least(1), default=100, help="trees per site")
    parser.add_argument(
        "--seeds", type=harness.int_list, default=[0, 1, 2, 3, 4], help="comma-separated"
    )
    harness.validation_option(parser)
    args = parser.parse_args(argv)
    if not args.seeds:
        parser.error("--seeds is empty: give at least one seed")
    harness.start(logger)
    bench = run(args.out, args.sites, args.rows, args.trees, args.seeds, args.validation)
    print(markdown(bench))


if __name__ == "__main__":
    main()
