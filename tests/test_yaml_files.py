"""The YAML reader: file, line and reason in every refusal."""

from __future__ import annotations

import pytest

from fedforest.errors import ConfigError
from fedforest.federation.config import JobConfig, SiteConfig
from fedforest.yaml_files import INT_MAX, MAX_BYTES, MAX_DEPTH, load_yaml, read_yaml_file

SITE = "site: site-1\ndata_path: data.csv\ntarget: outcome\nlabel_map: {'Ja': 'yes'}\n"


def test_a_plain_file_reads_as_its_mapping(tmp_path):
    path = tmp_path / "site-1.yaml"
    path.write_text(SITE, encoding="utf-8")
    assert read_yaml_file(path)["label_map"] == {"Ja": "yes"}


def test_a_utf8_byte_order_mark_is_fine(tmp_path):
    path = tmp_path / "site-1.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + SITE.encode())
    assert read_yaml_file(path)["site"] == "site-1"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_files_are_refused_naming_the_file_and_utf8(tmp_path, encoding):
    path = tmp_path / "site-1.yaml"
    data = SITE.encode(encoding)
    if encoding in ("utf-16-le", "utf-16-be"):  # no byte-order mark: NUL bytes give it away
        path.write_bytes(data)
        match = "NUL byte"
    else:
        path.write_bytes(data)
        match = "UTF-16|UTF-32"
    with pytest.raises(ConfigError, match=match) as err:
        read_yaml_file(path)
    assert str(path) in str(err.value) and "UTF-8" in str(err.value)


def test_a_latin1_file_is_refused_naming_the_line_and_the_bytes(tmp_path):
    path = tmp_path / "site-1.yaml"
    path.write_bytes((SITE + "target: glucosé\n").encode("latin-1"))
    with pytest.raises(ConfigError) as err:
        read_yaml_file(path)
    text = str(err.value)
    assert str(path) in text and "line 5" in text and "xe9" in text and "UTF-8" in text


def test_a_config_loader_gives_the_same_refusal(tmp_path):
    path = tmp_path / "site-1.yaml"
    path.write_bytes(SITE.encode("utf-16"))
    with pytest.raises(ConfigError, match=f"{path}: the file is UTF-16"):
        SiteConfig.load(path)


@pytest.mark.parametrize("digits", [20, 500, 5000, 100_000])
def test_a_huge_integer_is_refused_with_the_key_the_line_and_the_range(tmp_path, digits):
    path = tmp_path / "job.yaml"
    path.write_text("job:\n  sites: [a, b]\n  seed: " + "9" * digits + "\n")
    with pytest.raises(ConfigError) as err:
        JobConfig.load(path)
    text = str(err.value)
    assert text.startswith(f"{path}: line 3: key 'job.seed'")
    assert str(INT_MAX) in text and len(text) < 400


def test_an_integer_just_inside_int64_reads_and_the_key_range_applies_after(tmp_path):
    assert load_yaml(f"a: {INT_MAX}\nb: -{INT_MAX + 1}\n", "x.yaml") == {
        "a": INT_MAX,
        "b": -INT_MAX - 1,
    }
    with pytest.raises(ConfigError, match=r"x\.yaml: line 1: key 'a' is 9223372036854775808"):
        load_yaml(f"a: {INT_MAX + 1}\n", "x.yaml")
    path = tmp_path / "job.yaml"
    path.write_text(f"job:\n  sites: [a, b]\n  seed: {INT_MAX}\n")
    with pytest.raises(ConfigError, match="key 'job.seed'"):
        JobConfig.load(path)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000 + "]" * 5000,
        "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)),
        "{a: " * 3000 + "1" + "}" * 3000,
    ],
)
def test_deep_nesting_is_refused_naming_the_file_and_the_limit(text):
    with pytest.raises(ConfigError) as err:
        load_yaml(text, "job.yaml")
    assert str(err.value).startswith("job.yaml: line") and f"{MAX_DEPTH}" in str(err.value)


def test_nesting_up_to_the_limit_reads():
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value = load_yaml(text, "x.yaml")
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {max_depth: 3}\nforest:\n  <<: *b\n  n_estimators: 5\n",
        "base: &b {max_depth: 3}\nforest: {<<: [*b], max_depth: 4}\n",
        "forest:\n  <<: {max_depth: 3}\n",
    ],
)
def test_merge_keys_are_refused_naming_the_key_and_the_line(text):
    with pytest.raises(ConfigError) as err:
        load_yaml(text, "job.yaml")
    text = str(err.value)
    assert "job.yaml: line" in text and "'forest.<<'" in text and "merge key" in text


def test_plain_anchors_and_aliases_still_read():
    assert load_yaml("a: &x [1, 2]\nb: *x\n", "x.yaml") == {"a": [1, 2], "b": [1, 2]}


@pytest.mark.parametrize(
    "text", ["a: [1, 2", "a: !!python/object:os.system x", "a: b: c", "\tkey: 1"]
)
def test_text_that_is_not_yaml_names_the_file(text):
    # one line: the file, where, and PyYAML's reason
    with pytest.raises(
        ConfigError, match=r"^job\.yaml: line \d+, column \d+: not valid YAML: "
    ) as err:
        load_yaml(text, "job.yaml")
    assert "\n" not in str(err.value)


def test_a_file_too_large_or_missing_is_refused(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("# " + "x" * MAX_BYTES + "\n")
    with pytest.raises(ConfigError, match=f"{path}: the file has .* bytes"):
        read_yaml_file(path)
    with pytest.raises(ConfigError, match="file not found"):
        read_yaml_file(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="file not found"):
        read_yaml_file(tmp_path)  # a folder
