"""Checks across a configuration folder, made when the job is built (federation/config_folder.py)."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError
from fedforest.federation.config import SiteConfig
from fedforest.federation.config_folder import check_target_codings

from .test_config import site_dict, write_yaml

ORDER = ["site-1", "site-2", "site-3"]


def sites(**label_maps) -> dict:
    """The three sites' configurations (``label_maps[site]``: its label_map)."""
    return {
        name: SiteConfig.from_dict(
            site_dict(site=name, label_map=label_maps.get(name.replace("-", "_"), {})),
            f"site_configs/{name}.yaml",
        )
        for name in ORDER
    }


def test_yaml_files_the_job_does_not_read_are_named_with_the_reason(tmp_path):
    from fedforest.federation.config_folder import unlisted_yaml_files

    folder = tmp_path / "site_configs"
    for name in ("job.yaml", "site-1.yaml", "site-2.yaml", "site-4.yaml", "site-3.yml"):
        write_yaml(folder / name, {"site": name.split(".")[0]})
    (folder / "regression").mkdir()  # a folder of another job: not a file of this one
    write_yaml(folder / "regression" / "site-9.yaml", {})
    found = {path.name: why for path, why in unlisted_yaml_files(folder, ["site-1", "site-2"])}
    assert sorted(found) == ["site-3.yml", "site-4.yaml"]
    assert found["site-4.yaml"] == (
        f"key 'job.sites' in {folder / 'job.yaml'} lists site-1, site-2, not 'site-4'; add "
        "'site-4' to job.sites to make it a site of the job"
    )
    assert found["site-3.yml"] == (
        "only <site>.yaml files are read; rename it to site-3.yaml and list 'site-3' in "
        "job.sites to make it a site of the job"
    )
    assert unlisted_yaml_files(folder, ["site-1", "site-2", "site-4"])[0][0].name == "site-3.yml"


def test_a_yml_file_beside_its_yaml_file_is_named_as_unread(tmp_path):
    from fedforest.federation.config_folder import unlisted_yaml_files

    write_yaml(tmp_path / "site-1.yaml", {})
    write_yaml(tmp_path / "site-1.yml", {})
    write_yaml(tmp_path / "site-2.yml", {})
    found = dict((p.name, why) for p, why in unlisted_yaml_files(tmp_path, ["site-1", "site-2"]))
    assert found == {
        "site-1.yml": "only <site>.yaml files are read: site-1.yaml is read, not this file",
        "site-2.yml": "only <site>.yaml files are read; rename it to site-2.yaml to make it a "
        "site of the job",
    }


def test_one_coding_with_classes_missing_at_some_sites_is_accepted():
    check_target_codings(sites(), {"site-1": [0, 1, 2], "site-2": [0, 1], "site-3": [1]}, ORDER)
    check_target_codings(
        sites(), {"site-1": ["M", "B"]}, ORDER
    )  # one site read: nothing to compare
    check_target_codings(sites(), {}, ORDER)


def test_two_codings_name_both_sites_their_labels_and_a_label_map():
    labels = {"site-1": [0, 1], "site-2": ["M", "B"], "site-3": [1, 0]}
    with pytest.raises(ConfigError) as info:
        check_target_codings(sites(), labels, ORDER)
    msg = str(info.value)
    assert msg.startswith("site_configs/site-2.yaml: key 'target' ('outcome') of site 'site-2'")
    assert "is coded ['B', 'M'], but site 'site-1' (site_configs/site-1.yaml" in msg
    assert "have no class label in common: the target is coded differently" in msg
    assert "labels per site: site-1: [0, 1]; site-2: ['B', 'M']; site-3: [0, 1]" in msg
    assert "site-2: label_map: {B: 0, M: 1} in site_configs/site-2.yaml" in msg
    assert "(check which label means which)" in msg


def test_two_sites_lacking_different_classes_of_a_third_get_no_suggested_map():
    # of any two sites, one's labels must contain the other's: [0, 1] and [2] are two codings
    labels = {"site-1": [0, 1, 2], "site-2": [0, 1], "site-3": [2]}
    with pytest.raises(ConfigError) as info:
        check_target_codings(sites(), labels, ORDER)
    msg = str(info.value)
    assert "sites 'site-2' and 'site-3' have no class label in common" in msg
    assert "with label_map: {local label: global label} in site_configs/site-3.yaml" in msg


def test_overlapping_codings_say_what_each_site_lacks():
    labels = {"site-1": [0, 1, 2], "site-2": [1, 2, 3]}
    with pytest.raises(ConfigError, match=r"'site-1' lacks \[3\], 'site-2' lacks \[0\]"):
        check_target_codings(sites(), labels, ORDER)


def test_the_fix_maps_the_labels_in_the_sites_own_file():
    # site-3 maps 'positive' to 'pos' already: the suggested map starts from its file's labels
    labels = {"site-1": ["neg", "pos"], "site-2": ["neg", "pos"], "site-3": ["negative", "pos"]}
    mapped = sites(site_3={"positive": "pos"})
    with pytest.raises(ConfigError) as info:
        check_target_codings(mapped, labels, ORDER)
    msg = str(info.value)
    assert msg.startswith("site_configs/site-3.yaml:")  # the odd one out gets the fix
    assert "site-3: label_map: {positive: pos, negative: neg}" in msg


def test_a_yaml_word_in_a_suggested_map_is_quoted():
    labels = {"site-1": ["no", "yes"], "site-2": ["a", "b"]}
    with pytest.raises(ConfigError, match=r"site-2: label_map: \{a: 'no', b: 'yes'\}"):
        check_target_codings(sites(), labels, ORDER)
