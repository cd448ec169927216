"""A hospital's privacy policy enforced on what leaves the site, checked where it arrives.

One small simulator run (module fixture) serves the FLARE tests. The server
saves every payload it receives (``privacy_capture.CaptureResults``), and:

* site-2 has a policy in its own ``local/fedforest.yaml``, stricter than the
  job's YAML for it;
* site-3 has no policy of its own, but its ``local/privacy.json`` lists
  :class:`PrivacyPolicyFilter` in the scope the job asks for;
* every site runs the job's own filter (``privacy_filter=``), which withholds
  imputers;
* site-1 has nothing else: what any site would send.

The unit tests run the filter on real ``Shareable`` objects, without FLARE.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from nvflare.apis.fl_constant import FilterKey, FLContextKey, ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply

from fedforest import protocol
from fedforest.election.ballot import SiteVote
from fedforest.errors import ConfigError
from fedforest.federation.config import SiteConfig
from fedforest.federation.schema import SiteSchema
from fedforest.federation.tables import read_table
from fedforest.federation.training import fit_site_models
from fedforest.flare.environments import simulate
from fedforest.flare.privacy_filter import REFUSED, PrivacyPolicyFilter
from fedforest.flare.recipe import FedForestRecipe
from fedforest.model.forest import NODE_FIELDS, PooledForest
from fedforest.model.model_files import load_payload
from fedforest.privacy.audit import check_forest, disclosed_rare_levels
from fedforest.privacy.levels import OTHER_LEVEL
from fedforest.privacy.policy import PrivacyPolicy, ThresholdGrid

from .flare_setup import UNCALIBRATED, write_configs
from .privacy_capture import CAPTURED, CaptureResults, SimulatorScope

SITES = ["site-1", "site-2", "site-3"]
K = 20
SITE_2_POLICY = {"min_leaf_rows": K, "threshold_grid": {"step": 0.5}, "min_level_rows": 30}
FILTER = "fedforest.flare.privacy_filter.PrivacyPolicyFilter"
#: site-3's own privacy.json: the filter in the scope "fedforest", also the default scope
PRIVACY_JSON = {
    "scopes": [
        {
            "name": "fedforest",
            "task_result_filters": [
                {"path": FILTER, "args": {"min_leaf_rows": K, "share": {"surrogates": False}}}
            ],
        }
    ],
    "default_scope": "fedforest",
}


# ====================================================================== FLARE
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One simulator run; the results, the payloads the server received, and the folders."""
    tmp = tmp_path_factory.mktemp("privacy")
    configs = write_configs(
        tmp,
        rows=200,
        forest={"n_estimators": 8},
        election={"auto_tune": False},
        evaluation=UNCALIBRATED,
    )
    # a rare level at site-2 (8 rows of 200), which min_level_rows: 30 must hide
    site2 = yaml.safe_load((configs / "site-2.yaml").read_text())
    data = pd.read_csv(site2["data_path"])
    data.loc[data.index[:8], "activity"] = "very_high"
    data.to_csv(site2["data_path"], index=False)
    # the job's YAML asks little of site-2; the hospital's own file asks more
    site2["privacy"] = {"min_leaf_rows": 5}
    (configs / "site-2.yaml").write_text(yaml.safe_dump(site2))
    recipe = FedForestRecipe(
        configs,
        privacy_filter=PrivacyPolicyFilter(share={"imputers": False}),
        scope="fedforest",
        extra_components={"server": [CaptureResults()], "site-3": [SimulatorScope()]},
    )
    run_dir = simulate(
        recipe,
        tmp / "ws",
        log_file=tmp / "sim.log",
        timeout=300,
        site_files={
            "site-2": {"fedforest.yaml": yaml.safe_dump({"privacy": SITE_2_POLICY})},
            "site-3": {"privacy.json": json.dumps(PRIVACY_JSON)},
        },
    )
    path = run_dir / "results.json"
    assert path.is_file(), (tmp / "sim.log").read_text()[-3000:]
    received = {
        tuple(p.name.split(".")[:2]): load_payload(p) for p in (run_dir / CAPTURED).glob("*.npz")
    }
    return {
        "results": json.loads(path.read_text()),
        "received": received,
        "ws": run_dir.parent.parent,
        "configs": configs,
    }


