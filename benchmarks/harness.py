"""The benchmarks' shared harness: options, timing, machine facts, results files, progress.

Every ``benchmarks/bench_*.py`` is built the same way::

    from benchmarks import harness

    logger = logging.getLogger("bench_example")

    def main(argv=None):
        parser = harness.parser(__doc__)              # --out (benchmarks/results)
        parser.add_argument("--reps", type=harness.at_least(1), default=10)
        args = parser.parse_args(argv)
        harness.start(logger)                          # logging: the bench's progress lines
        progress = harness.Progress(logger, args.reps, "repetitions")
        for rep in range(args.reps):
            ...
            progress.step(f"repetition {rep}")         # one line per batch, time left
        harness.write_results(args.out, "example", data, markdown(data))

* :func:`parser` and the argument types (:func:`int_list`, :func:`float_list`,
  :func:`name_list`, :func:`at_least`): ``--out`` is the results folder,
  lists are comma-separated;
* :func:`start`: logging (time-stamped lines; FLARE's and fedforest's own
  loggers at warnings only, the benchmark's and those it names at info);
* :class:`Progress`: a progress line per batch of experiments, with the
  time elapsed and an estimate of the time left;
* :func:`timed` and :func:`best_time`: wall and CPU seconds;
  :func:`in_child`: a call in a forked process (its own peak memory);
  :class:`ProcessMemory` and :func:`self_peak_rss`: the peak memory of every
  process a run starts, and of this one;
* :func:`machine`: the machine's facts (cores, CPU model, Python, numpy,
  scikit-learn, NVIDIA FLARE and numba versions, the threads BLAS and numba
  may use);
* :func:`write_results`: ``<out>/<name>.json`` (the benchmark's own keys, plus
  ``machine`` when it has none, in :func:`to_json`'s format) and
  ``<out>/<name>.md`` (the benchmark's markdown as given), each written whole or
  not at all;
* :func:`grid_main`: the whole command line of a benchmark over the
  experiment runner's grid (``--reps``, ``--sites``, ``--jaccard``,
  ``--trees``, ``--n-jobs``; ``bench_regression``, ``bench_survival``);
* :func:`run_job`: the job of a config folder in this process, as the FLARE
  job runs it (:func:`fedforest.federation.offline.run_job`), a failed job an
  error.

The JSON format: indented by 2; a list of plain values (numbers, strings,
booleans, nulls) on one line; NaN and infinities as ``null`` (strict JSON);
numpy scalars and arrays, tuples and paths as their plain values. Reading a
results file back is :func:`read_results`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import logging
import math
import multiprocessing
import os
import platform
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from data_prep.arguments import integer as at_least  # noqa: F401  (an argparse type: an integer >= low)

ROOT = Path(__file__).resolve().parents[1]
#: Where the results go by default (the committed results the docs link to).
RESULTS = ROOT / "benchmarks" / "results"
#: The loggers that stay at warnings while a benchmark runs (per-site and per-phase lines).
QUIET = ("fedforest", "nvflare", "data_prep", "make_demo_data", "jaccard_split")
#: The job YAML a user starts from: the benchmarks run its settings.
SHIPPED_JOB = ROOT / "site_configs" / "job.yaml"


def shipped_sections(*names: str) -> dict[str, Any]:
    """Copies of the named sections of :data:`SHIPPED_JOB` (``election``, ``evaluation``...).

    A benchmark that writes its own job YAML takes these from the file users edit, so it
    measures the job as it ships rather than the schema's bare defaults.
    """
    shipped = yaml.safe_load(SHIPPED_JOB.read_text())
    missing = [n for n in names if n not in shipped]
    if missing:
        raise KeyError(f"{SHIPPED_JOB} has no sections {missing}")
    return {n: copy.deepcopy(shipped[n]) for n in names}


# ------------------------------------------------------------------ options
def parser(doc: str | None, out: Path | None = RESULTS) -> argparse.ArgumentParser:
    """An argument parser described by the first paragraph of ``doc``, with ``--out``.

    ``out=None`` leaves ``--out`` to the benchmark.
    """
    description = (doc or "").strip().split("\n\n")[0]
    p = argparse.ArgumentParser(description=description)
    if out is not None:
        p.add_argument(
            "--out", type=Path, default=out, help=f"the results folder (default {_shown(out)})"
        )
    return p


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _items(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def int_list(text: str) -> list[int]:
    """An argparse type: comma-separated integers >= 0 (``""``: none)."""
    try:
        values = [int(t) for t in _items(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of integers") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: integers >= 0 only")
    return values


def float_list(text: str) -> list[float]:
    """An argparse type: comma-separated numbers."""
    try:
        values = [float(t) for t in _items(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of numbers") from None
    if not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: finite numbers only")
    return values


def name_list(text: str) -> list[str]:
    """An argparse type: comma-separated names."""
    return _items(text)


def validation_option(parser: argparse.ArgumentParser, who: str = "site") -> None:
    """Add ``--validation oob|holdout``: what each ``who`` fits its choices on.

    The job's ``evaluation.validation`` (:data:`~fedforest.vocabulary.VALIDATIONS`),
    the job's default (``oob``) by default. A benchmark names its results
    files with :func:`validation_suffix` and says the mode with :func:`fitted`.

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> validation_option(p)
    >>> p.parse_args(["--validation", "holdout"]).validation
    'holdout'
    """
    from fedforest.vocabulary import DEFAULT_VALIDATION, VALIDATIONS

    parser.add_argument(
        "--validation",
        choices=VALIDATIONS,
        default=DEFAULT_VALIDATION,
        help=f"what each {who} fits auto, calibration and wmp on: every training row scored "
        f"out of bag (oob, the job's default) or held-out validation rows (holdout)",
    )


def validation_suffix(validation: str | None) -> str:
    """The results files' suffix for a validation mode: none for the job's default.

    Examples
    --------
    >>> validation_suffix("oob"), validation_suffix("holdout")
    ('', '_holdout')
    """
    from fedforest.vocabulary import DEFAULT_VALIDATION

    return "" if validation in (None, DEFAULT_VALIDATION) else f"_{validation}"


def fitted(validation: str, who: str = "site") -> str:
    """What each ``who`` fitted its choices on under ``validation``, as a report says it.

    Examples
    --------
    >>> fitted("holdout", "hospital").startswith("Each hospital chooses")
    True
    """
    if validation == "oob":
        return (
            f"Each {who} chooses `auto`'s strategy and fits its calibration on its training "
            "rows scored out of bag (`validation: oob`): no validation rows are held out."
        )
    if validation == "holdout":
        return (
            f"Each {who} chooses `auto`'s strategy and fits its calibration on validation "
            "rows held out of training (`validation: holdout`)."
        )
    raise ValueError(f"validation={validation!r}: oob or holdout")


def paired_margin(
    who: str, against: str, difference: float, se: float, n: int, unit: str, digits: int = 3
) -> str:
    """A target's paired difference and its standard error, as a report line ends.

    ``difference`` is ``who`` minus ``against``, run by run, then their mean; ``se``
    its standard error over the ``n`` runs (NaN: left out), ``unit`` what a run is.

    Examples
    --------
    >>> paired_margin("auto", "pooled data", -0.015, 0.012, 10, "seeds")
    ' (auto − pooled data -0.015, standard error 0.012 over 10 seeds)'
    >>> paired_margin("deployed", "local", 0.0007, float("nan"), 1, "repetitions", 4)
    ' (deployed − local +0.0007)'
    """
    spread = f", standard error {se:.{digits}f} over {n} {unit}" if math.isfinite(se) else ""
    return f" ({who} − {against} {difference:+.{digits}f}{spread})"


def margins_note(runs: str, unit: str) -> str:
    """What the differences of :func:`paired_margin` are and what their standard errors
    tell; ``runs`` says how they are paired (``"seed by seed"``), ``unit`` what a run is.

    Examples
    --------
    >>> margins_note("seed by seed", "seeds").endswith("could go either way on other seeds.")
    True
    """
    return (
        f"Each target's difference is the deployed model's minus the reference's, {runs}, "
        f"then their mean; its standard error says how much the {unit} can tell: a target "
        "met or missed by less than about two standard errors could go either way on other "
        f"{unit}."
    )


def command(script: str, argv) -> str:
    """The command line a run was started with (``python benchmarks/<script> ...``)."""
    return " ".join(["python", f"benchmarks/{script}", *map(str, argv)])


# ------------------------------------------------------------------ logging
def start(
    logger: logging.Logger | str,
    verbose: tuple[str, ...] = (),
    quiet: tuple[str, ...] = QUIET,
    level: int = logging.WARNING,
) -> logging.Logger:
    """Logging for a benchmark run: time-stamped lines on standard error.

    The benchmark's logger and those in ``verbose`` log at info (its progress
    lines); those in ``quiet`` at warnings only; everything else at ``level``.
    """
    logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s")
    for name in quiet:
        logging.getLogger(name).setLevel(logging.WARNING)
    bench = logger if isinstance(logger, logging.Logger) else logging.getLogger(logger)
    for name in (bench.name, *verbose):
        logging.getLogger(name).setLevel(logging.INFO)
    return bench


@dataclass
class Progress:
    """One progress line per batch of experiments: ``what k/n done, t s elapsed, ~s left``.

    ``step(label)`` counts one batch (``count`` more) and logs
    ``<label>: <k>/<total> <what> done, <t> s elapsed, ~<s> s left`` to
    ``logger`` at info; the estimate is the mean time per batch so far.
    """

    logger: logging.Logger
    total: int
    what: str = "batches"
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    def step(self, label: str = "", count: int = 1) -> str:
        self.done += count
        elapsed = time.monotonic() - self.started
        line = f"{self.done}/{self.total} {self.what} done, {elapsed:.0f} s elapsed"
        if self.done < self.total:
            line += f", ~{elapsed / self.done * (self.total - self.done):.0f} s left"
        line = f"{label}: {line}" if label else line
        self.logger.info("%s", line)
        return line

    @property
    def seconds(self) -> float:
        """Seconds since the first batch started."""
        return time.monotonic() - self.started


# ------------------------------------------------------------------ timing
@dataclass
class Timing:
    """What :func:`timed` measured: wall seconds and this process's CPU seconds."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0


