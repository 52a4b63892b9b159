#!/usr/bin/env python3
"""Runs :mod:`autoassist_fairseq.prepare.spm_train_encode` (its --help describes the command).

The module is loaded from this checkout's file rather than imported through the package:
importing ``autoassist_fairseq`` loads fairseq and torch to register the task, seconds that
every step of scripts/prepare-corpus.sh would pay, while the module itself needs neither.
"""

import importlib.util
import sys
from pathlib import Path

_MODULE = (Path(__file__).resolve().parents[1] / "autoassist_fairseq" / "prepare"
           / "spm_train_encode.py")


def load():
    """The module :mod:`autoassist_fairseq.prepare.spm_train_encode` of this checkout."""
    spec = importlib.util.spec_from_file_location("_autoassist_prepare_spm_train_encode", _MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(load().main())