def forests(payload):
    """The forest and, when sent, the intersection forest of a train payload."""
    out = [PooledForest.from_payload(payload["forest"])]
    if payload.get("intersection") is not None:
        out.append(PooledForest.from_payload(payload["intersection"]))
    return out


@pytest.mark.flare
def test_the_job_finishes_with_every_site_and_the_server_saw_every_reply(run):
    results = run["results"]
    assert results["status"] == "finished", results.get("error")
    assert results["dropped_sites"] == {}
    assert sorted(results["metrics"]) == SITES
    for site in SITES:
        for task in ("schema", "vote", "train", "evaluate"):
            assert (site, task) in run["received"], (site, task)


@pytest.mark.flare
def test_a_policy_in_the_hospitals_own_file_holds_for_what_the_server_receives(run):
    grid = ThresholdGrid(("step", 0.5))
    policy = PrivacyPolicy(min_leaf_rows=K, threshold_grid=grid)
    for forest in forests(run["received"]["site-2", "train"]):
        assert forest.n_node_samples.min() >= K
        assert check_forest(forest, policy) == []
        numeric = np.append(~forest.is_categorical, False)[forest.feature]
        t = forest.threshold[(forest.feature >= 0) & numeric & np.isfinite(forest.threshold)]
        assert t.size and np.all(t / 0.5 == np.round(t / 0.5))
    # no level with fewer than 30 rows at site-2 is named in its schema
    schema = run["received"]["site-2", "schema"]
    frame = read_table(SiteConfig.load(run["configs"] / "site-2.yaml"))
    assert disclosed_rare_levels(schema["levels"], frame, 30) == {}
    assert "very_high" not in schema["levels"]["activity"]
    assert OTHER_LEVEL in schema["levels"]["activity"]
    # the effective policy is the hospital's (stricter than the job's min_leaf_rows: 5)
    reported = run["results"]["privacy"]["site-2"]
    assert reported["min_leaf_rows"] == K and reported["min_level_rows"] == 30
    assert reported["threshold_grid"] == {"step": 0.5}
    # a site without a policy sends nodes of a few rows: the capture sees raw trees
    assert (
        PooledForest.from_payload(run["received"]["site-1", "train"]["forest"]).n_node_samples.min()
        < K
    )


@pytest.mark.flare
def test_the_filter_in_a_sites_privacy_scope_changes_what_leaves(run):
    site1 = PooledForest.from_payload(run["received"]["site-1", "train"]["forest"])
    assert np.any(site1.surrogate_feature >= 0)  # surrogates are sent without a policy
    payload = run["received"]["site-3", "train"]
    for forest in forests(payload):
        assert forest.n_node_samples.min() >= K
        assert not np.any(forest.surrogate_feature >= 0)
    reported = run["results"]["privacy"]["site-3"]  # the site itself has no policy
    assert reported["min_leaf_rows"] == K and reported["share"]["surrogates"] is False
    log = (run["ws"] / "site-3" / "log.txt").read_text()
    assert "surrogate splits removed (share.surrogates false)" in log
    assert f"nodes under min_leaf_rows={K} pruned" in log


@pytest.mark.flare
def test_the_jobs_own_filter_runs_on_every_site(run):
    for site in SITES:
        payload = run["received"][site, "train"]
        assert payload["imputers"]["imputers"] == []
        assert run["results"]["privacy"][site]["share"]["imputers"] is False
    assert (
        "imputers withheld (share.imputers false)" in (run["ws"] / "site-1" / "log.txt").read_text()
    )


