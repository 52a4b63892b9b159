#!/usr/bin/env python
"""What skipping costs: the ``autoassist-diagnose`` command, kept under its old name.

    python scripts/diagnose_assistant.py --data work/multi30k \\
        --checkpoint OUT/autoassist-s1/checkpoints/checkpoint12.pt [--out FILE.json]

The code lives in ``autoassist_fairseq/diagnose.py``; run ``autoassist-diagnose --help``
(or this script with ``--help``) for the figures, the verdict and the options.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autoassist_fairseq.diagnose import cli_main, oracle_skipped_loss, skip_figures  # noqa: E402,F401

if __name__ == "__main__":
    cli_main()
