"""The settings ``bench_privacy.py`` measures, and the report it writes.

:data:`SETTINGS` are the privacy settings (each a ``privacy:`` block per
dataset, :func:`policy_for` reads it as a site does); :func:`summarize`,
:func:`overall` and :func:`paired_delta` turn the rows of a run into its
summaries, :func:`markdown` into ``privacy.md``, :func:`row_table` into the
``rows`` table of ``privacy.json`` and :func:`headline` into the lines printed
at the end. ``benchmarks/bench_privacy.py`` (its docstring says what is
measured and how) runs the repetitions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fedforest.privacy.policy import (
    DEFAULT_DP_MAX_DEPTH,
    DEFAULT_DP_TREES,
    JOB_MIN_LEAF_ROWS,
    JOB_TREE_SAMPLE_FRACTION,
    PrivacyPolicy,
)

#: Every strategy scored (the paper's nine methods, in the order of the tables).
STRATEGIES = ("fpv", "pr", "mi", "ipr", "mp", "ss", "park", "local", "intersection")
DATASETS = ("S-500-Num", "S-500-Cat", "S-500-Mix", "Demo")
TARGET = "__target__"
N_SITES = 3
JACCARD = 0.5
TEST_FRACTION = 0.25
#: A level with fewer rows at a site is rare (the ``min_level_rows`` setting and the measure).
RARE_ROWS = 5
#: Repetitions of a full run (seeds 0 .. REPS - 1).
REPS = 10
DP_TREES = DEFAULT_DP_TREES
DP_DEPTH = DEFAULT_DP_MAX_DEPTH

#: Public range of the N(0, 1) columns of the S-500 sets: +-4 generating standard deviations.
SYNTHETIC_RANGE = (-4.0, 4.0)
#: Public ranges of the demo hospitals' numeric columns, from make_demo_data's generating model
#: (metabolic m ~ N(0, 1)): age is clipped to [20, 90]; the others are mean +- 4 standard
#: deviations of their generating distribution, rounded outwards (insulin: of its logarithm):
#: bmi 27 + 2m + N(0, 3.5) (sd 4.03); systolic_bp 120 + 0.4 (age - 55) + 4m + N(0, 12) (sd 13.5);
#: glucose 105 + 18m + N(0, 8) (sd 19.7); hba1c 5.8 + 0.7m + N(0, 0.3) (sd 0.76);
#: insulin exp(2.5 + 0.35m + N(0, 0.2)) (log sd 0.40); ldl 120 + N(0, 10);
#: cholesterol 190 + 8m + N(0, 25) (sd 26.2).
DEMO_RANGES = {
    "age": (20.0, 90.0),
    "bmi": (10.8, 43.2),
    "systolic_bp": (65.0, 175.0),
    "glucose": (26.0, 184.0),
    "hba1c": (2.7, 8.9),
    "insulin": (2.4, 61.1),
    "ldl": (80.0, 160.0),
    "cholesterol": (85.0, 295.0),
}
#: The "step" grid of the demo hospitals: clinically round steps per column.
DEMO_STEPS = {
    "age": 5,
    "bmi": 1,
    "systolic_bp": 5,
    "glucose": 5,
    "hba1c": 0.2,
    "insulin": 1,
    "ldl": 5,
    "cholesterol": 5,
}
#: The "step" grid of the S-500 sets: a quarter of the generating standard deviation.
SYNTHETIC_STEP = 0.25
#: The policy of a job's site whose YAML has no ``privacy:`` block, and that policy's block.
JOB_DEFAULT = f"job default (k={JOB_MIN_LEAF_ROWS}, trees on {JOB_TREE_SAMPLE_FRACTION:.0%})"
JOB_DEFAULT_PRIVACY = {
    "min_leaf_rows": JOB_MIN_LEAF_ROWS,
    "tree_sample_fraction": JOB_TREE_SAMPLE_FRACTION,
}
#: Last entry of the seed of the membership-inference samples (with the repetition and site).
MIA_SEED = 20250602
#: The membership-inference attacks (``membership_inference``): true-class confidence, leaf size.
MIA_ATTACKS = ("mia_conf", "mia_leaf")


# =============================================================== settings
@dataclass(frozen=True)
class Setting:
    """One privacy setting: a name, a description, and its ``privacy:`` block per dataset."""

    name: str
    label: str

    @property
    def grows_leaves(self) -> bool:
        """Whether the site grows its forests as a job does under the setting's policy
        (``forest_params_for``: ``min_samples_leaf`` raised to ``min_leaf_rows``, trees on
        ``tree_sample_fraction`` of the rows) before ``prepare_forest``; the ``k=`` settings
        prune forests grown to single-row leaves on every row, post hoc."""
        return self.name == JOB_DEFAULT

    def block(self, dataset: str) -> dict:
        """The ``privacy:`` block (YAML shape) of this setting for ``dataset``."""
        demo = dataset == "Demo"
        kind, _, value = self.name.partition("=")
        if self.name == "baseline":
            return {}
        if self.name == JOB_DEFAULT:
            return dict(JOB_DEFAULT_PRIVACY)
        if kind == "k":
            return {"min_leaf_rows": int(value)}
        if self.name == "grid:digits2":
            return {"threshold_grid": {"significant_digits": 2}}
        if self.name == "grid:step":
            grid = {"steps": dict(DEMO_STEPS)} if demo else {"step": SYNTHETIC_STEP}
            return {"threshold_grid": grid}
        if kind == "noise":
            return {"count_noise_epsilon": float(value)}
        if kind == "dp":
            return {
                "dp_epsilon": float(value),
                "dp_trees": DP_TREES,
                "dp_max_depth": DP_DEPTH,
                # filled in by policy_for from the dataset's numeric columns
                "feature_ranges": {},
            }
        if kind == "levels":
            return {"min_level_rows": int(value)}
        raise ValueError(f"unknown setting {self.name!r}")


SETTINGS = (
    Setting("baseline", "no policy (= k=1, count_noise_epsilon inf)"),
    Setting("k=5", "min_leaf_rows: 5 (prepare_forest prunes trees grown with min_samples_leaf 1)"),
    Setting("k=20", "min_leaf_rows: 20 (likewise, post hoc)"),
    Setting("grid:digits2", "threshold_grid: {significant_digits: 2}"),
    Setting("grid:step", f"threshold_grid: step {SYNTHETIC_STEP} (S-500) / clinical steps (Demo)"),
    Setting("noise=10", "count_noise_epsilon: 10"),
    Setting("noise=1", "count_noise_epsilon: 1"),
    Setting("noise=0.1", "count_noise_epsilon: 0.1"),
    Setting("dp=10", f"dp_epsilon: 10 ({DP_TREES} trees, depth {DP_DEPTH})"),
    Setting("dp=5", f"dp_epsilon: 5 ({DP_TREES} trees, depth {DP_DEPTH})"),
    Setting("dp=1", f"dp_epsilon: 1 ({DP_TREES} trees, depth {DP_DEPTH})"),
    Setting(f"levels={RARE_ROWS}", f"min_level_rows: {RARE_ROWS}"),
    # last: the noise seeds of the other settings follow their index, unchanged by this one
    Setting(
        JOB_DEFAULT,
        f"a job's default when the site's YAML sets none (min_leaf_rows: {JOB_MIN_LEAF_ROWS}, "
        f"tree_sample_fraction: {JOB_TREE_SAMPLE_FRACTION}), as the job applies it: trees grown "
        f"with min_samples_leaf {JOB_MIN_LEAF_ROWS} on bootstrap samples of "
        f"{JOB_TREE_SAMPLE_FRACTION:.0%} of the rows, then prepare_forest",
    ),
)
SETTING_NAMES = tuple(s.name for s in SETTINGS)


def get_settings(names: Sequence[str] | None = None) -> list[Setting]:
    """The settings called ``names`` (default: all), in the order of :data:`SETTINGS`."""
    if names is None:
        return list(SETTINGS)
    unknown = sorted(set(names) - set(SETTING_NAMES))
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {list(SETTING_NAMES)}")
    return [s for s in SETTINGS if s.name in set(names)]


def feature_ranges(dataset: str, numeric: Sequence[str]) -> dict[str, list[float]]:
    """Public ranges of ``numeric`` columns (from the generating model, never from rows)."""
    if dataset == "Demo":
        return {c: list(DEMO_RANGES[c]) for c in numeric}
    return {c: list(SYNTHETIC_RANGE) for c in numeric}


def policy_for(setting: Setting, dataset: str, numeric: Sequence[str]) -> PrivacyPolicy:
    """The site's policy: the YAML block read and checked as a site reads it."""
    block = setting.block(dataset)
    if "feature_ranges" in block:
        block["feature_ranges"] = feature_ranges(dataset, numeric)
    policy = PrivacyPolicy.from_dict(block, f"bench_privacy {setting.name}")
    return policy


