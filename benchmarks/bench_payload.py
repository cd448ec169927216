"""Size and speed of the pooled-forest payload: version 1 (before) against version 2 (now).

Forests measured:

* **inference**: the pooled forest of ``benchmarks/bench_inference.py`` (three
  sites, 100 fully grown trees each on 2,000 rows of a 20-feature table, with
  surrogate splits on the 10 shared features);
* **demo**: the demo job (``site_configs/``, ``demo_data/``; written by
  ``make demo-data`` when missing) run in process as the FLARE job runs it
  (``SiteRunner`` and ``JobServer``: schema, election, training): each site's
  forest and intersection forest as it sends them in its ``train`` reply, and
  the pooled forest the server broadcasts in the model.

For each forest: bytes per node on the wire (``federation.results.payload_bytes``:
array bytes plus plain values, as the job reports its traffic) and on disk (the
``.npz`` file ``model_files.save_payload`` writes, compressed in both versions);
the time to encode (version 1: its writer, ``forest_v1.write``; version 2:
``to_payload``) and to decode (version 1: its checks and the forest,
``forest_v1.read``, as version 1's ``from_payload`` did; version 2:
``from_payload``), best of ``--repeats``. Every version 2 round trip is checked
to give back every array bit for bit.

Usage::

    python benchmarks/bench_payload.py [--out benchmarks/results] [--repeats 5]

Writes ``<out>/payload.json`` and ``<out>/payload.md``.
"""

from __future__ import annotations

import copy
import logging
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import harness
from data_prep.make_demo_data import make_demo_data
from fedforest import PooledForest, protocol
from fedforest.federation.config import JobConfig, SiteConfig
from fedforest.federation.driver import InProcessExchange
from fedforest.federation.offline import in_process_job, site_runners
from fedforest.federation.results import payload_bytes
from fedforest.model import forest_v1
from fedforest.model.forest import NODE_FIELDS
from fedforest.model.model_files import save_payload

logger = logging.getLogger("bench_payload")

ROOT = harness.ROOT
#: What the payload must stay under on these forests (bytes per node, on the wire).
TARGET = 16.0
ARRAYS = ("tree_start", "tree_owner", "value", *NODE_FIELDS)


best_time = harness.best_time


def same_arrays(a: PooledForest, b: PooledForest) -> bool:
    """Every array of ``a`` and ``b`` equal bit for bit (dtype and shape too)."""
    for key in ARRAYS:
        x, y = getattr(a, key), getattr(b, key)
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if not np.array_equal(x.view(np.uint8), y.view(np.uint8)):
            return False
    return True


def measure(name: str, forest: PooledForest, repeats: int, folder: Path) -> dict:
    """Sizes and times of one forest in both versions."""
    v1 = forest_v1.write(forest)
    v2 = forest.to_payload()
    back = PooledForest.from_payload(v2, sender="bench")
    if not same_arrays(back, forest):
        raise AssertionError(f"{name}: the version 2 round trip changed an array")
    n = forest.n_nodes
    sizes = {}
    for version, payload in (("v1", v1), ("v2", v2)):
        path = save_payload(folder / f"{name}-{version}.npz", payload)
        sizes[version] = {"wire": payload_bytes(payload), "disk": path.stat().st_size}
    row = {
        "trees": forest.n_trees,
        "nodes": n,
        "features": forest.n_features,
        "classes": forest.n_classes,
        "surrogate_nodes": int((forest.surrogate_feature >= 0).sum()),
        "wire_bytes": {v: s["wire"] for v, s in sizes.items()},
        "disk_bytes": {v: s["disk"] for v, s in sizes.items()},
        "wire_per_node": {v: s["wire"] / n for v, s in sizes.items()},
        "disk_per_node": {v: s["disk"] / n for v, s in sizes.items()},
        "trees_as_float64": int(v2["value_trees"].size),
        "thresholds_in_full": int(v2["threshold_exact_at"].size),
        "encode_seconds": {
            "v1": best_time(lambda: forest_v1.write(forest), repeats),
            "v2": best_time(forest.to_payload, repeats),
        },
        "decode_seconds": {
            "v1": best_time(lambda: PooledForest(**forest_v1.read(v1)), repeats),
            "v2": best_time(lambda: PooledForest.from_payload(v2), repeats),
            "v1_via_upgrade": best_time(lambda: PooledForest.from_payload(v1), repeats),
        },
        "v2_field_bytes": {
            k: int(v.nbytes) for k, v in v2.items() if isinstance(v, np.ndarray) and v.nbytes
        },
    }
    logger.info(
        "%s: %d nodes, %.1f -> %.1f bytes/node on the wire, %.1f -> %.1f on disk",
        name,
        n,
        row["wire_per_node"]["v1"],
        row["wire_per_node"]["v2"],
        row["disk_per_node"]["v1"],
        row["disk_per_node"]["v2"],
    )
    return row


def inference_forest() -> PooledForest:
    from benchmarks.bench_inference import build

    return build(100)[1]


class TrainingReplies(InProcessExchange):
    """The demo's sites in this process, keeping the training replies as each site sends them."""

    def __init__(self, runners, **kwargs):
        super().__init__(runners, **kwargs)
        self.trained: dict = {}

    def ask(self, request):
        replies = super().ask(request)
        if request.task == protocol.TRAIN:
            self.trained = copy.deepcopy(replies.payloads)
        return replies


