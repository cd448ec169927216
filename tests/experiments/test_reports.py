"""The reports facade re-exports the statistics, figures and markdown modules' names."""

from __future__ import annotations

from fedforest.experiments import (
    calibration_figures,
    figures,
    markdown,
    reports,
    statistics,
)


def test_every_name_is_its_modules_own():
    owners = (statistics, figures, calibration_figures, markdown)
    assert sorted(reports.__all__) == reports.__all__
    for name in reports.__all__:
        value = getattr(reports, name)
        assert any(getattr(m, name, None) is value for m in owners), name
    assert reports.write_report is markdown.write_report
    assert reports.summary_table is statistics.summary_table
    assert reports.plot_reliability is calibration_figures.plot_reliability


def test_the_facade_computes_as_statistics_does():
    import pandas as pd

    rows = [
        ("d", 2, 0.5, rep, site, method, "auc", value)
        for rep in range(2)
        for site in ("s1", "s2")
        for method, value in (("fpv", 0.6 + 0.01 * rep), ("mp", 0.7))
    ]
    frame = pd.DataFrame(rows, columns=reports.COLUMNS)
    got = reports.per_repetition(frame)
    assert got.equals(statistics.per_repetition(frame))
    assert set(got["method"]) == {"fpv", "mp"}