# =============================================================== summaries
def _mean(values) -> float | None:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.mean(values)) if values else None


def summarize(rows: Sequence[dict]) -> dict:
    """``{dataset: {setting: {auprc: {strategy: mean}, auprc_sd, leakage...}}}``.

    AUPRC: mean over sites and repetitions (``auprc_sd``: the standard
    deviation of the per-repetition means). Midpoint shares: hits over all
    thresholds sent by every site in every repetition. ``smallest_leaf``: the
    fewest rows any sent leaf describes, over every site and repetition
    (``smallest_leaf_mean``: the mean of each site's smallest). ``rare_levels``
    and ``nodes``: per repetition, summed over the sites, then averaged.
    ``mia_conf`` / ``mia_leaf``: ``[mean, standard error]`` over repetitions of
    the per-repetition mean AUC over sites (standard error ``None`` with one
    repetition).
    """
    frame = pd.DataFrame(rows)
    out: dict = {}
    for (dataset, setting), g in frame.groupby(["dataset", "setting"], sort=False):
        reps = g["rep"].nunique()
        auprc = pd.DataFrame(list(g["auprc"]), index=g.index)
        per_rep = auprc.groupby(g["rep"]).mean()
        mia = g.groupby("rep")[list(MIA_ATTACKS)].mean()
        n = int(g["thresholds"].sum())
        entry = {
            "reps": int(reps),
            "auprc": {s: _mean(auprc[s]) for s in STRATEGIES},
            "auprc_sd": {
                s: float(per_rep[s].std(ddof=1)) if reps > 1 else None for s in STRATEGIES
            },
            "thresholds_per_rep": n / reps,
            "midpoint_share_consecutive": g["mid_consecutive"].sum() / n if n else None,
            "midpoint_share_any": g["mid_any"].sum() / n if n else None,
            "smallest_leaf": int(g["smallest_leaf"].min()),
            "smallest_leaf_mean": float(g["smallest_leaf"].mean()),
            "rare_levels": float(g.groupby("rep")["rare_levels"].sum().mean()),
            "levels_hidden": float(g.groupby("rep")["levels_hidden"].first().mean()),
            "smallest_level_rows": _smallest(g["smallest_level_rows"]),
            "nodes_per_rep": float(g.groupby("rep")["nodes"].sum().mean()),
            "trees_per_rep": float(g.groupby("rep")["trees"].sum().mean()),
            "surrogates_per_rep": float(g.groupby("rep")["surrogates"].sum().mean()),
            "imputers_per_rep": float(g.groupby("rep")["imputers"].sum().mean()),
            "policy_seconds_per_site": float(g["policy_seconds"].mean()),
            "same_as_baseline": bool(g["same_as_baseline"].all()),
        }
        for attack in MIA_ATTACKS:
            se = mia[attack].std(ddof=1) / math.sqrt(reps) if reps > 1 else None
            entry[attack] = [float(mia[attack].mean()), None if se is None else float(se)]
        out.setdefault(dataset, {})[setting] = entry
    return out


