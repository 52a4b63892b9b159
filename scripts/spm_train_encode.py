#!/usr/bin/env python3
"""Runs :mod:`autoassist_fairseq.prepare.spm_train_encode` of this checkout; its --help describes the
command. Importing the package loads neither torch nor fairseq (it registers with fairseq
only where fairseq is imported already), so each step of scripts/prepare-corpus.sh starts fast."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package first
from autoassist_fairseq.prepare import spm_train_encode  # noqa: E402

if __name__ == "__main__":
    sys.exit(spm_train_encode.main())