# ======================================================================= unit
def ctx(task="train", site="site-2") -> FLContext:
    fl_ctx = FLContext()
    fl_ctx.set_prop(ReservedKey.IDENTITY_NAME, site, private=False, sticky=False)
    fl_ctx.set_prop(FLContextKey.TASK_NAME, task, private=True, sticky=False)
    fl_ctx.set_prop(FLContextKey.FILTER_DIRECTION, FilterKey.OUT, private=True, sticky=False)
    return fl_ctx


def reply(payload) -> Shareable:
    out = make_reply(ReturnCode.OK)
    out[protocol.PAYLOAD] = payload
    return out


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame(
        {
            "a": rng.normal(50, 10, n),
            "b": rng.normal(0, 1, n),
            "c": rng.normal(0, 1, n),
            "grade": rng.integers(0, 3, n).astype(float),
        }
    )
    y = ((X["a"] - 50) / 10 + X["c"] + 0.5 * X["grade"] + rng.normal(0, 0.5, n) > 0.5).astype(int)
    return X, y


def train_payload(table, privacy=None) -> dict:
    """What SiteRunner.train sends: real scikit-learn trees, surrogates, imputers, std."""
    X, y = table
    models = fit_site_models(
        "site-2",
        X,
        y,
        own=["a", "b", "c", "grade"],
        shared=["a", "b", "grade"],
        categories={"grade": ["x", "y", "z"]},
        forest_params={"n_estimators": 5},
        random_state=0,
        intersection_columns=["a", "b", "grade"],
        privacy=privacy,
    )
    return {
        "format": protocol.SITE_MODELS,
        "version": protocol.FORMATS[protocol.SITE_MODELS],
        "forest": models.forest.to_payload(),
        "imputers": models.imputers.to_payload(),
        "feature_std": models.feature_std,
        "n_rows": len(X),
        "intersection": models.intersection.to_payload(),
    }


def refused(out: Shareable) -> str:
    assert out.get_return_code() == REFUSED
    assert protocol.PAYLOAD not in out  # nothing of the payload leaves
    return out[protocol.ERROR]


@pytest.mark.parametrize(
    "shareable, task, reason",
    [
        (reply([1, 2, 3]), "train", "not a fedforest payload"),
        (reply({"weights": np.ones(3)}), "train", "not a fedforest reply (format NoneType)"),
        (reply({"format": "nvflare/dxo", "data": 1}), "train", "not a fedforest reply"),
        (reply({}), "train", "not a fedforest reply"),
        (make_reply(ReturnCode.OK), "train", "carries no fedforest payload"),
        (Shareable({"DXO": {"data": 1}}), "train", "carries ['DXO'] besides"),
        (reply({"format": protocol.SITE_SCHEMA}), "train", "'train' task replies"),
        (reply({"format": protocol.MASK_SCORE, "version": 1}), "score_mask", "not a valid"),
    ],
)
def test_a_reply_that_is_no_fedforest_payload_is_refused(shareable, task, reason):
    out = PrivacyPolicyFilter(min_leaf_rows=5).process(shareable, ctx(task))
    message = refused(out)
    assert reason in message and f"refused the {task!r} reply" in message
    assert "site-2" in message


def test_an_off_grid_threshold_is_refused_and_the_reason_shows_no_value(table):
    payload = train_payload(table)
    forest = PooledForest.from_payload(payload["forest"])
    values = {repr(float(t)) for t in forest.threshold[forest.feature >= 0]}
    out = PrivacyPolicyFilter(threshold_grid={"step": 0.5}).process(reply(payload), ctx())
    message = refused(out)
    assert "split thresholds are off the threshold grid" in message
    assert "on 'a'" in message and "cannot snap a threshold without the site's rows" in message
    assert not any(v in message for v in values)
    # a grid without a rule for a feature is named
    out = PrivacyPolicyFilter(threshold_grid={"steps": {"a": 1}}).process(
        reply(train_payload(table)), ctx()
    )
    assert "the grid has no rule for ['b', 'c']" in refused(out)