def _smallest(values) -> int | None:
    values = [int(v) for v in values if v is not None and not pd.isna(v)]
    return min(values) if values else None


def paired_delta(rows: Sequence[dict], setting: str, strategy: str) -> tuple[float, float] | None:
    """Mean AUPRC of ``setting`` minus the baseline's, paired by (dataset, repetition).

    Per dataset the difference of the per-repetition means over sites, its mean
    and standard error over repetitions; then the mean over datasets and the
    standard error of that mean (datasets independent). ``None`` without a
    baseline.
    """
    frame = pd.DataFrame(
        [
            {
                "dataset": r["dataset"],
                "rep": r["rep"],
                "setting": r["setting"],
                "v": r["auprc"][strategy],
            }
            for r in rows
            if r["setting"] in (setting, "baseline")
        ]
    )
    if frame.empty or "baseline" not in set(frame["setting"]):
        return None
    means = frame.groupby(["dataset", "rep", "setting"])["v"].mean().unstack("setting")
    diff = (means[setting] - means["baseline"]).dropna()
    deltas, variances = [], []
    for _, d in diff.groupby(level="dataset"):
        deltas.append(float(d.mean()))
        variances.append(float(d.var(ddof=1)) / len(d) if len(d) > 1 else float("nan"))
    return float(np.mean(deltas)), float(math.sqrt(sum(variances)) / len(deltas))


