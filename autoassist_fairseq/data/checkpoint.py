"""The iterator's checkpoint state in a form fairseq checkpoints can hold.

fairseq checkpoints are read with torch's weights-only unpickler (torch >= 2.6), which
refuses numpy objects: arrays travel as tensors and numpy scalars as Python numbers.
"""

import numpy as np
import torch


def to_checkpoint(obj):
    """numpy arrays -> torch tensors, numpy scalars -> Python numbers, recursively."""
    if isinstance(obj, dict):
        return {k: to_checkpoint(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_checkpoint(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def from_checkpoint(obj):
    """The inverse of :func:`to_checkpoint`."""
    if isinstance(obj, dict):
        return {k: from_checkpoint(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_checkpoint(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    return obj
