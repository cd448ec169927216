"""The progress lines of a job, the server's progress file, and following it."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from fedforest.federation.progress import (
    PROGRESS_LOGGER,
    ProgressFile,
    ProgressFollower,
    end_line,
    log_line,
    round_line,
    swarm_status_line,
)


def test_round_and_end_lines_name_the_phase_the_replies_and_the_time():
    assert round_line("train", 3, 4, 1.64) == "train: 3 of 4 sites replied, 1.6 s"
    assert round_line("schema", 1, 1, 0.04) == "schema: 1 of 1 site replied, 0.0 s"
    line = round_line("evaluate", 1, 3, 2.0, dropped={"site-3", "site-2"})
    assert line == "evaluate: 1 of 3 sites replied, 2.0 s (dropped: site-2, site-3)"
    assert end_line("finished") == "job finished"
    assert end_line("failed", "fewer than min_sites=3") == "job failed: fewer than min_sites=3"


def test_swarm_status_lines():
    assert swarm_status_line("s1", {"state": "waiting", "phase": None}) == "s1: waiting"
    assert swarm_status_line("s1", {"state": "waiting", "phase": "start"}) == "s1: waiting"
    assert swarm_status_line("s1", {"state": "finished", "phase": "evaluate"}) == "s1: finished"
    assert swarm_status_line("s1", {"state": "running", "phase": "train"}) == "s1: running (train)"
    failed = {"state": "failed", "phase": "vote", "error": "refused"}
    assert swarm_status_line("s1", failed) == "s1: failed (vote): refused"
    # an error field of a site still running is not shown as a failure
    assert swarm_status_line("s1", {"state": "running", "phase": "x", "error": "e"}) == (
        "s1: running (x)"
    )


def test_log_line_goes_to_the_progress_logger(caplog):
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        log_line("vote: 2 of 2 sites replied, 0.1 s")
    assert [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER] == [
        "vote: 2 of 2 sites replied, 0.1 s"
    ]


def test_the_progress_file_appends_one_line_each_and_never_fails(tmp_path, caplog):
    path = tmp_path / "progress.txt"
    write = ProgressFile(path)
    write("schema: 3 of 3 sites replied, 1.0 s")
    write("job failed: two\nlines")
    assert path.read_text().splitlines() == [
        "schema: 3 of 3 sites replied, 1.0 s",
        "job failed: two lines",
    ]
    broken = ProgressFile(tmp_path / "no such folder" / "progress.txt")
    with caplog.at_level(logging.WARNING):
        broken("train: 1 of 1 site replied, 0.1 s")
        broken("evaluate: 1 of 1 site replied, 0.1 s")  # warned once
    assert sum("progress lines not written" in r.getMessage() for r in caplog.records) == 1


def test_the_follower_hands_on_each_complete_line_once_while_the_file_grows(tmp_path):
    path = tmp_path / "progress.txt"
    seen: list[tuple[str, float]] = []
    started = time.monotonic()
    with ProgressFollower(lambda: [path], lambda s: seen.append((s, time.monotonic())), 0.02):
        time.sleep(0.1)  # no file yet
        with open(path, "a") as handle:
            handle.write("schema: 2 of 2 sites replied, 0.5 s\nvote: 2 of 2")  # a partial line
            handle.flush()
            time.sleep(0.2)
            assert [s for s, _ in seen] == ["schema: 2 of 2 sites replied, 0.5 s"]
            handle.write(" sites replied, 0.1 s\n")
        time.sleep(0.2)
        assert len(seen) == 2 and seen[1][0] == "vote: 2 of 2 sites replied, 0.1 s"
        written = time.monotonic()
    # the lines came while the file grew, not when the follower stopped
    assert started < seen[0][1] < written
    assert [s for s, _ in seen] == [
        "schema: 2 of 2 sites replied, 0.5 s",
        "vote: 2 of 2 sites replied, 0.1 s",
    ]


def test_the_follower_reads_the_copy_once_the_live_file_is_gone(tmp_path):
    live, copy = tmp_path / "run" / "progress.txt", tmp_path / "download" / "progress.txt"
    live.parent.mkdir()
    live.write_text("schema: 3 of 3 sites replied, 1.0 s\n")
    seen: list[str] = []
    follower = ProgressFollower(lambda: [live, copy], seen.append, 10)
    follower.poll()
    live.unlink()  # FLARE moved the run folder away; the job went on meanwhile
    copy.parent.mkdir()
    copy.write_text("schema: 3 of 3 sites replied, 1.0 s\ntrain: 3 of 3 sites replied, 1.2 s\n")
    follower.stop()
    assert seen == ["schema: 3 of 3 sites replied, 1.0 s", "train: 3 of 3 sites replied, 1.2 s"]


@pytest.mark.parametrize("fault", ["find", "emit"])
def test_a_broken_console_never_stops_the_follower(tmp_path, fault):
    path = tmp_path / "progress.txt"
    path.write_text("a\nb\n")
    calls = threading.Event()

    def find():
        if fault == "find":
            calls.set()
            raise OSError("gone")
        return [path]

    def emit(line):
        calls.set()
        if fault == "emit":
            raise OSError("closed terminal")

    with ProgressFollower(find, emit, 0.01) as follower:
        assert calls.wait(5)
    assert follower.emitted == (0 if fault == "find" else 2)