def test_a_train_reply_is_pruned_stripped_and_withheld_to_comply(table):
    payload = train_payload(table)
    before = PooledForest.from_payload(payload["forest"])
    assert before.n_node_samples.min() < 20 and np.any(before.surrogate_feature >= 0)
    flt = PrivacyPolicyFilter(min_leaf_rows=20, share={"surrogates": False, "imputers": False})
    out = flt.process(reply(payload), ctx())
    assert out.get_return_code() == ReturnCode.OK
    sent = out[protocol.PAYLOAD]
    for part in ("forest", "intersection"):
        forest = PooledForest.from_payload(sent[part], sender="site-2")
        assert forest.n_node_samples.min() >= 20
        assert not np.any(forest.surrogate_feature >= 0)
        assert check_forest(forest, flt.policy) == []
    assert sent["imputers"]["imputers"] == [] and sent["feature_std"] == payload["feature_std"]
    # withheld std takes the numeric imputers with it; the intersection can be withheld
    out = PrivacyPolicyFilter(share={"feature_std": False, "intersection": False}).process(
        reply(train_payload(table)), ctx()
    )
    sent = out[protocol.PAYLOAD]
    assert sent["feature_std"] == {} and "intersection" not in sent
    assert all(imp["kind"] != "numeric" for imp in sent["imputers"]["imputers"])


def test_count_noise_keeps_every_node_above_k(table):
    flt = PrivacyPolicyFilter(min_leaf_rows=10, count_noise_epsilon=0.5)
    out = flt.process(reply(train_payload(table)), ctx())
    forest = PooledForest.from_payload(out[protocol.PAYLOAD]["forest"])
    assert forest.n_node_samples.min() >= 10


def test_a_forest_the_site_snapped_to_the_grid_passes_unchanged(table):
    grid = {"step": 0.5}
    site = PrivacyPolicy(min_leaf_rows=10, threshold_grid=ThresholdGrid(("step", 0.5)))
    payload = train_payload(table, privacy=site)
    out = PrivacyPolicyFilter(min_leaf_rows=10, threshold_grid=grid).process(reply(payload), ctx())
    assert out.get_return_code() == ReturnCode.OK
    sent = PooledForest.from_payload(out[protocol.PAYLOAD]["forest"])
    np.testing.assert_array_equal(
        sent.threshold, PooledForest.from_payload(payload["forest"]).threshold
    )
    # a categorical threshold between two codes is moved to the cut (routing unchanged)
    grade = sent.feature_names.index("grade")
    node = int(np.flatnonzero(sent.feature == grade)[0])
    threshold = sent.threshold.copy()
    threshold[node] = np.floor(sent.threshold[node]) + 0.25
    keys = ("feature_names", "classes", "owners", "categories", "tree_start", "tree_owner", "value")
    fields = {k: getattr(sent, k) for k in (*keys, *NODE_FIELDS) if k != "threshold"}
    payload["forest"] = PooledForest(threshold=threshold, **fields).to_payload()
    out = PrivacyPolicyFilter(min_leaf_rows=10, threshold_grid=grid).process(reply(payload), ctx())
    moved = PooledForest.from_payload(out[protocol.PAYLOAD]["forest"])
    assert moved.threshold[node] == sent.threshold[node] != threshold[node]


def test_every_tree_under_k_is_refused(table):
    out = PrivacyPolicyFilter(min_leaf_rows=10_000).process(reply(train_payload(table)), ctx())
    assert "every tree describes fewer than min_leaf_rows=10000 rows" in refused(out)


