"""The package's layout: what ``--user-dir`` imports, and the import graph of its parts.

``fairseq-train --user-dir autoassist_fairseq`` and ``fairseq-generate --user-dir`` import
the package through ``fairseq.utils.import_user_module``, after fairseq: the package registers
the task, ``rex`` and ``compat`` then; imported before fairseq (the raw-text tools), it
imports neither torch nor fairseq and registers when asked. They load the Boss's path alone:
none of the features' build, the checks' fitting, the evaluation or the raw-text tools.
``import fairseq`` itself imports scikit-learn (``sklearn``, ``sklearn.metrics``,
``sklearn.preprocessing``: fairseq's tasks/audio_classification.py and
criterions/sentence_prediction.py), so scikit-learn cannot be absent; what the test asserts
is that the plugin adds no scikit-learn module to those fairseq loaded (among them
``sklearn.naive_bayes`` and ``sklearn.feature_extraction``, which the pair checks fit with and
fairseq does not import).
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "autoassist_fairseq"
# modules (and subpackages, with their modules) that the Boss's path must not import
NOT_ON_THE_BOSS_PATH = tuple(f"autoassist_fairseq.{name}" for name in (
    "checks.columns", "checks.language", "checks.unrelated", "checks.langid",
    "checks.lexical", "checks.scripts", "checks.digits", "checks.words",
    "features.build", "features.tfidf",
    "tools", "prepare", "diagnose"))

# what registering with fairseq gives (autoassist_fairseq.register): the task, the rex
# schedule, compat's checkpoint types on torch's allow-list
_REGISTERED = """
def registered():
    import argparse, torch
    from fairseq.optim.lr_scheduler import LR_SCHEDULER_REGISTRY
    from fairseq.tasks import TASK_REGISTRY
    safe = getattr(torch.serialization, "get_safe_globals", lambda: [argparse.Namespace])()
    return {"task": "autoassist_translation" in TASK_REGISTRY,
            "rex": "rex" in LR_SCHEDULER_REGISTRY, "compat": argparse.Namespace in safe}
"""

_IMPORT_AS_USER_DIR = _REGISTERED + """
import json, sys
from argparse import Namespace
import fairseq
from fairseq import utils
before = set(sys.modules)
utils.import_user_module(Namespace(user_dir=sys.argv[1]))
print(json.dumps({"fairseq": sorted(before), "plugin": sorted(set(sys.modules) - before),
                  "registered": registered()}))
"""


def test_user_dir_import_loads_no_feature_building_code():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", _IMPORT_AS_USER_DIR, str(PACKAGE)],
                          cwd=REPO.parent, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    modules = json.loads(proc.stdout.strip().splitlines()[-1])
    plugin = modules["plugin"]
    assert "autoassist_fairseq.tasks.autoassist_translation" in plugin  # the import happened
    assert "autoassist_fairseq.features.store" in plugin
    loaded = [m for m in plugin if any(m == name or m.startswith(name + ".")
                                       for name in NOT_ON_THE_BOSS_PATH)]
    assert loaded == []
    assert [m for m in plugin if m == "sklearn" or m.startswith("sklearn.")] == []
    # what fairseq loads itself: the premise of the docstring
    assert "sklearn.metrics" in modules["fairseq"]
    assert modules["registered"] == {"task": True, "rex": True, "compat": True}


_TOOL_FIRST = _REGISTERED + """
import json, sys
import autoassist_fairseq.tools.score_pairs
loaded = sorted(m for m in ("torch", "fairseq") if m in sys.modules)
import autoassist_fairseq
before = registered()  # imports fairseq: too late for the package's own import
autoassist_fairseq.register()
after = registered()
autoassist_fairseq.register()  # a second call: nothing more to do
print(json.dumps({"loaded_by_the_tool": loaded, "before": before, "after": after}))
"""


def test_a_tool_imports_neither_torch_nor_fairseq_and_register_registers_after_it():
    """The raw-text tools need neither torch nor fairseq: imported first, the package does not
    import them, so it registers nothing; ``autoassist_fairseq.register()`` then registers
    the task and ``rex`` and applies ``compat`` (what a script that imports the package
    before running fairseq calls, and the package's checkpoint-loading commands do)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", _TOOL_FIRST], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "loaded_by_the_tool": [], "before": {"task": False, "rex": False, "compat": False},
        "after": {"task": True, "rex": True, "compat": True}}


def _part(module: str):
    """The part of the package a module belongs to: its subpackage, or its top-level module
    (``autoassist_fairseq.data.plan`` -> ``data``; ``autoassist_fairseq.losses`` ->
    ``losses``); None for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _imported_modules(path: Path, module: str):
    """The package's modules that a file imports, at any depth (a function's import too)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[:len(module.split(".")) + is_package - node.level]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "autoassist_fairseq":  # from autoassist_fairseq import x
                yield from (f"{target}.{alias.name}" for alias in node.names)
            elif target.startswith("autoassist_fairseq."):
                yield target
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("autoassist_fairseq."))


def import_graph():
    """part -> {imported part -> [(importing module, line)]} over the package's sources."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        module = module[:-len(".__init__")] if module.endswith(".__init__") else module
        for target in _imported_modules(path, module):
            source, imported = _part(module), _part(target)
            if source and imported and source != imported:
                graph.setdefault(source, {}).setdefault(imported, []).append(module)
    return graph


def cycles(graph):
    """The strongly connected components of more than one part (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, {}):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycles_finds_a_cycle_of_three_parts():
    graph = {"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": []}, "b": {}}) == []


def test_no_import_cycle_between_the_packages_parts():
    graph = import_graph()
    assert "transport" in graph.get("tasks", {})  # the graph is read: a known edge
    found = cycles(graph)
    detail = {" <-> ".join(c): {a: {b: sorted(set(graph[a][b])) for b in graph[a] if b in c}
                                for a in c} for c in found}
    assert found == [], detail