def overall(per_dataset: Mapping[str, Mapping[str, dict]], rows: Sequence[dict] = ()) -> dict:
    """Per setting: means over the datasets of the per-dataset figures, and the paired
    difference to the baseline of mp and local (``delta``: ``[mean, standard error]``).
    The membership-inference AUCs are ``[mean, standard error]`` too: the mean over the
    datasets and the standard error of that mean (datasets independent)."""
    settings = [s for s in SETTING_NAMES if any(s in d for d in per_dataset.values())]
    out = {}
    for setting in settings:
        entries = [d[setting] for d in per_dataset.values() if setting in d]
        out[setting] = {
            "auprc": {s: _mean([e["auprc"][s] for e in entries]) for s in STRATEGIES},
            "delta": {s: paired_delta(rows, setting, s) for s in ("mp", "local")},
            "midpoint_share_consecutive": _mean([e["midpoint_share_consecutive"] for e in entries]),
            "midpoint_share_any": _mean([e["midpoint_share_any"] for e in entries]),
            "smallest_leaf": min(e["smallest_leaf"] for e in entries),
            "rare_levels": float(sum(e["rare_levels"] for e in entries)),
            "nodes_per_rep": _mean([e["nodes_per_rep"] for e in entries]),
        }
        for attack in MIA_ATTACKS:
            means, ses = zip(*(e[attack] for e in entries), strict=True)
            se = None if None in ses else math.sqrt(sum(v * v for v in ses)) / len(ses)
            out[setting][attack] = [float(np.mean(means)), se]
    return out


def _d(pair) -> str:
    """A paired difference as ``-0.049 ± 0.009`` (± one standard error)."""
    if pair is None or pair[0] is None or math.isnan(pair[0]):
        return "–"
    # an undefined standard error (one repetition) is NaN, or null once read from privacy.json
    se = "" if pair[1] is None or math.isnan(pair[1]) else f" ± {pair[1]:.3f}"
    return f"{round(pair[0], 3) + 0.0:+.3f}{se}"  # + 0.0: no "-0.000"


def _pm(pair) -> str:
    """A ``[mean, standard error]`` pair as ``0.712 ± 0.010`` (without ± when unknown)."""
    mean, se = pair
    return _f(mean) if se is None else f"{_f(mean)} ± {_f(se)}"


