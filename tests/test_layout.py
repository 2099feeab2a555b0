"""The package layout the README draws: one package per pipeline stage, each with a public face.

Read from the source with ``ast`` (nothing is imported but the faces): the stages import each other
only downwards in ``STAGES`` order, only through a face (``from netlist2tf.compile import plan_model``),
never a private name of another stage; the library never imports the CPU application; every name a
face lists exists in the module it names; and the build folder of a source checkout is its build/.
"""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "netlist2tf"
# the pipeline, lowest first: a stage may import the stages before it, never one after it
STAGES = ["common", "netlist", "frontend", "sim", "gadgets", "compile", "weights", "checkpoint", "merge", "serve", "run",
          "report"]
TOP = ["driver", "cliutil", "cli"]             # netlist2tf/*.py: above every stage


def _imports(path: Path):
    """(module, names, line) of every ``netlist2tf`` / ``cpu`` import in ``path``, relative ones resolved."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module, [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], node.lineno


def _stage(path: Path) -> str:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 else path.stem


def _library_files():
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_belongs_to_a_stage_or_the_top():
    for path in _library_files():
        rel = path.relative_to(PKG).parts
        assert (len(rel) == 1 and path.stem in TOP + ["__init__"]) or rel[0] in STAGES, \
            f"{path.relative_to(ROOT)} is in no stage package of the README's picture"


def test_stages_import_only_downwards_through_the_faces():
    problems = []
    for path in _library_files():
        mine = _stage(path)
        for module, names, line in _imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            parts = module.split(".")
            if parts[0] == "cpu":
                problems.append(f"{where}: the library imports the CPU application ({module})")
            if parts[0] != "netlist2tf" or len(parts) < 2:
                continue
            theirs = parts[1]
            if theirs == mine or theirs not in STAGES:
                if mine in STAGES and theirs in TOP:
                    problems.append(f"{where}: stage {mine} imports the top level ({module})")
                continue
            if mine in STAGES and STAGES.index(theirs) > STAGES.index(mine):
                problems.append(f"{where}: stage {mine} imports the later stage {theirs}")
            if len(parts) > 2 and not (theirs == "common" and parts[2] == "lazy"):
                problems.append(f"{where}: reaches into {module} instead of the face netlist2tf.{theirs}")
            problems += [f"{where}: imports the private name {n} of {theirs}" for n in names if n.startswith("_")]
    assert not problems, "\n".join(problems)


def _face(stage: str) -> dict:
    tree = ast.parse((PKG / stage / "__init__.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "public":
            return ast.literal_eval(node.args[1])
    return {}


@pytest.mark.parametrize("stage", STAGES)
def test_each_face_names_what_its_modules_define(stage):
    face = _face(stage)
    assert face, f"netlist2tf/{stage}/__init__.py names no public face"
    package = importlib.import_module(f"netlist2tf.{stage}")
    for module, names in face.items():
        mod = importlib.import_module(f"netlist2tf.{stage}.{module}")
        for name in names:
            assert getattr(package, name) is getattr(mod, name), f"netlist2tf.{stage}.{name}"
    assert sorted(dir(package)) == sorted(n for names in face.values() for n in names)
    with pytest.raises(AttributeError):
        getattr(package, "no_such_name")


def test_a_source_checkout_builds_into_its_build_folder(monkeypatch):
    from netlist2tf.common import ENV, build_dir

    monkeypatch.delenv(ENV, raising=False)
    assert build_dir() == ROOT / "build"
