"""Loads a module of ``autoassist_fairseq/prepare`` from this checkout's file, for the
scripts that wrap one (clean_corpus.py, spm_train_encode.py).

The module is loaded from its file rather than imported through the package: importing
``autoassist_fairseq`` loads fairseq and torch to register the task, seconds that every step
of scripts/prepare-corpus.sh would pay, while the module itself needs neither.
"""

import importlib.util
from pathlib import Path

_PREPARE = Path(__file__).resolve().parents[1] / "autoassist_fairseq" / "prepare"


def load(name: str):
    """The module :mod:`autoassist_fairseq.prepare.<name>` of this checkout."""
    spec = importlib.util.spec_from_file_location(f"_autoassist_prepare_{name}",
                                                  _PREPARE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
