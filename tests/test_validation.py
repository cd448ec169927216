"""Checks of single values, for configuration files and received payloads alike."""

from __future__ import annotations

import numpy as np
import pytest

from fedforest.errors import ConfigError, PayloadError
from fedforest.validation import Checker, ConfigChecker, PayloadReader, describe, listing

CHECK = Checker()


def test_numbers_and_integers_in_range():
    assert CHECK.integer("n", np.int64(3), lo=1) == 3
    assert CHECK.number("p", 0.5, lo=0, hi=1) == 0.5
    with pytest.raises(ValueError, match=r"n is .*allowed: an integer"):
        CHECK.integer("n", True)
    with pytest.raises(ValueError, match="allowed: an integer"):
        CHECK.integer("n", 0, lo=1)
    with pytest.raises(ValueError, match="finite number"):
        CHECK.number("p", float("nan"))
    with pytest.raises(ValueError):
        CHECK.number("p", 0.0, lo=0, open_lo=True)
    with pytest.raises(ValueError, match="YAML reads a number with an exponent"):
        CHECK.number("p", "1e-5")


def test_choices_strings_lists_and_labels():
    assert CHECK.choice("m", np.str_("auc"), ("auc", "mcc")) == "auc"
    with pytest.raises(ValueError, match="allowed: auc, mcc"):
        CHECK.choice("m", "x", ("auc", "mcc"))
    with pytest.raises(ValueError, match="non-empty string"):
        CHECK.string("s", "  ")
    assert CHECK.site_name("site", "site-1") == "site-1"
    with pytest.raises(ValueError, match="site name"):
        CHECK.site_name("site", "server")
    assert CHECK.str_list("c", ("a", "b"), allowed=["a", "b"]) == ["a", "b"]
    with pytest.raises(ValueError, match="without duplicates"):
        CHECK.str_list("c", ["a", "a"])
    with pytest.raises(ValueError, match="at most 1 entries"):
        CHECK.str_list("c", ["a", "b"], max_len=1)
    assert CHECK.labels("classes", [0, 1]) == [0, 1]
    with pytest.raises(ValueError, match="sorted list of unique labels"):
        CHECK.labels("classes", [1, 0])
    with pytest.raises(ValueError):
        CHECK.labels("classes", [0, "a"])


def test_arrays_have_their_kind_shape_and_range():
    out = CHECK.array("v", np.array([1, 2], dtype=np.int8), "i", length=2, lo=0)
    assert out.dtype == np.int64 and out.tolist() == [1, 2]
    with pytest.raises(ValueError, match="kind 'f'"):
        CHECK.array("v", [1.0], "f")
    with pytest.raises(ValueError, match="finite values only"):
        CHECK.array("v", np.array([np.inf]), "f")
    assert np.isinf(CHECK.array("v", np.array([np.inf]), "f", finite=False)).all()
    with pytest.raises(ValueError, match="2 dimension"):
        CHECK.array("v", np.zeros(3), "f", ndim=2)
    with pytest.raises(ValueError, match=r"values in \[0"):
        CHECK.array("v", np.array([-1.0]), "f", lo=0, hi=1)


def test_a_config_checker_names_the_file():
    with pytest.raises(ConfigError, match=r"job.yaml: key 'seed' is -1; allowed: an integer"):
        ConfigChecker("job.yaml").integer("seed", -1, lo=0)


def test_a_payload_reader_reads_fields_and_names_the_sender():
    reader = PayloadReader({"n": 3, "names": ["a"], "m": {"k": 1}}, None, sender="s1")
    assert reader.read_integer("n", lo=0) == 3 and reader.has("names")
    assert reader.read_str_list("names", max_len=5) == ["a"]
    assert reader.read_mapping("m") == {"k": 1}
    assert reader.read_number("absent", default=1.5) == 1.5
    assert reader.read_array("absent", "f", default=None) is None
    with pytest.raises(PayloadError, match=r"from 's1' refused: field 'absent' is missing"):
        reader.get("absent")
    with pytest.raises(PayloadError, match=r"unknown fields \['m'\]"):
        reader.check_keys({"n", "names"})
    nested = reader.entry({"x": "y"}, "imputers[2]")
    with pytest.raises(PayloadError, match=r"imputers\[2\]: field 'x'"):
        nested.read_integer("x")
    with pytest.raises(PayloadError, match="expected a dict"):
        PayloadReader([1, 2], None)
    with pytest.raises(PayloadError, match="field names must be strings"):
        PayloadReader({1: 2}, None)


def test_a_payload_reader_checks_format_and_version():
    with pytest.raises(PayloadError, match="field 'format'"):
        PayloadReader({"format": "other", "version": 1}, "fedforest/imputers")
    with pytest.raises(PayloadError, match="version"):
        PayloadReader({"format": "fedforest/imputers", "version": "1"}, "fedforest/imputers")
    reader = PayloadReader({"format": "fedforest/imputers", "version": 1}, "fedforest/imputers")
    assert reader.version == 1


def test_describe_and_listing_stay_short():
    assert len(describe("x" * 10_000)) < 200
    assert listing(["a", "b"]) == "a, b"
    assert listing(range(25), limit=3) == "0, 1, 2 and 22 more"
