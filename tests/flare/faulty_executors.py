"""Executors that rehearse faults; shipped into the job's custom/ folder by the tests."""

from __future__ import annotations

import time

import numpy as np

from fedforest import PooledForest, protocol
from fedforest.flare.executor import FedForestExecutor
from fedforest.flare.swarm import FedForestSwarmExecutor
from fedforest.model.forest import NODE_FIELDS


class FailingTrainExecutor(FedForestExecutor):
    """Raises in the train phase, like a site whose disk filled up."""

    def run_task(self, task_name, data):
        if task_name == "train":
            raise RuntimeError("rehearsed fault: training crashed at this site")
        return super().run_task(task_name, data)


class MalformedTreeExecutor(FedForestExecutor):
    """Sends trees whose leaf flags do not describe trees (the first root made a leaf)."""

    def run_task(self, task_name, data):
        payload = super().run_task(task_name, data)
        if task_name == "train":
            payload["forest"]["leaf_bits"][0] ^= 0x80
        return payload


def _first_imputer(payload):
    return payload["imputers"]["imputers"][0]


def _bigger_child(payload):
    """A forest whose first root's left child claims more training rows than the root."""
    forest = PooledForest.from_payload(payload["forest"])
    n = forest.n_node_samples.copy()
    n[forest.children_left[0]] = n[0] + 5
    fields = {k: getattr(forest, k) for k in NODE_FIELDS if k != "n_node_samples"}
    keys = ("feature_names", "classes", "owners", "categories", "tree_start", "tree_owner", "value")
    fields.update({k: getattr(forest, k) for k in keys})
    payload["forest"] = PooledForest(n_node_samples=n, **fields).to_payload()


#: What a hostile site does to its honest reply: (phase, change). A change edits the
#: payload in place or returns a replacement.
ATTACKS = {
    "schema_format_array": ("schema", lambda p: p.update(format=np.array([p["format"]]))),
    "schema_reply_list": ("schema", lambda p: [1, 2, 3]),
    "vote_scores_none": ("vote", lambda p: p.update(scores=None)),
    "forest_leaf_bits_none": ("train", lambda p: p["forest"].update(leaf_bits=None)),
    "forest_saw_missing_none": ("train", lambda p: p["forest"].update(saw_missing=None)),
    "forest_child_bigger_than_parent": ("train", _bigger_child),
    "imputer_kind_array": ("train", lambda p: _first_imputer(p).update(kind=np.array(["x"]))),
    "imputer_levels_none": ("train", lambda p: _first_imputer(p).update(levels=None)),
    "intersection_value_none": ("train", lambda p: p["intersection"].update(value=None)),
    "metrics_garbage": ("evaluate", lambda p: p["strategies"].update(mp="excellent")),
}


class HostileExecutor(FedForestExecutor):
    """A site that sends one malformed payload, as a malicious participant would.

    Parameters
    ----------
    attack : str
        A key of :data:`ATTACKS`.
    """

    def __init__(self, site_config: str = "fedforest_site.yaml", attack: str = "schema_reply_list"):
        super().__init__(site_config=site_config)
        self.attack = attack

    def run_task(self, task_name, data):
        payload = super().run_task(task_name, data)
        phase, change = ATTACKS[self.attack]
        if task_name == phase:
            replaced = change(payload)
            return payload if replaced is None else replaced
        return payload


class SlowExecutor(FedForestExecutor):
    """Takes ``delay`` extra seconds in one task, like a hospital with a large table."""

    def __init__(self, site_config: str = "fedforest_site.yaml", task: str = "train", delay=5.0):
        super().__init__(site_config=site_config)
        self.task = task
        self.delay = delay

    def execute(self, task_name, shareable, fl_ctx, abort_signal):
        if task_name == self.task:
            end = time.monotonic() + float(self.delay)
            while time.monotonic() < end and not abort_signal.triggered:
                time.sleep(0.1)
        return super().execute(task_name, shareable, fl_ctx, abort_signal)


class FailingTrainSwarmExecutor(FedForestSwarmExecutor):
    """Swarm mode: raises in the train phase, like a site whose disk filled up."""

    def run_task(self, task_name, data, save_dir=None):
        if task_name == protocol.TRAIN:
            raise RuntimeError("rehearsed fault: training crashed at this site")
        return super().run_task(task_name, data, save_dir=save_dir)
