"""Progress lines on standard output inside the block, none with ``quiet``."""

from __future__ import annotations

import argparse
import logging

from fedforest.cli import console
from fedforest.federation.progress import PROGRESS_LOGGER


def test_progress_lines_are_printed_and_the_logger_restored(capsys):
    log = logging.getLogger(PROGRESS_LOGGER)
    before = log.level, log.propagate, list(log.handlers)
    with console.progress_lines():
        log.info("train: 3 of 4 sites replied, 1.6 s")
        log.debug("not shown")
    assert capsys.readouterr().out == "train: 3 of 4 sites replied, 1.6 s\n"
    assert (log.level, log.propagate, list(log.handlers)) == before
    log.info("after the block")
    assert "after the block" not in capsys.readouterr().out


def test_quiet_prints_nothing_but_warnings_pass(capsys, caplog):
    log = logging.getLogger(PROGRESS_LOGGER)
    before = log.level, log.propagate
    with console.progress_lines(quiet=True):
        assert not log.isEnabledFor(logging.INFO)
        assert log.isEnabledFor(logging.WARNING)
        log.info("quiet")
    assert capsys.readouterr().out == ""
    assert (log.level, log.propagate) == before


def test_quiet_is_absent_unless_given():
    parser = argparse.ArgumentParser()
    console.add_quiet(parser)
    assert not hasattr(parser.parse_args([]), "quiet")
    assert parser.parse_args(["-q"]).quiet is True
    assert parser.parse_args(["--quiet"]).quiet is True
