#!/usr/bin/env python3
"""Runs :mod:`autoassist_fairseq.prepare.spm_train_encode` of this checkout; its --help describes
the command, scripts/_prepare_module.py says why it is loaded from its file."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _prepare_module import load  # noqa: E402

if __name__ == "__main__":
    sys.exit(load("spm_train_encode").main())
