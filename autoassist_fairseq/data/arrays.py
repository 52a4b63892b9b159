"""numpy <-> torch for the iterator's state, so that fairseq checkpoints can hold it.

fairseq checkpoints are read with torch's weights-only unpickler (torch >= 2.6), which
refuses numpy objects: arrays travel as tensors and numpy scalars as Python numbers.
"""

import numpy as np
import torch


def arrays_to_tensors(obj):
    """numpy arrays -> torch tensors, numpy scalars -> Python numbers, recursively."""
    if isinstance(obj, dict):
        return {k: arrays_to_tensors(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [arrays_to_tensors(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def tensors_to_arrays(obj):
    """The inverse of :func:`arrays_to_tensors`."""
    if isinstance(obj, dict):
        return {k: tensors_to_arrays(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [tensors_to_arrays(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    return obj
