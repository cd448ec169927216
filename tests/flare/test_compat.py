"""The canary of NVIDIA FLARE's private internals (``fedforest.flare._compat``).

Each internal fedforest uses is imported (or, for a module that needs a
package FLARE does not require, such as ``mlflow``, read from its source) and
inspected: the attribute is there, the parameters fedforest passes are
still its parameters, the instance attributes it reads are still set. A
failure names the attribute, the module and the installed FLARE version. A
FLARE version not yet verified fails too, naming what to check. And no code
outside the compat module reaches a private internal.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from fedforest.flare import _compat
from fedforest.flare.job import _stage_package

ROOT = Path(__file__).resolve().parents[2]
#: Where fedforest's Python code is: none of it may reach FLARE's internals but the compat module.
CODE = ("src", "tests", "deploy", "benchmarks", "data_prep", "jobs")
ALLOWED = {
    ROOT / "src" / "fedforest" / "flare" / "_compat.py",
    Path(__file__).resolve(),
}


def test_the_installed_flare_is_a_verified_version():
    message = _compat.unverified_message()
    assert message is None, message


@pytest.mark.parametrize("internal", _compat.INTERNALS, ids=lambda i: i.attribute)
def test_each_private_internal_is_where_fedforest_expects_it(internal):
    problems = _compat.probe(internal)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("internal", _compat.SUBCLASSED, ids=lambda i: i.attribute)
def test_the_attributes_of_subclassed_flare_classes_are_still_set(internal):
    problems = _compat.probe(internal)
    assert not problems, "\n".join(problems)


def test_a_moved_internal_is_named_with_its_module_and_the_flare_version():
    version = _compat.flare_version()
    gone = _compat.Internal("nvflare.recipe.poc_env", "PocEnv._renamed", "here", "a reason")
    (problem,) = _compat.probe(gone)
    assert problem.startswith(f"NVIDIA FLARE {version}: nvflare.recipe.poc_env.PocEnv has no ")
    assert "'_renamed'" in problem and "here (a reason)" in problem
    assert _compat.CANARY in problem
    with pytest.raises(_compat.FlareCompatError, match="has no attribute '_renamed'"):
        _compat.resolve(gone)
    module = _compat.Internal("nvflare.private.moved_away", "Thing", "here", "why")
    (problem,) = _compat.probe(module)
    assert "module nvflare.private.moved_away cannot be imported" in problem


def test_changed_parameters_are_named():
    version = _compat.flare_version()
    changed = _compat.Internal(
        "nvflare.tool.poc.poc_commands",
        "_start_poc",
        "here",
        "why",
        parameters=("poc_workspace", "gpus"),
        keywords=True,
    )
    (problem,) = _compat.probe(changed)
    assert problem.startswith(f"_start_poc of nvflare.tool.poc.poc_commands (FLARE {version}): ")
    assert "fedforest passes gpus by name" in problem
    hook = _compat.Internal(
        "nvflare.private.fed.app.simulator.simulator_runner",
        "SimulatorRunner._setup_local_startup",
        "here",
        "why",
        parameters=("self", "log_config_file_path"),
    )
    (problem,) = _compat.probe(hook)  # FLARE passes one more, without a default
    assert "fedforest relies on ('self', 'log_config_file_path')" in problem


def test_an_attribute_no_longer_set_is_named():
    gone = _compat.Internal("nvflare.recipe.sim_env", "SimEnv", "here", "why", attributes=("nope",))
    (problem,) = _compat.probe(gone)
    assert problem.endswith("SimEnv.__init__ no longer sets nope")


def test_an_unverified_version_names_every_internal_and_the_canary(monkeypatch, caplog):
    message = _compat.unverified_message("2.10.0")
    assert "verified on " + ", ".join(_compat.VERIFIED_FLARE) in message
    assert "the installed FLARE is 2.10.0" in message and _compat.CANARY in message
    for internal in (*_compat.INTERNALS, *_compat.SUBCLASSED):
        assert internal.name in message
    assert _compat.unverified_message(_compat.VERIFIED_FLARE[0]) is None
    monkeypatch.setattr(_compat, "flare_version", lambda: "2.10.0")
    monkeypatch.setattr(_compat, "_checked", [])
    with caplog.at_level(logging.WARNING, logger=_compat.__name__):
        assert _compat.check_version() == message
        assert _compat.check_version() == message  # warned once only
    assert [r.getMessage() for r in caplog.records] == [message]


def test_the_job_ships_the_compat_module(tmp_path):
    stage = _stage_package(tmp_path)
    assert (stage / "fedforest" / "flare" / "_compat.py").is_file()


def _python_files():
    """The project's own Python files: not the copies a built job carries in its ``custom/``."""
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.resolve() in ALLOWED or {"__pycache__", "custom"} & set(
                path.relative_to(ROOT).parts
            ):
                continue
            yield path


#: The private attribute names of the internals (``_start_poc``, ``_get_session_manager``, ...).
PRIVATE_NAMES = {
    i.attribute.rsplit(".", 1)[-1]
    for i in _compat.INTERNALS
    if i.attribute.rsplit(".", 1)[-1].startswith("_")
}


def test_no_code_outside_the_compat_module_reaches_flare_internals():
    found = []
    for path in _python_files():
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            line = getattr(node, "lineno", "?")
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module or ""]
                if (node.module or "").startswith("nvflare"):
                    private = [a.name for a in node.names if a.name.startswith("_")]
                    found += [f"{where}:{line} imports {n} from {node.module}" for n in private]
            found += [
                f"{where}:{line} imports {m}" for m in modules if m.startswith("nvflare.private")
            ]
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE_NAMES:
                found.append(f"{where}:{line} uses {node.attr}")
            if isinstance(node, ast.FunctionDef) and node.name in PRIVATE_NAMES:
                found.append(f"{where}:{line} overrides {node.name}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "nvflare.private" in node.value and "import" in node.value:
                    found.append(f"{where}:{line} imports nvflare.private in a string")
    assert not found, "use fedforest.flare._compat instead:\n" + "\n".join(found)
