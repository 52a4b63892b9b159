"""fairseq 0.12 on the torch it runs on now: two fixes, applied when the package registers
with fairseq (``autoassist_fairseq.register``: so ``--user-dir`` applies them), without the
user setting anything.

Checkpoints: torch 2.6 made ``torch.load(weights_only=True)`` the default; fairseq 0.12 calls
``torch.load`` without that argument. Its checkpoint files pickle an
``argparse.Namespace`` (``args`` of older runs, ``cfg`` pieces of model configs), so
``fairseq-generate`` and resuming fail with an UnpicklingError; and a distributed resume
broadcasts the loaded checkpoint from rank 0 through ``torch.save``/``torch.load``, with
its config as omegaconf containers, so every other rank fails the same way. Rather than
turning the safe loader off, we add fairseq's own config types to its allow-list:
everything else keeps weights-only protection.

Exit: fairseq never destroys its process group. gloo's worker threads then outlive the
interpreter's finalisation, and a rank whose training is done can still abort at exit
(SIGABRT, "terminate called without an active exception"), which fails the whole launch.
Destroying the group while the interpreter is alive joins those threads first.
"""

import argparse
import atexit
import collections
import typing

import torch
from fairseq.distributed.utils import _TensorPlaceholder
from omegaconf import DictConfig, ListConfig
from omegaconf.base import ContainerMetadata, Metadata
from omegaconf.nodes import AnyNode, BooleanNode, FloatNode, IntegerNode, StringNode

_FAIRSEQ_CHECKPOINT_GLOBALS = [
    argparse.Namespace,
    # a loaded checkpoint as fairseq broadcasts it to the other ranks: its config, and
    # placeholders for the tensors sent apart
    _TensorPlaceholder, DictConfig, ListConfig, ContainerMetadata, Metadata, AnyNode, BooleanNode, FloatNode,
    IntegerNode, StringNode, typing.Any, dict, list, int, collections.defaultdict,
]


def allow_fairseq_checkpoints() -> None:
    add_safe_globals = getattr(torch.serialization, "add_safe_globals", None)
    if add_safe_globals is not None:  # torch < 2.4 loads everything anyway
        add_safe_globals(_FAIRSEQ_CHECKPOINT_GLOBALS)


allow_fairseq_checkpoints()


def destroy_gloo_process_group() -> None:
    """Only gloo's: an NCCL group cannot be torn down safely while a failed rank's
    collective may still be in flight, and torch only warns about it."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_backend() == "gloo":
        dist.destroy_process_group()


atexit.register(destroy_gloo_process_group)
