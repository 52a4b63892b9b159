"""The corpus's noise shares that ``autoassist-diagnose``'s verdict (:func:`.figures.verdict`)
is decided from: the share of the training pairs that the pair checks of the data
directory's feature file flag, the share that the training dynamics of two checkpoints'
losses flag (``--dynamics``), and the share that either flags.
"""

import logging
import os

import numpy as np

from .figures import CLEAN_SHARE, NOISE_BAR
from .inputs import DiagnosisError, check_dynamics

logger = logging.getLogger("autoassist_fairseq.diagnose")


def noise_estimates(data, src, tgt, num_pairs, dynamics=None):
    """The corpus's estimated share of noise pairs, from what the data directory holds.

    ``noise_share_checks``: the share of the training pairs that the pair checks of the
    feature file flag, as the task and ``autoassist-filter`` decide it
    (:func:`..features.prepared.flagged_pairs`); None, with ``noise_share_checks_missing`` saying
    why, without a feature file with pair checks. ``noise_share_dynamics``: with *dynamics*
    (the ``--losses-out`` files of an early and a late checkpoint), the share the training
    dynamics flag (:func:`.dynamics.pair_dynamics`). ``noise_share``: the share flagged by
    either (the pairs ``autoassist-filter`` with the same inputs drops; None without both).

    Raises:
        DiagnosisError: the dynamics files cannot be read or hold other pairs.
    """
    from pathlib import Path

    from ..features.prepared import flagged_pairs

    out = {"noise_share_checks": None, "noise_share_dynamics": None, "noise_share": None,
           "noise_bar": NOISE_BAR, "clean_share": CLEAN_SHARE}
    flags = None
    try:
        flags = np.asarray(flagged_pairs(Path(data), src, tgt)[0], dtype=bool)
        if len(flags) != num_pairs:
            raise ValueError(f"the feature file describes {len(flags)} pairs, the training "
                             f"set has {num_pairs}")
        out["noise_share_checks"] = float(flags.mean())
    except (FileNotFoundError, ValueError) as err:
        flags = None
        out["noise_share_checks_missing"] = str(err)
        logger.warning(f"no noise share from the pair checks: {err}")
    if dynamics:
        from .dynamics import pair_dynamics

        check_dynamics(dynamics)
        try:
            dyn = np.asarray(pair_dynamics(dynamics[0], dynamics[1], num_pairs)[1], dtype=bool)
        except ValueError as err:
            raise DiagnosisError(f"--dynamics: {err}") from None
        out["noise_share_dynamics"] = float(dyn.mean())
        out["dynamics"] = [os.path.abspath(p) for p in dynamics]
        flags = dyn if flags is None else flags | dyn
    if flags is not None:
        out["noise_share"] = float(flags.mean())
    return out

