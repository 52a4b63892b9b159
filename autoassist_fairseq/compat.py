"""Load fairseq checkpoints with torch >= 2.6, without the user setting anything.

torch 2.6 made ``torch.load(weights_only=True)`` the default; fairseq 0.12 calls
``torch.load`` without that argument, and its checkpoints pickle an
``argparse.Namespace`` (``args`` of older runs, ``cfg`` pieces of model configs), so
``fairseq-generate`` and resuming fail with an UnpicklingError. Rather than turning the
safe loader off, we add fairseq's own config types to its allow-list: everything else
keeps weights-only protection. Imported by the package, so ``--user-dir`` applies it.
"""

import argparse

import torch

_FAIRSEQ_CHECKPOINT_GLOBALS = [argparse.Namespace]


def allow_fairseq_checkpoints() -> None:
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:  # torch < 2.4 loads everything anyway
        add_safe_globals(_FAIRSEQ_CHECKPOINT_GLOBALS)


allow_fairseq_checkpoints()