def demo_forests(folder: Path) -> dict[str, PooledForest]:
    """The forests of the demo job, as its sites send them and as the server pools them."""
    configs = ROOT / "site_configs"
    config = JobConfig.load(configs / "job.yaml")
    sites = {
        s: SiteConfig.load(configs / f"{s}.yaml", task=config.task, validation=config.validation)
        for s in config.sites
    }
    missing = [s for s, c in sites.items() if not Path(c.data_path).is_file()]
    if missing:
        logger.info("writing the demo data (make demo-data) for %s", missing)
        make_demo_data(ROOT / "demo_data")
    job = in_process_job(
        configs,
        runners=site_runners(configs, config, load=False, random_state=config.seed),
        exchange=TrainingReplies,
        raise_errors=True,
        strict=True,
    )
    driver, exchange = job.driver, job.exchange
    elected = driver.elect()
    logger.info("demo job: %d features elected", len(elected))
    model = driver.train(elected)
    forests = {}
    for site, reply in exchange.trained.items():
        forests[f"demo {site}"] = PooledForest.from_payload(reply["forest"], site)
        forests[f"demo {site} intersection"] = PooledForest.from_payload(
            reply["intersection"], site
        )
    forests["demo pooled"] = PooledForest.from_payload(model["forest"], "server")
    forests["demo pooled intersection"] = PooledForest.from_payload(model["intersection"], "server")
    return forests


def markdown(bench: dict) -> str:
    lines = [
        "# Pooled-forest payload: version 1 against version 2",
        "",
        f"`{bench['command']}` on {_machine(bench)}; times are the best of "
        f"{bench['repeats']}. Wire: array bytes plus plain values (`payload_bytes`, what the "
        "job reports); disk: the compressed `.npz` of `save_payload`. Every version 2 round "
        f"trip gave back every array bit for bit. Target: at most {TARGET:g} bytes per node "
        "on the wire.",
        "",
        "| forest | trees | nodes | wire v1 B/node | wire v2 B/node | disk v1 B/node | "
        "disk v2 B/node | encode v1 / v2 (ms) | decode v1 / v2 (ms) | trees as float64 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in bench["forests"].items():
        enc, dec = r["encode_seconds"], r["decode_seconds"]
        lines.append(
            f"| {name} | {r['trees']} | {r['nodes']} | {r['wire_per_node']['v1']:.1f} | "
            f"**{r['wire_per_node']['v2']:.2f}** | {r['disk_per_node']['v1']:.1f} | "
            f"{r['disk_per_node']['v2']:.2f} | {1e3 * enc['v1']:.1f} / {1e3 * enc['v2']:.1f} | "
            f"{1e3 * dec['v1']:.1f} / {1e3 * dec['v2']:.1f} | {r['trees_as_float64']} |"
        )
    inference = bench["forests"].get("inference")
    if inference:
        lines += [
            "",
            "Version 2 bytes per node by field (inference forest):",
            "",
            "| field | bytes/node |",
            "|---|---:|",
        ]
        n = inference["nodes"]
        for key, size in sorted(inference["v2_field_bytes"].items(), key=lambda kv: -kv[1]):
            lines.append(f"| `{key}` | {size / n:.3f} |")
    lines += [
        "",
        "Decoding a version 1 payload today goes through its reader and the version 2 "
        "reader (`decode_seconds.v1_via_upgrade` in payload.json).",
        "",
    ]
    return "\n".join(lines)


def _machine(bench: dict) -> str:
    """``<machine>, <n> cores (Python, numpy, scikit-learn)`` of a results file, old or new."""
    m = bench["machine"]
    if isinstance(m, str):  # payload.json before the shared harness
        return f"{m} (Python {bench['python']}, numpy {bench['numpy']}, scikit-learn {bench['sklearn']})"
    return (
        f"{m['machine']}, {m['cpu_count']} cores (Python {m['python']}, numpy {m['numpy']}, "
        f"scikit-learn {m['scikit_learn']})"
    )


def run(out: Path, repeats: int, command: str) -> dict:
    forests = {"inference": inference_forest()}
    with tempfile.TemporaryDirectory() as tmp:
        forests.update(demo_forests(Path(tmp)))
        progress = harness.Progress(logger, len(forests), "forests")
        rows = {}
        for name, forest in forests.items():
            rows[name] = measure(name, forest, repeats, Path(tmp))
            progress.step(name)
    bench = {
        "command": command,
        "machine": harness.machine(),
        "repeats": repeats,
        "target_wire_bytes_per_node": TARGET,
        "forests": rows,
        "worst_v2_wire_per_node": max(r["wire_per_node"]["v2"] for r in rows.values()),
    }
    harness.write_results(out, "payload", bench, markdown(bench), logger)
    return bench


def main(argv=None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--repeats", type=harness.at_least(1), default=5)
    args = parser.parse_args(argv)
    harness.start(logger, verbose=("bench_inference",))
    command = "python benchmarks/bench_payload.py" + (
        "" if args.repeats == 5 else f" --repeats {args.repeats}"
    )
    bench = run(args.out, args.repeats, command)
    worst = bench["worst_v2_wire_per_node"]
    logger.info("worst version 2 payload: %.2f bytes per node (target %g)", worst, TARGET)


if __name__ == "__main__":
    main()
