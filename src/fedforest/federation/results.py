"""A job's results: payload sizes, the readable report and the per-site table."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..privacy.policy import PrivacyPolicy
from ..vocabulary import METRICS


def payload_bytes(value) -> int:
    """Approximate size of a payload on the wire (array bytes + plain values)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, Mapping):
        return sum(len(str(k)) + payload_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(payload_bytes(v) for v in value)
    return len(str(value))


def write_results_files(run_dir, results: Mapping) -> None:
    """Write ``results.json`` and ``report.md`` (:func:`render_report`) into ``run_dir``."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (run_dir / "report.md").write_text(render_report(results))


def render_report(results: Mapping) -> str:
    """A readable report of a job's results (server or swarm mode)."""
    mode = " (swarm mode)" if results.get("mode") == "swarm" else ""
    lines = [f"# fedforest job `{results['job']}`{mode}: {results['status']}", ""]
    if results.get("error"):
        lines += [f"**Error:** {results['error']}", ""]
    if results.get("site_states"):
        lines += ["## Sites", "", "| site | state | metrics |", "|---|---|---|"]
        for site, state in results["site_states"].items():
            shown = (
                "withheld by the site"
                if site in results.get("metrics_withheld", [])
                else ("reported" if site in results.get("metrics", {}) else "–")
            )
            error = results.get("site_errors", {}).get(site)
            lines.append(f"| {site} | {state}{': ' + error if error else ''} | {shown} |")
        lines.append("")
        encrypted = results.get("peer_messages_encrypted") or {}
        if encrypted:
            said = {
                True: "encrypted end to end",
                False: "not encrypted end to end",
                None: "unknown",
            }
            lines += [
                "Messages between sites: "
                + ", ".join(f"`{s}` {said.get(v, 'unknown')}" for s, v in encrypted.items())
                + ".",
                "",
            ]
        digest = results.get("model_digest")
        if digest:
            lines += [f"Every finished site pooled the same model (SHA-256 `{digest[:16]}…`).", ""]
        elif results.get("model_digests"):
            lines += ["**The finished sites pooled different models:**", ""]
            lines += [f"- `{s}`: `{d}`" for s, d in results["model_digests"].items()]
            lines.append("")
    if results.get("classes_missing"):
        lines += ["## Classes a site has no row of", ""]
        lines += [
            f"- `{s}`: {', '.join(map(str, lacking))} (its trees never predict them; its "
            "metrics are on the classes it has)"
            for s, lacking in results["classes_missing"].items()
        ]
        lines.append("")
    if results.get("dropped_sites"):
        lines += ["## Dropped sites", ""]
        lines += [f"- `{s}`: {why}" for s, why in results["dropped_sites"].items()]
        lines.append("")
    metrics = results.get("metrics") or {}
    if metrics:
        lines += ["## Test metrics per site and strategy", ""]
        for site, per in metrics.items():
            lines += [
                f"### {site} ({results['test_rows'].get(site)} test rows)",
                "",
                "| strategy | AUPRC | AUC | MCC | accuracy | trees kept | fallback rows |",
                "|---|---|---|---|---|---|---|",
            ]
            for strategy, row in per.items():
                name = strategy + (f" → {row['chosen']}" if row.get("chosen") else "")
                if row.get("guess_weight") is not None:
                    name += f" (guess weight {row['guess_weight']:g})"
                lines.append(
                    f"| {name} | {_fmt(row.get('auprc'))} | {_fmt(row.get('auc'))} | "
                    f"{_fmt(row.get('mcc'))} | {_fmt(row.get('accuracy'))} | "
                    f"{row.get('mean_trees_kept', 0):.1f} | {row.get('fallback_rows', 0)} |"
                )
            lines.append("")
        lines += [
            "### Mean over sites",
            "",
            "| strategy | AUPRC | AUC | MCC | accuracy |",
            "|---|---|---|---|---|",
        ]
        strategies = list(next(iter(metrics.values())).keys())
        for strategy in strategies:
            vals = {
                m: [
                    per[strategy].get(m)
                    for per in metrics.values()
                    if strategy in per and per[strategy].get(m) is not None
                ]
                for m in METRICS
            }
            lines.append(
                f"| {strategy} | "
                + " | ".join(_fmt(float(np.mean(v)) if v else None) for v in vals.values())
                + " |"
            )
        lines.append("")
    election = results.get("election")
    if election:
        st = election["stats"]
        lines += [
            "## Feature election",
            "",
            f"Kept {st['kept']} features (intersection {st['intersection']}, union "
            f"{st['union']}, disputed {st['disputed']}) at freedom degree "
            f"{election['freedom_degree']:.4g}: {', '.join(election['selected'])}",
            "",
        ]
    tuning = results.get("tuning")
    if tuning:
        lines += ["| freedom degree | features kept | validation score |", "|---|---|---|"]
        lines += [
            f"| {h['freedom_degree']:.4f} | {h['kept']} | {h['score']:.4f} |"
            for h in tuning["history"]
        ]
        lines.append("")
    if results.get("privacy"):
        lines += ["## Privacy policies", ""]
        lines += [
            f"- `{site}`: {describe_policy(policy)}" for site, policy in results["privacy"].items()
        ]
        lines.append("")
    seconds = results.get("phase_seconds")
    if seconds and all(isinstance(v, Mapping) for v in seconds.values()):  # per site (swarm)
        lines += ["## Phase timings (seconds, per site)", ""]
        lines += [
            f"- `{site}`: " + ", ".join(f"{k} {v:.2f}" for k, v in per.items())
            for site, per in seconds.items()
        ]
        lines.append("")
    elif seconds:
        lines += ["## Phase timings (seconds)", "", "| phase | seconds |", "|---|---|"]
        lines += [f"| {k} | {v:.2f} |" for k, v in seconds.items()]
        lines.append("")
    if results.get("payload_bytes"):
        lines += ["## Payload sizes (bytes)", ""]
        for site, sizes in results["payload_bytes"].items():
            lines.append(f"- `{site}`: " + ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
        lines.append("")
    return "\n".join(lines)


def describe_policy(policy: Mapping | None) -> str:
    """One line for a site's privacy policy (``PrivacyPolicy.to_dict``): what differs from
    the default."""
    if policy is None:
        return "not reported (a site-metrics reply of version 1)"
    default = PrivacyPolicy().to_dict()
    parts = []
    for key, value in policy.items():
        if key == "share":
            withheld = [k for k, on in value.items() if not on]
            if withheld:
                parts.append("withholds " + ", ".join(withheld))
        elif value != default.get(key):
            parts.append(f"{key} {_compact(value)}")
    return "; ".join(parts) if parts else "default (nothing changed or withheld)"


def _compact(value) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_compact(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"
