"""What ``job.task: survival`` adds to the job's and the sites' files.

The job file's ``survival:`` section (read only in a survival job)::

    survival:
      times: null          # a public time grid (strictly increasing, >= 0);
                           # null: agreed from the sites' coarse event-time quantiles
      grid_points: 30      # the most points of an agreed grid
      horizons: null       # times the test rows' time-dependent AUC and calibration are
                           # reported at; null: the grid's middle time

A survival site names two outcome columns instead of ``target``::

    time: months           # follow-up time: finite, >= 0
    event: died            # 1/0 or true/false: the event happened, or the row is censored
    time_resolution: 6     # its event-time quantiles are rounded to multiples of 6
                           # (null: 2 significant digits; fedforest.federation.time_grid)

The event column then plays the part of the target where the job needs one
class per row (the splits are stratified by event; ``SiteConfig.target`` is
the event column) and the time column is never a feature
(``SiteConfig.outcomes``). The defaults and refusals of a survival job's
``evaluation`` and ``election`` sections are :mod:`.config_tasks`'s; every
error names the file, the key, the bad value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..privacy.grids import coarser_resolution
from ..validation import ConfigChecker
from .time_grid import MAX_GRID_POINTS, MAX_HORIZONS, check_grid

#: A site's survival keys and their defaults (``SITE_DEFAULTS`` holds them too).
SURVIVAL_SITE_DEFAULTS: dict[str, Any] = {"time": None, "event": None, "time_resolution": None}


def survival_site_keys(c: ConfigChecker, d: dict, task: str) -> None:
    """A site's outcome keys for ``task``: a survival site names ``time`` and ``event``
    (required, two columns), no ``target`` (the event column becomes it), an optional
    ``time_resolution`` > 0; any other site sets none of the three."""
    if task != "survival":
        for key in SURVIVAL_SITE_DEFAULTS:
            if d[key] is not None:
                c.fail(
                    key,
                    d[key],
                    "null or absent unless job.task is survival (this job's task is "
                    f"{task}: name the outcome with target)",
                )
        return
    if d["target"] is not None:
        c.fail(
            "target",
            d["target"],
            "absent in a survival job (job.task: survival): name the outcome with time (the "
            "follow-up time column) and event (the 1/0 or true/false event column)",
        )
    for key in ("time", "event"):
        if d[key] is None:
            c.fail(key, None, "a column name (this key is required in a survival job)")
        c.string(key, d[key])
    if d["time"] == d["event"]:
        c.fail("event", d["event"], f"a column other than the time column {d['time']!r}")
    renames = d["renames"] if isinstance(d["renames"], Mapping) else {}
    if isinstance(d["drop_columns"], list) and d["time"] in d["drop_columns"]:
        if d["time"] not in renames.values():
            c.fail("drop_columns", d["time"], f"columns other than the time column {d['time']!r}")
    if d["time_resolution"] is not None:
        c.number("time_resolution", d["time_resolution"], 0, open_lo=True)
    d["target"] = d["event"]


def survival_site_checks(c: ConfigChecker, d: dict, label_map: Mapping, task: str) -> None:
    """A survival site's keys that only classification uses: ``calibration`` none or null,
    ``label_map`` empty."""
    if task != "survival":
        return
    if d["calibration"] not in (None, "none"):
        c.fail(
            "calibration",
            d["calibration"],
            "none or null in a survival job (job.task: survival predicts survival "
            "curves, which are not calibrated)",
        )
    if label_map:
        c.fail(
            "label_map",
            d["label_map"],
            "{} in a survival job (the event column holds 1/0 or true/false)",
        )


def survival_grid(c: ConfigChecker, surv: dict, survival: bool) -> tuple[float, ...] | None:
    """The ``survival:`` section: a public grid (``times``) or the agreed grid's size."""
    c.integer("survival.grid_points", surv["grid_points"], 2, MAX_GRID_POINTS)
    times = surv["times"]
    if times is None:
        return None
    if not survival:
        c.fail("survival.times", times, "null unless job.task is survival")
    if not isinstance(times, list) or any(
        isinstance(t, bool) or not isinstance(t, (int, float)) for t in times
    ):
        c.fail("survival.times", times, "null or a list of numbers (a public time grid)")
    try:
        grid = check_grid(times, "survival.times")
    except ValueError as err:
        c.fail(
            "survival.times",
            times,
            f"2 to {MAX_GRID_POINTS} finite times >= 0, strictly increasing ({err})",
        )
    return tuple(float(t) for t in grid)


def survival_horizons(
    c: ConfigChecker, surv: dict, survival: bool, times: tuple[float, ...] | None
) -> tuple[float, ...] | None:
    """``survival.horizons``: the times a survival job reports each site's time-dependent
    AUC and calibration at (within a public grid's range when the job gives one)."""
    horizons = surv["horizons"]
    if horizons is None:
        return None
    if not survival:
        c.fail("survival.horizons", horizons, "null unless job.task is survival")
    rule = f"1 to {MAX_HORIZONS} finite times >= 0, strictly increasing"
    if not isinstance(horizons, list) or any(
        isinstance(t, bool) or not isinstance(t, (int, float)) for t in horizons
    ):
        c.fail("survival.horizons", horizons, f"null or a list of numbers ({rule})")
    try:
        out = check_grid(horizons, "survival.horizons", 1, MAX_HORIZONS)
    except ValueError as err:
        c.fail("survival.horizons", horizons, f"{rule} ({err})")
    if times is not None and (out[0] < times[0] or out[-1] > times[-1]):
        c.fail(
            "survival.horizons",
            horizons,
            f"times within survival.times, [{times[0]:g}, {times[-1]:g}] (the curves are "
            "known on the grid only)",
        )
    return tuple(float(t) for t in out)


def event_time_resolution(site, policy) -> float | None:
    """What a survival site's event-time quantiles are rounded to: the coarser of its
    ``time_resolution`` (``site``, a :class:`~fedforest.federation.config.SiteConfig`)
    and ``policy``'s (``None``: neither sets one).

    Raises
    ------
    ConfigError
        When neither is a multiple of the other, naming both files and keys.
    """
    return coarser_resolution(
        site.time_resolution,
        policy.time_resolution,
        (site.source, "time_resolution"),
        (policy.source, "privacy.time_resolution"),
    )