def test_the_other_replies_pass_when_they_comply(table):
    X, y = table
    frame = X.assign(outcome=y)
    schema = SiteSchema.from_frame("site-2", frame, "outcome", ["grade"]).to_payload()
    flt = PrivacyPolicyFilter(min_leaf_rows=20)
    assert flt.process(reply(schema), ctx("schema"))[protocol.PAYLOAD] is schema
    assert "from site 'site-2', but this is 'site-1'" in refused(
        flt.process(reply(schema), ctx("schema", site="site-1"))
    )
    vote = SiteVote("site-2", ["a", "b"], np.array([True, False]), np.array([0.9, 0.1]), 300)
    assert flt.process(reply(vote.to_payload()), ctx("vote")).get_return_code() == ReturnCode.OK
    small = SiteVote("site-2", ["a", "b"], np.array([True, False]), np.array([0.9, 0.1]), 12)
    assert "describes 12 rows, fewer than min_leaf_rows=20" in refused(
        flt.process(reply(small.to_payload()), ctx("vote"))
    )
    assert flt.process(reply({}), ctx("vote"))[protocol.PAYLOAD] == {}  # election off
    score = {"format": protocol.MASK_SCORE, "version": 1, "score": 0.7, "n_rows": 40}
    assert flt.process(reply(score), ctx("score_mask"))[protocol.PAYLOAD] is score
    metrics = {
        "format": protocol.SITE_METRICS,
        "version": protocol.FORMATS[protocol.SITE_METRICS],
        "site": "site-2",
        "rows": 50,
        "strategies": {
            "mp": {"auprc": 0.8, "rows": 50, "mean_trees_kept": 5.0, "fallback_rows": 0}
        },
        "privacy": PrivacyPolicy().to_dict(),
    }
    sent = flt.process(reply(metrics), ctx("evaluate"))[protocol.PAYLOAD]
    assert sent["strategies"] == metrics["strategies"]
    assert sent["privacy"]["min_leaf_rows"] == 20  # the policy that applied on the way out
    few = {**metrics, "rows": 9, "strategies": {"mp": {**metrics["strategies"]["mp"], "rows": 9}}}
    assert "(test rows) describes 9 rows" in refused(flt.process(reply(few), ctx("evaluate")))


def test_a_survival_schema_leaves_with_event_times_on_the_filters_resolution(tmp_path):
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "died": [0, 1, 1], "months": [3.0, 9.0, 14.0]})
    schema = SiteSchema.from_frame(
        "site-2", frame, "died", task="survival", time="months", event_times=[12.0, 190.0, 1500.0]
    ).to_payload()
    out = PrivacyPolicyFilter(time_resolution=30).process(reply(schema), ctx("schema"))
    assert out.get_return_code() == ReturnCode.OK
    assert out[protocol.PAYLOAD]["event_times"] == [0.0, 180.0, 1500.0]
    # a hospital's own file gives it too; of the file's and the argument's, the coarser
    path = tmp_path / "fedforest.yaml"
    path.write_text(yaml.safe_dump({"data_path": "x.csv", "privacy": {"time_resolution": 90}}))
    both = PrivacyPolicyFilter(policy_file=str(path), time_resolution=30)
    assert both.policy.time_resolution == 90
    assert both.process(reply(schema), ctx("schema"))[protocol.PAYLOAD]["event_times"] == [
        0.0,
        180.0,
        1530.0,
    ]


def test_dp_mode_refuses_replies_computed_on_the_rows(tmp_path):
    path = tmp_path / "fedforest.yaml"
    path.write_text(
        yaml.safe_dump({"privacy": {"dp_epsilon": 1.0, "feature_ranges": {"a": [0, 1]}}})
    )
    flt = PrivacyPolicyFilter(policy_file=str(path))
    score = {"format": protocol.MASK_SCORE, "version": 1, "score": 0.7, "n_rows": 40}
    assert "in DP mode a site scores every mask" in refused(
        flt.process(reply(score), ctx("score_mask"))
    )
    vote = SiteVote("site-2", ["a", "b"], np.array([True, False]), np.array([0.9, 0.1]), 300)
    assert "'none' selector" in refused(flt.process(reply(vote.to_payload()), ctx("vote")))


