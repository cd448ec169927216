"""The numba kernels' on-disk cache: one folder per machine, shared by every copy of the code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedforest.prediction import kernel_cache

pytest.importorskip("numba")

SRC = Path(kernel_cache.__file__).resolve().parents[1]

# A job's copy of fedforest predicts with the numba kernels and reports numba's cache counters.
SCRIPT = r"""
import json, logging, sys
sys.path.insert(0, sys.argv[1])
logging.basicConfig(level=logging.WARNING)
import numpy as np, pandas as pd
from sklearn.ensemble import RandomForestClassifier
import fedforest
from fedforest import PooledForest, PooledForestClassifier
from fedforest.prediction import numba_kernels as nk
rng = np.random.default_rng(0)
X = pd.DataFrame(rng.normal(size=(300, 4)), columns=list("abcd"))
y = (X.a + X.c > 0).astype(int)
forest = PooledForest.from_sklearn(
    RandomForestClassifier(10, random_state=0).fit(X, y), list("abcd"), owner="s"
)
out = {}
for engine in ("numba", "numpy"):
    clf = PooledForestClassifier(forest, strategy="mp", engine=engine, random_state=0)
    out[engine] = clf.predict_proba(X[["a", "b"]]).tolist()
stats = nk._marginal_rows.stats
print(json.dumps({
    "file": fedforest.__file__, "disk_cache": nk.DISK_CACHE, "same": out["numba"] == out["numpy"],
    "hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
}))
"""


def job_copy(root: Path, name: str) -> Path:
    """fedforest copied as a job ships it (a ``custom/`` folder of its own)."""
    custom = root / name / "custom"
    shutil.copytree(SRC, custom / "fedforest", ignore=shutil.ignore_patterns("__pycache__"))
    return custom


def run_copy(custom: Path, cache: str | None) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k != kernel_cache.ENV}
    if cache is not None:
        env[kernel_cache.ENV] = cache
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(custom)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_cache_root_follows_the_environment():
    assert kernel_cache.cache_root({kernel_cache.ENV: "/srv/site-1/cache"}) == Path(
        "/srv/site-1/cache"
    )
    for off in ("off", "OFF", "", "  "):
        assert kernel_cache.cache_root({kernel_cache.ENV: off}) is None
    assert kernel_cache.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/fedforest/kernels")
    home = Path(os.path.expanduser("~"))
    assert kernel_cache.cache_root({}) == home / ".cache" / "fedforest" / "kernels"


def test_the_key_changes_with_the_sources(tmp_path, monkeypatch):
    key = kernel_cache.source_key()
    assert key == kernel_cache.source_key() and len(key) == 24
    copy = tmp_path / "prediction"
    copy.mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "rules").mkdir()
    for name in kernel_cache.SOURCES:
        shutil.copy(kernel_cache._HERE / name, copy / name)
    monkeypatch.setattr(kernel_cache, "_HERE", copy)
    assert kernel_cache.source_key() == key  # the content, not the place
    with open(copy / "routing.py", "a") as f:
        f.write("\n# changed\n")
    assert kernel_cache.source_key() != key


def test_a_second_job_loads_the_kernels_the_first_compiled(tmp_path):
    cache = tmp_path / "site cache"
    first, _ = run_copy(job_copy(tmp_path, "job-1"), str(cache))
    second, _ = run_copy(job_copy(tmp_path, "job-2"), str(cache))
    assert first["file"] != second["file"] and "job-2" in second["file"]
    assert first["disk_cache"] and second["disk_cache"]
    assert first["misses"] > 0
    assert second["hits"] > 0 and second["misses"] == 0
    assert first["same"] and second["same"]
    folders = [p for p in cache.iterdir() if p.is_dir()]
    assert [p.name for p in folders] == [kernel_cache.source_key()]
    assert any(p.suffix == ".nbi" for p in folders[0].iterdir())
    # nothing is written into the job's own folder
    assert not list((tmp_path / "job-2").rglob("*.nbi"))


@pytest.mark.parametrize("kind", ["unwritable", "off"])
def test_without_a_usable_cache_the_kernels_compile_in_memory(tmp_path, kind):
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    cache = str(blocker / "cache") if kind == "unwritable" else "off"
    result, stderr = run_copy(job_copy(tmp_path, "job"), cache)
    assert result["disk_cache"] is False
    assert result["same"] and result["hits"] == 0
    if kind == "unwritable":
        assert "cannot write the numba kernel cache" in stderr and kernel_cache.ENV in stderr
        assert str(blocker) in stderr
    assert not list(tmp_path.rglob("*.nbi"))


def test_a_numba_without_cache_locators_compiles_in_memory(tmp_path, monkeypatch, caplog):
    import numba
    from numba.core import caching

    for name in ("CacheImpl", "_CacheImpl"):
        monkeypatch.delattr(caching, name, raising=False)
    with caplog.at_level("WARNING", logger=kernel_cache.__name__):
        assert kernel_cache.install({kernel_cache.ENV: str(tmp_path)}) is False
    assert f"numba {numba.__version__} has no cache locators" in caplog.text