@contextlib.contextmanager
def timed() -> Iterator[Timing]:
    """``with timed() as t: ...``; then ``t.seconds`` (wall) and ``t.cpu_seconds``."""
    timing = Timing()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield timing
    finally:
        timing.seconds = time.perf_counter() - wall
        timing.cpu_seconds = time.process_time() - cpu


def best_time(fn: Callable[[], Any], repeats: int) -> float:
    """The least wall seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_rss(pid: int) -> int | None:
    """A process's peak resident set (``VmHWM``) in bytes; ``None`` once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


class ProcessMemory:
    """Watch the peak resident set of every process below this one, while it runs (Linux).

    ``with ProcessMemory() as memory: ...``; then ``memory.peaks`` (bytes),
    ``memory.commands`` and ``memory.parents``, by process id. ``VmHWM`` only
    grows (until the process execs), so the last reading of a process before
    it exits is its peak unless it grew in the last ``interval`` seconds.
    """

    def __init__(self, interval: float = 0.25):
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.commands: dict[int, list[str]] = {}
        self.parents: dict[int, int | None] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> ProcessMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _descendants(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                parent = _parent(int(entry))
                if parent is not None:
                    children.setdefault(parent, []).append(int(entry))
        out, todo = [], [os.getpid()]
        while todo:
            for child in children.get(todo.pop(), []):
                out.append(child)
                todo.append(child)
        return out

    def _watch(self) -> None:
        while not self._stop.is_set():
            for pid in self._descendants():
                command = _cmdline(pid)
                peak = peak_rss(pid)
                if peak is None or not command or _cmdline(pid) != command:
                    continue  # gone, or exec'ing right now: the reading may be its parent's
                if self.commands.get(pid) != command:
                    # new, or it exec'd since: a fork seen before its exec counts its
                    # parent's pages, and the exec starts a new peak
                    self.commands[pid] = command
                    self.parents[pid] = _parent(pid)
                    self.peaks[pid] = 0
                self.peaks[pid] = max(peak, self.peaks[pid])
            self._stop.wait(self.interval)


def in_child(fn, *args):
    """``fn(*args)`` in a forked process (its own peak memory); its result, or its error."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def target():
        try:
            send.send(("ok", fn(*args)))
        except BaseException as err:  # noqa: BLE001 - handed to the parent, which raises
            send.send(("error", f"{type(err).__name__}: {err}\n{traceback.format_exc()}"))
        finally:
            send.close()

    child = context.Process(target=target)
    child.start()
    send.close()
    try:
        status, value = receive.recv()
    except EOFError:
        status, value = "error", "the child process died without a result"
    child.join()
    if status != "ok":
        raise RuntimeError(
            f"{getattr(fn, '__name__', 'the call')} failed in a child process: {value}"
        )
    return value


def self_peak_rss() -> int:
    """This process's peak resident set in bytes (Linux reports kilobytes)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ------------------------------------------------------------------ the machine
def cpu_count() -> int | None:
    """The cores this process may use (its affinity), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else ``platform.processor()``)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def threads() -> dict[str, Any]:
    """The threads the numeric libraries may use now: BLAS/OpenMP pools and numba."""
    out: dict[str, Any] = {
        k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    with contextlib.suppress(Exception):  # threadpoolctl comes with scikit-learn
        from threadpoolctl import threadpool_info

        out["pools"] = sorted(
            {f"{p.get('internal_api')}: {p.get('num_threads')}" for p in threadpool_info()}
        )
    with contextlib.suppress(Exception):
        from fedforest.prediction.engines import load_kernels

        kernels, _ = load_kernels()
        if kernels is not None:
            out["numba_max_threads"] = kernels.MAX_THREADS
    return out


def machine() -> dict[str, Any]:
    """The facts of the machine and the environment a benchmark ran in."""
    return {
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cores": cpu_count(),
        "system": platform.system(),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "scikit_learn": _version("scikit-learn"),
        "pandas": _version("pandas"),
        "nvflare": _version("nvflare"),
        "numba": _version("numba"),
        "fedforest": _version("fedforest"),
        "threads": threads(),
    }


def machine_text(facts: Mapping[str, Any] | None = None) -> str:
    """One line of :func:`machine`'s facts, for a report."""
    m = machine() if facts is None else facts
    parts = [
        f"{m.get('cpu_model') or m.get('machine')}, {m.get('cores')} cores",
        f"Python {m.get('python')}",
        f"numpy {m.get('numpy')}",
        f"scikit-learn {m.get('scikit_learn')}",
    ]
    if m.get("nvflare"):
        parts.append(f"NVIDIA FLARE {m['nvflare']}")
    return "; ".join(parts)


# ------------------------------------------------------------------ results
def plain(value: Any) -> Any:
    """``value`` as plain JSON values: numpy scalars and arrays, tuples, paths; NaN as None."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [plain(v) for v in items]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist") and type(value).__module__ == "numpy":
        return plain(value.tolist())  # numpy arrays and scalars (np.bool_ too)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"not JSON serialisable: {type(value).__name__} ({value!r})")


def to_json(data: Any) -> str:
    """``data`` in the results format (module docstring), ending with a newline."""
    return _render(plain(data), 0) + "\n"


def _render(value: Any, level: int) -> str:
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{json.dumps(k)}: {_render(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            return json.dumps(value, allow_nan=False)
        return "[\n" + ",\n".join(inner + _render(v, level + 1) for v in value) + "\n" + pad + "]"
    return json.dumps(value, allow_nan=False)


def _write(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a ``.tmp`` beside it, then renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_results(
    out, name: str, data: Mapping[str, Any], markdown: str, logger=None
) -> tuple[Path, Path]:
    """Write ``<out>/<name>.json`` and ``<out>/<name>.md``; return their paths.

    The JSON holds ``data`` and, when it has no ``machine`` key, the facts of
    :func:`machine` under that key. The markdown is written as given (with a
    final newline).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    record = dict(data)
    record.setdefault("machine", machine())
    paths = out / f"{name}.json", out / f"{name}.md"
    _write(paths[0], to_json(record))
    _write(paths[1], markdown if markdown.endswith("\n") else markdown + "\n")
    (logger or logging.getLogger("benchmarks")).info("wrote %s and %s", *paths)
    return paths


def grid_main(
    doc: str | None,
    name: str,
    run: Callable[..., Mapping[str, Any]],
    markdown: Callable[[Mapping[str, Any]], str],
    logger: logging.Logger,
    argv=None,
) -> None:
    """The command line of a benchmark that runs the experiment runner's grid.

    ``--reps``, ``--sites``, ``--jaccard``, ``--trees`` and ``--n-jobs`` go to
    ``run(reps, sites, jaccard, trees, n_jobs)``; its summary is written as
    ``<out>/<name>.json`` and ``<out>/<name>.md`` (:func:`write_results`, the
    markdown by ``markdown(summary)``), with the runner's progress line per
    finished scenario on the console.
    """
    parser_ = parser(doc)
    parser_.add_argument("--reps", type=at_least(1), default=10)
    parser_.add_argument("--sites", type=at_least(2), default=6)
    parser_.add_argument("--jaccard", type=float, default=0.5)
    parser_.add_argument("--trees", type=at_least(1), default=100)
    parser_.add_argument("--n-jobs", type=at_least(1), default=2)
    args = parser_.parse_args(argv)
    start(logger, verbose=("fedforest.experiments.runner",))
    summary = run(args.reps, args.sites, args.jaccard, args.trees, args.n_jobs)
    write_results(args.out, name, summary, markdown(summary), logger)


def read_results(path) -> dict[str, Any]:
    """A results file written by :func:`write_results` (or committed before it)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ the job
def run_job(config_dir, **options):
    """The job of ``config_dir`` run in this process, as the FLARE job runs it.

    :func:`fedforest.federation.offline.run_job` (``options``: its and
    :func:`~fedforest.federation.offline.in_process_job`'s); returns the
    :class:`~fedforest.federation.offline.InProcessJob` (``results``,
    ``server``, ``exchange``).

    Raises
    ------
    RuntimeError
        If the job failed (the message is the job's error).
    """
    from fedforest.federation.offline import run_job as run

    job = run(config_dir, **options)
    if not job.results.finished:
        raise RuntimeError(f"the job in {config_dir} failed: {job.results.error}")
    return job
