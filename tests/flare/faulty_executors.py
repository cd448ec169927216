"""Executors that rehearse faults; shipped into the job's custom/ folder by the tests."""

from __future__ import annotations

from fedforest.flare.executor import FedForestExecutor


class FailingTrainExecutor(FedForestExecutor):
    """Raises in the train phase, like a site whose disk filled up."""

    def run_task(self, task_name, data):
        if task_name == "train":
            raise RuntimeError("rehearsed fault: training crashed at this site")
        return super().run_task(task_name, data)


class MalformedTreeExecutor(FedForestExecutor):
    """Sends a tree whose root points at a node that does not exist."""

    def run_task(self, task_name, data):
        payload = super().run_task(task_name, data)
        if task_name == "train":
            payload["forest"]["children_left"][0] = 1_000_000
        return payload