def _f(value, digits=3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def markdown(bench: dict) -> str:
    cfg = bench["config"]
    labels = {s.name: s.label for s in SETTINGS}
    lines = [
        "# Privacy settings: measured cost and leakage",
        "",
        f"{', '.join(cfg['datasets'])}; {cfg['n_sites']} sites (S-500: Jaccard "
        f"{cfg['jaccard']}; Demo: the three demo hospitals, {cfg['demo_rows']} rows each); "
        f"{cfg['n_trees']} trees per site forest and intersection forest; DP mode "
        f"{cfg['dp_trees']} trees of depth {cfg['dp_depth']} per forest (budget split half/half "
        f"between forest and intersection forest); {cfg['reps']} seeded repetitions; AUPRC on "
        f"each site's 25 % test rows, mean over sites and repetitions. Run time "
        f"{bench['seconds']:.0f} s with {cfg['jobs']} processes "
        f"(`{bench['command']}`).",
        "",
        "Leakage columns (what the sites send: forests and intersection forests, split and "
        "surrogate thresholds): **mid (consec.)** / **mid (any)**: share of numeric thresholds "
        "equal to the midpoint of two consecutive / any two of the site's training values "
        "(lower / upper bound); **min leaf**: fewest rows any sent leaf describes (over all "
        f"sites and repetitions; rounded noisy count under count noise); **rare lv.**: levels "
        f"with < {RARE_ROWS} rows at a site named in its schema (per repetition, all sites); "
        "**nodes**: nodes sent per repetition, all sites. On integer-valued columns (the demo's "
        "age, glucose, blood pressure, ...) a grid point such as 45 is itself the midpoint of "
        "two values (44 and 46), so **mid (any)** stays high under a grid although the "
        "threshold no longer reveals a training value: read it as an upper bound.",
        "",
        "Membership inference on each site's forest as it leaves the site (after the policy): "
        "members are the site's training rows, non-members as many of its held-out test rows "
        "(same distribution, never seen by the forest; seeded draws, the same rows for every "
        "setting), each row routed down every tree on the site's own columns. **MIA conf.**: "
        "ROC AUC of the forest's probability of the row's true class (`predict_proba` of the "
        "sent trees) as the member score; **MIA leaf**: ROC AUC of the mean over trees of "
        "1 / (rows of the leaf reached, as sent), small leaves pointing at members. 0.5: the "
        "attacker learns nothing; 1: it tells every member apart. Mean over sites and "
        "repetitions ± one standard error over repetitions. **MIA leaf** below 0.5: the "
        "members reach *larger* leaves than the non-members (a tree's leaves are size-biased "
        "towards the rows it was grown on, most visibly in fully grown trees), so the attack "
        "as stated fails; the leak is the distance from 0.5 (an attacker who learnt the "
        "direction would get 1 − AUC).",
        "",
        "## Over all datasets (mean of the per-dataset means)",
        "",
        "Δ: the paired difference to the baseline (same splits and models), ± one standard "
        "error over repetitions.",
        "",
        "| setting | mp | Δ mp | local | Δ local | fpv | ss | intersection | mid (consec.) "
        "| mid (any) | min leaf | rare lv. | nodes | MIA conf. | MIA leaf |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for setting, e in bench["overall"].items():
        a = e["auprc"]
        delta = e.get("delta") or {}
        lines.append(
            f"| {setting} | {_f(a['mp'])} | {_d(delta.get('mp'))} | {_f(a['local'])} "
            f"| {_d(delta.get('local'))} | {_f(a['fpv'])} | {_f(a['ss'])} "
            f"| {_f(a['intersection'])} | {_f(e['midpoint_share_consecutive'], 2)} "
            f"| {_f(e['midpoint_share_any'], 2)} | {e['smallest_leaf']} "
            f"| {_f(e['rare_levels'], 1)} | {_f(e['nodes_per_rep'], 0)} "
            f"| {_pm(e['mia_conf'])} | {_pm(e['mia_leaf'])} |"
        )
    lines += ["", "Settings:", ""]
    lines += [f"- `{name}`: {labels[name]}" for name in bench["overall"]]
    for dataset, per in bench["datasets"].items():
        lines += [
            "",
            f"## {dataset}",
            "",
            "| setting | " + " | ".join(STRATEGIES) + " | mid (consec.) | mid (any) | min leaf "
            "| rare lv. | nodes | MIA conf. | MIA leaf |",
            "|---|" + "---|" * (len(STRATEGIES) + 7),
        ]
        for setting, e in per.items():
            a = e["auprc"]
            cells = [_f(a[s]) for s in STRATEGIES]
            note = " (= baseline)" if e["same_as_baseline"] and setting != "baseline" else ""
            lines.append(
                f"| {setting}{note} | "
                + " | ".join(cells)
                + f" | {_f(e['midpoint_share_consecutive'], 2)} | {_f(e['midpoint_share_any'], 2)}"
                f" | {e['smallest_leaf']} | {_f(e['rare_levels'], 1)} | {_f(e['nodes_per_rep'], 0)}"
                f" | {_pm(e['mia_conf'])} | {_pm(e['mia_leaf'])} |"
            )
        notes = []
        sd = per.get("baseline", {}).get("auprc_sd", {})
        if sd.get("mp") is not None:
            notes.append(
                f"Standard deviation over repetitions of the mean AUPRC (baseline): mp "
                f"{_f(sd['mp'])}, local {_f(sd['local'])}."
            )
        smallest = _smallest(e["smallest_level_rows"] for e in per.values())
        if smallest is None:
            notes.append("No categorical column.")
        else:
            notes.append(
                f"The rarest category level at any site has {smallest} rows "
                f"(a level is rare below {RARE_ROWS})."
            )
        lines += ["", " ".join(notes)]
    lines.append("")
    return "\n".join(lines)


def row_table(rows: Sequence[dict]) -> tuple[list[str], list[list]]:
    """Rows as column names and value lists (AUPRC rounded to 5 decimals)."""
    if not rows:
        return [], []
    keys = [k for k in rows[0] if k != "auprc"]
    columns = keys + [f"auprc_{s}" for s in STRATEGIES]
    values = [
        [r[k] for k in keys]
        + [None if r["auprc"][s] is None else round(r["auprc"][s], 5) for s in STRATEGIES]
        for r in rows
    ]
    return columns, values


def headline(bench: dict) -> str:
    """The compact summary printed at the end: setting -> mean AUPRC of mp and local,
    leakage and membership-inference AUCs."""
    lines = [
        f"bench_privacy: {bench['seconds']:.0f} s, {bench['config']['reps']} repetitions, "
        f"datasets {', '.join(bench['config']['datasets'])}",
        f"{'setting':<18} {'mp':>6} {'Δ mp':>16} {'local':>6} {'Δ local':>16} {'mid-c':>6} "
        f"{'mid-a':>6} {'minleaf':>7} {'rare':>5} {'nodes':>7} {'MIA conf':>8} {'MIA leaf':>8}",
    ]
    for setting, e in bench["overall"].items():
        delta = e.get("delta") or {}
        lines.append(
            f"{setting:<18} {_f(e['auprc']['mp']):>6} {_d(delta.get('mp')):>16} "
            f"{_f(e['auprc']['local']):>6} {_d(delta.get('local')):>16} "
            f"{_f(e['midpoint_share_consecutive'], 2):>6} {_f(e['midpoint_share_any'], 2):>6} "
            f"{e['smallest_leaf']:>7} {_f(e['rare_levels'], 1):>5} "
            f"{_f(e['nodes_per_rep'], 0):>7} {_f(e['mia_conf'][0]):>8} {_f(e['mia_leaf'][0]):>8}"
        )
    return "\n".join(lines)
