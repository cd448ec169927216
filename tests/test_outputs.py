"""The folder a command makes its folder in (``job build --out``)."""

from __future__ import annotations

import pytest

from fedforest.outputs import MARKER, OutputError, check_parent, claim_dir, record_dir


def _made_by(folder, command):
    claim_dir(folder, command)
    (folder / "site-1.csv").write_text("a,b\n1,2\n")
    record_dir(folder, command)


def test_a_folder_of_its_own_is_fine(tmp_path):
    check_parent(tmp_path / "jobs", "fedforest job build", [tmp_path / "site_configs"])
    check_parent(tmp_path / "new" / "deeper", "fedforest job build")


@pytest.mark.parametrize("sub", ["", "inner", "inner/deeper"])
def test_another_commands_folder_and_anything_in_it_is_refused(tmp_path, sub):
    data = tmp_path / "demo_data"
    _made_by(data, "data_prep/make_demo_data.py")
    before = sorted(p.name for p in data.iterdir())
    target = data / sub if sub else data
    with pytest.raises(OutputError) as err:
        check_parent(target, "fedforest job build")
    text = str(err.value)
    assert str(target) in text and "data_prep/make_demo_data.py" in text and MARKER in text
    assert "such as jobs" in text
    assert sorted(p.name for p in data.iterdir()) == before  # nothing changed


def test_a_folder_holding_or_inside_an_input_is_refused(tmp_path):
    configs = tmp_path / "site_configs"
    configs.mkdir()
    data = tmp_path / "data" / "site-1.csv"
    data.parent.mkdir()
    data.write_text("a\n1\n")
    for out, words in (
        (configs, "an input folder"),
        (configs / "jobs", "an input folder"),
        (tmp_path, "it holds"),
        (tmp_path / "data", "it holds"),
    ):
        with pytest.raises(OutputError, match=words):
            check_parent(out, "fedforest job build", [configs, data])