def test_an_error_reply_leaves_with_its_message_only():
    failed = make_reply(ReturnCode.EXECUTION_EXCEPTION)
    failed[protocol.ERROR] = "ValueError: the site cannot train"
    failed["debug"] = {"rows": [1, 2, 3]}
    out = PrivacyPolicyFilter(min_leaf_rows=5).process(failed, ctx())
    assert out.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    assert out[protocol.ERROR] == "ValueError: the site cannot train" and "debug" not in out


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"min_leaf_rows": 0}, "PrivacyPolicyFilter: argument 'min_leaf_rows' is 0"),
        ({"min_leaf_rows": "five"}, "argument 'min_leaf_rows' is 'five'"),
        ({"threshold_grid": {"stp": 1}}, "argument 'threshold_grid.stp'"),
        ({"threshold_grid": {"step": -1}}, "argument 'threshold_grid.step' is -1"),
        ({"count_noise_epsilon": 0}, "argument 'count_noise_epsilon' is 0"),
        ({"share": {"trees": False}}, "argument 'share.trees'"),
        ({"share": {"imputers": "no"}}, "argument 'share.imputers' is 'no'"),
        ({"policy_file": "/nonexistent/fedforest.yaml"}, "argument 'policy_file'"),
        ({"time_resolution": 0}, "argument 'time_resolution' is 0"),
        ({"time_resolution": "30d"}, "argument 'time_resolution' is '30d'"),
    ],
)
def test_the_arguments_are_checked_and_named(kwargs, message):
    with pytest.raises(ConfigError) as err:
        PrivacyPolicyFilter(**kwargs)
    assert message in str(err.value)


def test_a_yaml_file_gives_the_policy_and_the_arguments_tighten_it(tmp_path):
    path = tmp_path / "fedforest.yaml"
    path.write_text(yaml.safe_dump({"data_path": "x.csv", "privacy": {"min_leaf_rows": 8}}))
    assert PrivacyPolicyFilter(policy_file=str(path)).policy.min_leaf_rows == 8
    both = PrivacyPolicyFilter(policy_file=str(path), min_leaf_rows=3, share={"surrogates": False})
    assert both.policy.min_leaf_rows == 8 and both.policy.share["surrogates"] is False
    (tmp_path / "empty.yaml").write_text("data_path: x.csv\n")
    with pytest.raises(ConfigError, match="key 'privacy' is missing"):
        PrivacyPolicyFilter(policy_file=str(tmp_path / "empty.yaml"))


def test_the_exported_job_carries_the_filter_and_the_scope_only_when_asked(tmp_path):
    configs = write_configs(tmp_path, rows=60)
    plain = tmp_path / "plain"
    FedForestRecipe(configs).export(str(plain))
    job = next(plain.iterdir())
    assert "scope" not in json.loads((job / "meta.json").read_text())
    client = json.loads((job / "app_site-1/config/config_fed_client.json").read_text())
    assert not client.get("task_result_filters")
    flt = PrivacyPolicyFilter(min_leaf_rows=20, share={"surrogates": False})
    out = tmp_path / "filtered"
    FedForestRecipe(configs, privacy_filter=flt, scope="fedforest").export(str(out))
    job = next(out.iterdir())
    assert json.loads((job / "meta.json").read_text())["scope"] == "fedforest"
    for site in SITES:
        client = json.loads((job / f"app_{site}/config/config_fed_client.json").read_text())
        (chain,) = client["task_result_filters"]
        assert sorted(chain["tasks"]) == sorted(protocol.TASKS)
        (entry,) = chain["filters"]
        assert entry["path"] == FILTER
        assert entry["args"] == {"min_leaf_rows": 20, "share": {"surrogates": False}}
        # FLARE builds the same filter from these arguments
        assert PrivacyPolicyFilter(**entry["args"]).policy == flt.policy
    assert Path(job / "app_site-1/custom/fedforest/flare/privacy_filter.py").is_file()
