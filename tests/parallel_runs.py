"""How the suite runs on several pytest-xdist workers (a pytest plugin, see tests/conftest.py).

``make test`` runs ``pytest -n logical`` with ``--dist loadgroup`` (pyproject.toml):
tests in one ``xdist_group`` run on one worker, one after the other.

* **Groups.** Tests that share an instance of a module-, class- or
  package-scoped fixture join one group, so that fixture is made once; a test
  with an ``xdist_group`` mark brings its group along (``flare_setup.DEMO_RUNS``:
  the tests reading the session's simulator runs of the demo configs, among
  them the POC and production tests, whose fixed ports must never be used by
  two tests at once).
* **Order.** The real FLARE runs (``flare`` marker) go first, groups before
  single tests: they are the longest, and the short tests fill the end. Each
  worker sorts its collection alike. A worker running a FLARE test is given
  no other FLARE test to queue behind it, only short tests (a worker needs its
  next test before it starts its last one).
* **Scheduler.** pytest-xdist 3.8 passes a test's group to the scheduler by
  appending ``@<group>`` to its node id, which pytest 9.2's structured node ids
  no longer allow (pytest-xdist issue 1386: the groups are silently ignored).
  So each worker also writes a table of its tests' groups to a folder the
  controller gives it, and :class:`GroupScheduling` (xdist's
  ``LoadGroupScheduling`` reading that table) keeps the groups on every
  version.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

#: ``workerinput`` key: the folder where workers write their group tables.
GROUPS_DIR = "fedforest_xdist_groups"
_groups_dir = pytest.StashKey[str]()
_WIDE_SCOPES = ("module", "class", "package")


def _shared_fixture_keys(item) -> list[tuple]:
    """The instances of the module-, class- and package-scoped fixtures ``item`` uses."""
    keys = []
    for name in item.fixturenames:
        fixturedefs = item._fixtureinfo.name2fixturedefs.get(name)
        if not fixturedefs or fixturedefs[-1].scope not in _WIDE_SCOPES:
            continue
        scope = fixturedefs[-1].scope
        if scope == "module":
            keys.append((scope, str(item.path), name))
        elif scope == "class":
            keys.append((scope, str(item.path), getattr(item.cls, "__name__", ""), name))
        else:
            keys.append((scope, str(item.path.parent), name))
    return keys


def group_of(item) -> str | None:
    """The name of the ``xdist_group`` of ``item``, if it has one."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks
def pytest_collection_modifyitems(config, items):
    """Group the tests sharing a fixture instance or a mark; under xdist, longest work first."""
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple, int] = {}
    for i, item in enumerate(items):
        group = group_of(item)
        for key in _shared_fixture_keys(item) + ([("mark", group)] if group else []):
            parent[root(i)] = root(owner.setdefault(key, i))
    members: dict[int, list[int]] = {}
    for i in range(len(items)):
        members.setdefault(root(i), []).append(i)
    for indices in members.values():
        marked = sorted({g for i in indices if (g := group_of(items[i])) is not None})
        if marked:
            name = marked[0]
        elif len(indices) > 1:  # named after the first shared fixture: unique in the session
            first = items[indices[0]]
            name = f"{first.nodeid.split('::')[0]}::{_shared_fixture_keys(first)[0][-1]}"
        else:
            continue
        for i in indices:
            if group_of(items[i]) is None:
                items[i].add_marker(pytest.mark.xdist_group(name))
    if hasattr(config, "workerinput"):

        def rank(item) -> int:
            grouped = group_of(item) is not None
            if item.get_closest_marker("flare"):
                return 0 if grouped else 1
            return 2 if grouped else 3

        items.sort(key=rank)


@pytest.hookimpl(tryfirst=True)  # written before pytest-xdist reports the collection
def pytest_collection_finish(session):
    folder = getattr(session.config, "workerinput", {}).get(GROUPS_DIR)
    if folder is None:
        return
    table = {
        item.nodeid: {"group": group_of(item), "flare": bool(item.get_closest_marker("flare"))}
        for item in session.items
        if group_of(item) is not None or item.get_closest_marker("flare")
    }
    worker = session.config.workerinput["workerid"]
    path = Path(folder) / f"{worker}.json"
    path.with_suffix(".tmp").write_text(json.dumps(table))
    path.with_suffix(".tmp").replace(path)


# ------------------------------------------------------------------ controller
@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Give each worker the folder for its group table."""
    stash = node.config.stash
    if _groups_dir not in stash:
        stash[_groups_dir] = tempfile.mkdtemp(prefix="fedforest-xdist-groups-")
    node.workerinput[GROUPS_DIR] = stash[_groups_dir]


def pytest_unconfigure(config):
    if _groups_dir in config.stash:
        shutil.rmtree(config.stash[_groups_dir], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None  # pytest-xdist's own scheduler
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):
        """``LoadGroupScheduling`` that reads the workers' tables (see the module docstring)."""

        _table: dict[str, dict] | None = None

        def _entry(self, nodeid: str) -> dict:
            if self._table is None:
                self._table = {}
                folder = config.stash.get(_groups_dir, None)
                for path in sorted(Path(folder).glob("*.json")) if folder else []:
                    self._table.update(json.loads(path.read_text()))
            return self._table.get(nodeid, {})

        def _split_scope(self, nodeid: str) -> str:
            group = self._entry(nodeid).get("group")
            return f"group:{group}" if group is not None else super()._split_scope(nodeid)

        def _is_flare(self, nodeids) -> bool:
            return any(self._entry(nodeid).get("flare") for nodeid in nodeids)

        def _reschedule(self, node) -> None:
            pending = [
                nodeid
                for work_unit in self.assigned_work.get(node, {}).values()
                for nodeid, done in work_unit.items()
                if not done
            ]
            if node.shutting_down or not self.workqueue or not self._is_flare(pending):
                super()._reschedule(node)
            elif len(pending) == 1:
                # a worker starts its last test only once it has the next one: give it short
                # work, and leave the FLARE tests in the queue to a worker that is free
                for scope, work_unit in self.workqueue.items():
                    if not self._is_flare(work_unit):
                        self.workqueue.move_to_end(scope, last=False)
                        break
                self._assign_work_unit(node)

    return GroupScheduling(config, log)
