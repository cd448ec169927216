"""The command line's console: the progress lines of a running job, ``-q`` to silence them.

A job's progress lines (:mod:`fedforest.federation.progress`: one per round of
a phase, e.g. ``train: 3 of 4 sites replied, 1.6 s``) reach the
``fedforest.progress`` logger: from the driver itself in an in-process run
(``fedforest elect``), or from the server's ``progress.txt`` that the FLARE
runs follow (``fedforest job simulate | poc | prod``). :func:`progress_lines`
prints them on standard output as they come, and nothing with ``quiet``.

FLARE's own output goes to a log file while a job runs (its file descriptors
are redirected there), so the console writes to a copy of the descriptor of
standard output taken before the run: the progress lines reach the terminal
while everything else goes to the log.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys

from ..federation.progress import PROGRESS_LOGGER


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """Add ``-q/--quiet`` to a subcommand (the same switch as ``fedforest -q``)."""
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print no progress line per phase (they stay in the log)",
    )


class _CurrentStdout(io.TextIOBase):
    """Writes to whatever ``sys.stdout`` is at the time (a stream without a descriptor)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def _terminal() -> tuple[io.TextIOBase, bool]:
    """A stream to standard output that outlives a redirection of descriptor 1; owned?"""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return _CurrentStdout(), False
    sys.stdout.flush()
    return open(os.dup(fd), "w", buffering=1, encoding="utf-8", errors="replace"), True


@contextlib.contextmanager
def progress_lines(quiet: bool = False):
    """Print the ``fedforest.progress`` lines on standard output inside the block (none if
    ``quiet``); the logger is left as it was found afterwards."""
    log = logging.getLogger(PROGRESS_LOGGER)
    saved = log.level, log.propagate
    log.propagate = False  # not a second time through the root logger (-v)
    if quiet:
        log.setLevel(logging.WARNING)
        try:
            yield
        finally:
            log.setLevel(saved[0])
            log.propagate = saved[1]
        return
    stream, owned = _terminal()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]
        handler.flush()
        if owned:
            stream.close()
