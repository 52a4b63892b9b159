"""The package's layout: what ``--user-dir`` imports, and the import graph of its parts.

``fairseq-train --user-dir autoassist_fairseq`` and ``fairseq-generate --user-dir`` import
the package through ``fairseq.utils.import_user_module``. They load the Boss's path alone:
none of the features' build, the checks' fitting, the evaluation or the raw-text tools.
``import fairseq`` itself imports scikit-learn (``sklearn``, ``sklearn.metrics``,
``sklearn.preprocessing``: fairseq's tasks/audio_classification.py and
criterions/sentence_prediction.py), so scikit-learn cannot be absent; what the test asserts
is that the plugin adds no scikit-learn module to those fairseq loaded (among them
``sklearn.decomposition``, ``sklearn.naive_bayes`` and ``sklearn.feature_extraction``, which
the pair checks fit with and fairseq does not import).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "autoassist_fairseq"
# modules (and subpackages, with their modules) that the Boss's path must not import
NOT_ON_THE_BOSS_PATH = (
    "autoassist_fairseq.features.pair_checks", "autoassist_fairseq.features.build",
    "autoassist_fairseq.features.langid_check", "autoassist_fairseq.features.lexical",
    "autoassist_fairseq.features.check_report", "autoassist_fairseq.features.tfidf",
    "autoassist_fairseq.features.filter", "autoassist_fairseq.tools",
    "autoassist_fairseq.prepare", "autoassist_fairseq.diagnose")

_IMPORT_AS_USER_DIR = """
import json, sys
from argparse import Namespace
import fairseq
from fairseq import utils
before = set(sys.modules)
utils.import_user_module(Namespace(user_dir=sys.argv[1]))
print(json.dumps({"fairseq": sorted(before), "plugin": sorted(set(sys.modules) - before)}))
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

