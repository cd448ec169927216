"""The configuration reference (docs/configuration.md) says what the schema and its checks do.

Every key of the schema has a description and every description a key; the choices and
ranges the reference prints are the ones the validation accepts and refuses. (That the
page holds the current tables is checked with every generated block, tests/test_docs.py.)
"""

from __future__ import annotations

import copy

import pytest

from fedforest.errors import ConfigError
from fedforest.federation.config import JobConfig, SiteConfig
from fedforest.federation.config_docs import Key, render, tables
from fedforest.privacy.policy import PrivacyPolicy
from fedforest.vocabulary import TASKS


def test_every_key_of_the_schema_is_documented_and_every_documented_key_exists():
    for name, (docs, defaults) in tables().items():
        assert set(defaults) - set(docs) == set(), f"{name}: keys without a description"
        assert set(docs) - set(defaults) == set(), f"{name}: descriptions of no key"
        for key, doc in docs.items():
            assert doc.meaning.strip() and doc.allowed_text().strip(), f"{name}: {key}"


def _nested(key: str, value) -> dict:
    out: dict = {}
    here = out
    parts = key.split(".")
    for part in parts[:-1]:
        here = here.setdefault(part, {})
    here[parts[-1]] = value
    return out


def _merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = _merge(out.get(k, {}), v) if isinstance(v, dict) and v else v
    return out


def _accepts(table: str, key: str, value, tmp_path) -> bool:
    """Whether the file ``table`` with ``key: value`` is valid, in a job of either task."""
    for task in TASKS:
        try:
            if table == "job":
                base = {"job": {"sites": ["a", "b"], "task": task}}
                JobConfig.from_dict(_merge(base, _nested(key, value)))
            elif table == "site":
                outcome = {"time": "t", "event": "e"} if task == "survival" else {"target": "y"}
                data = {"site": "a", "data_path": "a.csv", **outcome, key: value}
                SiteConfig.from_dict(data, task=task)
            elif table == "privacy":
                PrivacyPolicy.from_dict(_nested(key, value))
            else:
                site = SiteConfig.from_dict({"site": "a", "data_path": "a.csv", "target": "y"})
                own = tmp_path / "fedforest.yaml"
                own.write_text(f"{key}: {'null' if value is None else value}\n".lower())
                site.with_override(own)
            return True
        except ConfigError:
            continue
    return False


def _cases(key: str, doc: Key):
    """(value, whether the reference allows it) for the choices, booleans and ranges."""
    if doc.choices:
        for choice in doc.choices:
            yield ([choice] if doc.many else choice), True
        yield (["no-such-value"] if doc.many else "no-such-value"), False
    if doc.boolean:
        yield True, True
        yield False, True
        yield "maybe", False
    if doc.lo is not None or doc.hi is not None:
        step = 1 if doc.integer else None
        if doc.lo is not None:
            yield doc.lo, not doc.open_lo
            yield doc.lo - (step or max(abs(doc.lo) / 2, 1e-12)), False
        if doc.hi is not None:
            yield doc.hi, not doc.open_hi
            yield doc.hi + (step or max(abs(doc.hi) / 2, 1e-12)), False
        inside = (doc.lo + doc.hi) / 2 if doc.lo is not None and doc.hi is not None else None
        if inside is None:
            inside = (doc.lo + 1) if doc.lo is not None else doc.hi - 1
        yield (round(inside) if doc.integer else inside), True
        if doc.integer:
            yield (doc.lo if doc.lo is not None else doc.hi) + 0.5, False
    if doc.nullable:
        yield None, True


CASES = [
    (table, key, value, allowed)
    for table, (docs, _) in tables().items()
    for key, doc in docs.items()
    for value, allowed in _cases(key, doc)
]


@pytest.mark.parametrize("table, key, value, allowed", CASES)
def test_the_references_choices_and_ranges_are_what_the_validation_allows(
    table, key, value, allowed, tmp_path
):
    assert _accepts(table, key, value, tmp_path) == allowed, (
        f"{table} key {key!r} = {value!r}: the reference says {'allowed' if allowed else 'refused'}"
    )


def test_every_documented_rule_is_tested():
    """Each key states its rule as data (a choice, a boolean, a range) or as text only."""
    tested = {(t, k) for t, k, _, _ in CASES}
    assert len(tested) >= 50
    for table in tables():
        assert render(table).startswith(("| key", "#### "))
