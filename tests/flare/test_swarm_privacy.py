"""A hospital's privacy scope in swarm mode, without FLARE's runtime.

The swarm site passes every payload it computes through the
:class:`PrivacyPolicyFilter` objects of its job's privacy scope
(:class:`ScopeFilteredTasks`) before it leaves, and the filter answers the
swarm replies FLARE passes through it (acknowledgements, statuses). The
sites here are real :class:`SiteRunner` objects with real scikit-learn
forests, in one process (``tests/federation/test_swarm.py``'s harness); the
POC test (``test_poc.py``) runs the same with FLARE applying the scope.
"""

from __future__ import annotations

import numpy as np
import pytest
from nvflare.apis.fl_constant import FilterKey, FLContextKey, ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply

from federation.test_site import make_job
from federation.test_swarm import build_swarm, load_runners, run_swarm
from fedforest import protocol
from fedforest.flare.privacy_filter import REFUSED, PrivacyPolicyFilter
from fedforest.flare.swarm import ScopeFilteredTasks
from fedforest.model.pooled_model import load_model

K = 25


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("swarm_scope")
    config, _ = make_job(
        folder,
        rows=200,
        n_estimators=6,
        job={"mode": "swarm"},
        evaluation={"calibration": "none"},
        election={"auto_tune": False},
    )
    return config, folder


def scoped_swarm(demo, tmp_path, filters):
    """The demo swarm with site-1's tasks passed through ``filters``; the statuses."""
    config, folder = demo
    runners = load_runners(folder, config)
    runners["site-1"] = ScopeFilteredTasks(runners["site-1"], "site-1", filters)
    options = {site: {"save_dir": tmp_path / site} for site in config.sites}
    peers, _ = build_swarm(config, runners, options=options)
    return run_swarm(peers)


def test_what_a_scoped_site_sends_the_others_complies_with_its_scope(demo, tmp_path):
    statuses = scoped_swarm(
        demo, tmp_path, [PrivacyPolicyFilter(min_leaf_rows=K, share={"surrogates": False})]
    )
    assert {s["state"] for s in statuses.values()} == {"finished"}
    assert len({s["model_digest"] for s in statuses.values()}) == 1
    for site in ("site-2", "site-3"):  # the trees site-1 sent, as another site pooled them
        forest = load_model(tmp_path / site / "pooled_model.npz").forest
        mine = np.isin(forest.tree_of_node, np.flatnonzero(forest.owner_mask("site-1")))
        assert mine.any()
        assert forest.n_node_samples[mine].min() >= K
        assert not np.any(forest.surrogate_feature[mine] >= 0)
        others = forest.n_node_samples[~mine].min()
        assert others < K  # the sites without a scope send what they trained
    privacy = statuses["site-1"]["metrics"]["privacy"]  # its report names the scope's policy
    assert privacy["min_leaf_rows"] == K and privacy["share"]["surrogates"] is False


def test_a_payload_the_scope_refuses_never_leaves_and_the_others_name_why(demo, tmp_path):
    # a grid the site does not snap to when it trains: the filter cannot snap the trees
    statuses = scoped_swarm(demo, tmp_path, [PrivacyPolicyFilter(threshold_grid={"step": 0.5})])
    failed = statuses["site-1"]
    assert failed["state"] == "failed" and failed["phase"] == "train"
    assert failed["error"].startswith(
        "PrivacyRefusal: privacy filter at site-1 refused the 'train' payload: forest: "
    )
    assert "off the threshold grid" in failed["error"]
    for site in ("site-2", "site-3"):
        assert statuses[site]["state"] == "finished"
        assert statuses[site]["participants"] == ["site-2", "site-3"]
        assert statuses[site]["dropped"] == {"site-1": f"train: it failed: {failed['error']}"}


# ------------------------------------------------------- replies FLARE filters
def ctx(task: str, site: str = "site-1") -> FLContext:
    fl_ctx = FLContext()
    fl_ctx.set_prop(ReservedKey.IDENTITY_NAME, site, private=False, sticky=False)
    fl_ctx.set_prop(FLContextKey.TASK_NAME, task, private=True, sticky=False)
    fl_ctx.set_prop(FLContextKey.FILTER_DIRECTION, FilterKey.OUT, private=True, sticky=False)
    return fl_ctx


@pytest.mark.parametrize("task", [protocol.SWARM_CONFIG, protocol.SWARM_SHARE])
def test_an_acknowledgement_passes_and_nothing_rides_on_it(task):
    f = PrivacyPolicyFilter(min_leaf_rows=K)
    out = f.process(make_reply(ReturnCode.OK), ctx(task))
    assert out.get_return_code() == ReturnCode.OK
    ack = make_reply(ReturnCode.OK)
    ack[protocol.ERROR] = "x" * 5000  # a refusal of a peer's message, as a text
    assert len(f.process(ack, ctx(task))[protocol.ERROR]) <= 2000
    for field, value in ((protocol.PAYLOAD, {"format": protocol.SITE_SCHEMA}), ("rows", [1])):
        smuggled = make_reply(ReturnCode.OK)
        smuggled[field] = value
        refused = f.process(smuggled, ctx(task))
        assert refused.get_return_code() == REFUSED
        assert "nothing but an acknowledgement" in refused[protocol.ERROR]
    odd = make_reply(ReturnCode.OK)
    odd[protocol.ERROR] = {"rows": [1]}
    assert f.process(odd, ctx(task)).get_return_code() == REFUSED


def status(metrics=None, site="site-1") -> dict:
    return {
        "format": protocol.SWARM_STATUS,
        "version": protocol.FORMATS[protocol.SWARM_STATUS],
        "site": site,
        "state": "finished",
        "phase": "evaluate",
        "error": None,
        "participants": ["site-1", "site-2"],
        "dropped": {},
        "model_digest": "a" * 64,
        "phase_seconds": {"train": 1.0},
        "metrics": metrics,
        "metrics_withheld": False,
        "encrypted": True,
    }


def report(payload) -> Shareable:
    out = make_reply(ReturnCode.OK)
    out[protocol.PAYLOAD] = payload
    return out


def test_a_status_is_checked_and_its_metrics_under_k_are_withheld(demo, tmp_path):
    statuses = scoped_swarm(demo, tmp_path, [])
    metrics = statuses["site-1"]["metrics"]
    assert metrics["rows"] < 10_000
    task = ctx(protocol.SWARM_REPORT)
    assert metrics["privacy"]["min_leaf_rows"] == 5  # the job's default
    kept = PrivacyPolicyFilter(min_leaf_rows=8).process(report(status(metrics)), task)
    assert kept.get_return_code() == ReturnCode.OK
    assert kept[protocol.PAYLOAD]["metrics"]["privacy"]["min_leaf_rows"] == 8  # tightened
    big = PrivacyPolicyFilter(min_leaf_rows=metrics["rows"] + 1)
    withheld = big.process(report(status(metrics)), task)[protocol.PAYLOAD]
    assert withheld["metrics"] is None and withheld["metrics_withheld"] is True
    assert withheld["state"] == "finished"  # the status itself still reaches the server
    assert big.process(report(status()), task).get_return_code() == ReturnCode.OK
    for bad in (status(site="site-2"), {**status(), "trees": [1]}, {**status(), "version": 9}):
        assert big.process(report(bad), task).get_return_code() == REFUSED
    wrong = big.process(report(metrics), task)  # a metrics payload is not a status
    assert wrong.get_return_code() == REFUSED
