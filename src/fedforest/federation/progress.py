"""A job's progress lines: one per round of a phase, as the job runs.

The driver (:class:`~fedforest.federation.driver.JobDriver`) makes a line
after every round (:func:`round_line`), e.g. ``train: 3 of 4 sites replied,
1.6 s``, and one when the job ends (:func:`end_line`). Where the lines go:

* in this process (``fedforest elect``, tests, benchmarks): the
  :data:`PROGRESS_LOGGER` logger at INFO, which the command line prints on
  the console;
* in a FLARE job: the server writes them (in swarm mode, where the sites run
  the phases, a line each time a site's state or phase changes:
  :func:`swarm_status_line`) to :data:`PROGRESS_FILE` in its run
  folder (:class:`ProgressFile`), and the command that started the job
  follows that file (:class:`ProgressFollower`) and prints each new line, so
  the console shows the job's phases while FLARE's own output goes to the log
  file.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

#: The logger of the progress lines (``fedforest -q`` silences it on the console).
PROGRESS_LOGGER = "fedforest.progress"
#: The file of the progress lines in the server's run folder.
PROGRESS_FILE = "progress.txt"

logger = logging.getLogger(PROGRESS_LOGGER)


def round_line(
    phase: str, replied: int, asked: int, seconds: float, dropped: Iterable[str] = ()
) -> str:
    """The progress line of one round.

    Examples
    --------
    >>> round_line("train", 3, 4, 1.62)
    'train: 3 of 4 sites replied, 1.6 s'
    >>> round_line("election tuning round 2", 2, 3, 0.41, dropped=["site-3"])
    'election tuning round 2: 2 of 3 sites replied, 0.4 s (dropped: site-3)'
    """
    noun = "site" if asked == 1 else "sites"
    line = f"{phase}: {replied} of {asked} {noun} replied, {seconds:.1f} s"
    dropped = sorted(dropped)
    return f"{line} (dropped: {', '.join(dropped)})" if dropped else line


def end_line(status: str, error: str | None = None) -> str:
    """The last progress line of a job.

    Examples
    --------
    >>> end_line("finished")
    'job finished'
    >>> end_line("failed", "fewer than min_sites=2 sites")
    'job failed: fewer than min_sites=2 sites'
    """
    return f"job {status}: {error}" if error else f"job {status}"


def swarm_status_line(site: str, status: dict) -> str:
    """The progress line of a swarm site whose state or phase changed (the server's view).

    Examples
    --------
    >>> swarm_status_line("site-2", {"state": "running", "phase": "train"})
    'site-2: running (train)'
    >>> swarm_status_line("site-3", {"state": "failed", "phase": "vote", "error": "no data"})
    'site-3: failed (vote): no data'
    >>> swarm_status_line("site-1", {"state": "finished", "phase": "evaluate"})
    'site-1: finished'
    """
    state, phase = status.get("state"), status.get("phase")
    shown = phase and phase != "start" and state in ("running", "failed")
    line = f"{site}: {state}" + (f" ({phase})" if shown else "")
    error = status.get("error")
    return f"{line}: {error}" if error and status.get("state") == "failed" else line


def log_line(line: str) -> None:
    """Send a progress line to :data:`PROGRESS_LOGGER` (the console of the command line)."""
    logger.info("%s", line)


class ProgressFile:
    """Appends progress lines to a file (the server's :data:`PROGRESS_FILE`), and logs them.

    Writing never fails the job: a file that cannot be written is logged once
    and the lines go on to the log only.
    """

    def __init__(self, path):
        self.path = Path(path)
        self._broken = False

    def __call__(self, line: str) -> None:
        logging.getLogger(__name__).info("progress: %s", line)
        if self._broken:
            return
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line.replace("\n", " ") + "\n")
        except OSError as err:
            self._broken = True
            logging.getLogger(__name__).warning(
                "progress lines not written to %s: %s", self.path, err
            )


class ProgressFollower:
    """Follows a progress file while a job runs and hands on each new line.

    ``find`` gives the file's possible places, first the one the job writes
    while it runs; the follower reads the first that exists every
    ``interval`` seconds in a thread of its own and calls ``emit`` once for
    each complete new line. :meth:`stop` reads what is left, from any of the
    places (a run folder that FLARE moved after the job is read from its
    copy), so every line is handed on once. Use it as a context manager.

    Parameters
    ----------
    find : callable
        Returns the candidate paths (it may change as the job starts: a job id
        becomes known).
    emit : callable
        Called with each line, without its line break.
    interval : float
        Seconds between reads.
    """

    def __init__(
        self,
        find: Callable[[], Iterable[Path]],
        emit: Callable[[str], None],
        interval: float = 0.25,
    ):
        self.find = find
        self.emit = emit
        self.interval = interval
        self.emitted = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ProgressFollower:
        self._thread = threading.Thread(target=self._loop, name="fedforest progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Hand on the complete lines not handed on yet (a partly written last line waits)."""
        with self._lock:
            try:
                paths = [Path(p) for p in self.find()]
            except Exception:  # noqa: BLE001 - the console follows the job; never fails it
                return
            for path in paths:
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                lines = text.split("\n")[:-1]  # complete lines only
                for line in lines[self.emitted :]:
                    try:
                        self.emit(line)
                    except Exception:  # noqa: BLE001 - a broken console never stops the job
                        logging.getLogger(__name__).exception("a progress line was not shown")
                self.emitted = max(self.emitted, len(lines))
                return

    def stop(self) -> None:
        """Stop following; hand on the lines left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self.poll()
