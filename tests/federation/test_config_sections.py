"""The typed sections of a job's configuration: built by the job's validation, their defaults
the schema's, frozen, and given back as the file spells them."""

from __future__ import annotations

import dataclasses
import doctest

import pytest

import fedforest.federation.config_sections
from fedforest.errors import ConfigError
from fedforest.federation.config import JOB_DEFAULTS, JobConfig
from fedforest.federation.config_sections import (
    ElectionSettings,
    ForestParams,
    SurrogateParams,
    Timeouts,
)
from fedforest.vocabulary import PHASES

SECTIONS = {
    "forest": ForestParams,
    "surrogates": SurrogateParams,
    "election": ElectionSettings,
}


def test_the_schema_defaults_are_the_sections_defaults():
    for name, section in SECTIONS.items():
        assert JOB_DEFAULTS[name] == section().to_dict(), name
        assert list(JOB_DEFAULTS[name]) == [f.name for f in dataclasses.fields(section)], name
    assert JOB_DEFAULTS["job"]["timeouts"] == Timeouts().to_dict()
    assert JOB_DEFAULTS["job"]["timeouts"] == {
        "schema": 120,
        "election": 300,
        "train": 900,
        "evaluate": 600,
    }


def test_timeouts_have_one_field_per_phase():
    timeouts = Timeouts(schema=1, election=2, train=0, evaluate=4)
    assert tuple(f.name for f in dataclasses.fields(Timeouts)) == PHASES
    assert [timeouts.of(phase) for phase in PHASES] == [1, 2, 0, 4]
    with pytest.raises(KeyError, match="phase 'pool' is not one of"):
        timeouts.of("pool")


def test_a_job_holds_its_sections_typed():
    job = JobConfig.from_dict(
        {
            "job": {"sites": ["a", "b"], "timeouts": {"train": 30}},
            "forest": {"n_estimators": 7, "max_features": 0.5},
            "surrogates": {"min_rows": 3},
            "election": {"always_keep": ["age"], "metric": "auc"},
        }
    )
    assert job.timeouts == Timeouts(schema=120.0, election=300.0, train=30.0, evaluate=600.0)
    assert all(isinstance(job.timeouts.of(p), float) for p in PHASES)
    assert job.forest == ForestParams(n_estimators=7, max_features=0.5)
    assert job.surrogates == SurrogateParams(min_agreement=0.25, min_rows=3)
    assert job.election == ElectionSettings(always_keep=("age",), metric="auc")
    assert job.election.to_dict()["always_keep"] == ["age"]  # as the file spells it


def test_a_section_given_back_as_a_dict_builds_the_same_section():
    for section in (
        ForestParams(max_depth=4, max_features=None),
        SurrogateParams(min_agreement=-0.5),
        ElectionSettings(enabled=False, always_keep=("a", "b"), normalization="selected"),
        Timeouts(train=0),
    ):
        values = section.to_dict()
        if "always_keep" in values:
            values["always_keep"] = tuple(values["always_keep"])
        assert type(section)(**values) == section


def test_sections_are_frozen():
    job = JobConfig.from_dict({"job": {"sites": ["a", "b"]}})
    for section in (job.forest, job.surrogates, job.election, job.timeouts):
        field = dataclasses.fields(section)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(section, field, None)


def test_a_regression_job_gets_its_election_metric():
    job = JobConfig.from_dict({"job": {"sites": ["a", "b"], "task": "regression"}})
    assert job.election.metric == "rmse" and job.election == ElectionSettings(metric="rmse")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"forest": {"n_estimators": 0}}, "key 'forest.n_estimators' is 0; allowed: an integer"),
        ({"surrogates": {"min_rows": 0}}, "key 'surrogates.min_rows' is 0"),
        ({"election": {"always_keep": "age"}}, "key 'election.always_keep' is 'age'"),
        ({"election": {"votes": 1}}, "key 'election.votes' is 1; allowed: one of the known keys"),
    ],
)
def test_a_section_is_only_built_from_validated_values(data, message):
    with pytest.raises(ConfigError, match=message):
        JobConfig.from_dict({"job": {"sites": ["a", "b"]}, **data}, "job.yaml")


def test_the_module_examples():
    result = doctest.testmod(fedforest.federation.config_sections)
    assert result.failed == 0 and result.attempted > 0
