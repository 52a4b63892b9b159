"""Every training pair's scores as a TSV: what ``autoassist-filter`` drops and why.

One row per binarised training pair, in order:

* ``pair``: its index in the binarised training set; ``line``: its 0-based line in the raw
  training text (``DATA/train.kept-lines``; empty where DATA has no such file);
* ``<check>_score`` for each pair check of the feature file (empty where the check gives
  the pair no evidence), ``union_score`` (:func:`..checks.columns.union_score`) and
  ``checks_flag`` (1 where a check flags the pair, as training decides it);
* with the losses of two checkpoints (``--dynamics FIRST LAST``): ``loss_first``,
  ``loss_last`` (mean token losses, nats), ``target_tokens``, ``loss_last_z``, ``stall_z``,
  ``dynamics_score`` and ``dynamics_flag`` (:mod:`..diagnose.dynamics`), and ``p_accept``,
  the Assistant's P(accept) of the pair at the late checkpoint (where it holds an
  Assistant: a checkpoint of ``--task autoassist_translation``);
* ``dropped``: 1 where ``autoassist-filter`` with these options drops the pair.
"""

import csv
import gzip
import os
from typing import Dict, Optional

import numpy as np


def _number(x: float) -> str:
    return "" if not np.isfinite(x) else f"{x:.5g}"


def write_pair_scores(path: str, per_check: Dict[str, tuple], union: np.ndarray,
                      flags: np.ndarray, dropped: np.ndarray, lines: Optional[np.ndarray],
                      dynamics: Optional[tuple] = None) -> None:
    """Write the TSV of the module docstring to *path* (gzip where it ends in ``.gz``),
    through a temporary file renamed into place.

    Args:
        per_check (dict): check name -> (score, flags), of
            :func:`..checks.flags.check_scores`.
        union (np.ndarray): the union's score per pair.
        flags (np.ndarray): the checks' flag per pair (bool).
        dropped (np.ndarray): whether the filter drops the pair (bool).
        lines (np.ndarray, optional): each pair's raw line number.
        dynamics (tuple, optional): (scores, flags, inputs) of
            :func:`..diagnose.dynamics.pair_dynamics`.
    """
    names = sorted(per_check)
    header = ["pair", "line"] + [f"{n}_score" for n in names] + ["union_score", "checks_flag"]
    columns = [np.arange(len(flags)).astype(str),
               lines.astype(str) if lines is not None else np.full(len(flags), "")]
    columns += [[_number(x) for x in np.asarray(per_check[n][0], dtype=np.float64)]
                for n in names]
    columns += [[_number(x) for x in union], flags.astype(int).astype(str)]
    if dynamics is not None:
        scores, dyn_flags, inputs = dynamics
        header += ["loss_first", "loss_last", "target_tokens", "loss_last_z", "stall_z",
                   "dynamics_score", "dynamics_flag"]
        columns += [[_number(x) for x in inputs["first"]], [_number(x) for x in inputs["last"]],
                    inputs["ntok"].astype(int).astype(str)]
        columns += [[_number(x) for x in scores[k]] for k in ("loss_last", "stall", "dynamics")]
        columns += [dyn_flags.astype(int).astype(str)]
        if "p_accept" in inputs:
            header.append("p_accept")
            columns.append([_number(x) for x in inputs["p_accept"]])
    header.append("dropped")
    columns.append(dropped.astype(int).astype(str))
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp")
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(tmp, "wt", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="\t", lineterminator="\n")
            writer.writerow(header)
            writer.writerows(zip(*columns))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
