"""Training dynamics of each pair: "a high loss that does not fall, relative to pairs of the
same length", from the Boss's per-pair losses at two checkpoints of one run.

A valid pair's loss falls as the Boss learns it; a pair whose target cannot be predicted
from its source (a misaligned or partial pair) keeps a loss near what the target alone gives.
From the mean token losses of every training pair at an early and a late checkpoint
(``autoassist-diagnose --losses-out``, eval mode), each pair gets two robust z-scores among
the pairs of the same target length (:func:`length_z`), since a long target has another loss
than a short one:

* ``loss_last``: its loss at the late checkpoint;
* ``stall``: its relative change from the early to the late one, (last - first) / first;

and ``dynamics`` = ``loss_last`` + ``stall``. Its bar comes from the corpus itself: a pair is
flagged where ``dynamics``, as a robust z-score over the corpus (median, 1.4826 MAD), exceeds
:data:`BAR`. Both z-scores are shift-invariant, so the label-smoothing floor (a constant per
token) cancels: the figures are those of the reducible loss.

The same score comes from the training passes' own losses, which the Assistant records for
every pair at no extra cost (:mod:`..assistant.visits`): the first and the latest visit's
loss, in train mode (dropout), each at its own point of the pass (:func:`visits_dynamics`).

Measured in docs/results/noise (``research.dynamics_report``): on Multi30k with 30%
synthetic realistic noise the score separates noise from clean pairs well after 8 passes;
on real crawled pairs (ParaCrawl) mixed into Tatoeba it adds little to the pair checks.
"""

import os
from typing import Dict, Tuple

import numpy as np

BINS = 20  # target-length bins of equal count
BAR = 3.0  # robust z of the dynamics score over the corpus above which a pair is flagged
_MAD_SD = 1.4826  # MAD -> standard deviation of a normal distribution


def robust_z(values: np.ndarray) -> np.ndarray:
    """(v - median) / (1.4826 MAD); a constant input gives 0 everywhere."""
    values = np.asarray(values, dtype=np.float64)
    med = np.median(values)
    scale = _MAD_SD * np.median(np.abs(values - med))
    if not scale > 0:
        scale = values.std() or 1.0
    return (values - med) / scale


def length_z(values: np.ndarray, lengths: np.ndarray, bins: int = BINS) -> np.ndarray:
    """:func:`robust_z` of *values* within bins of equal count by *lengths*, so that a long
    pair is compared with long pairs (tied lengths share a bin). Within a bin, the values'
    least-squares line over the lengths is taken out first: the last bin of a corpus spans
    many lengths (a long tail), and the loss of a long target grows with its length."""
    values = np.asarray(values, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.float64)
    edges = np.unique(np.quantile(lengths, np.linspace(0, 1, bins + 1)[1:-1]))
    which = np.searchsorted(edges, lengths, side="right")
    z = np.zeros(len(values))
    for b in np.unique(which):
        pick = which == b
        v, x = values[pick], lengths[pick]
        if np.ptp(x) > 0:
            v = v - np.polyval(np.polyfit(x, v, 1), x)
        z[pick] = robust_z(v)
    return z


def read_pass_losses(path: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, mean token losses, target tokens) of an ``autoassist-diagnose --losses-out``
    file, in id order.

    Raises:
        ValueError: the file cannot be read or is not such a file (the message names it).
    """
    try:
        saved = np.load(path)
        files = set(saved.files)
    except OSError as err:
        raise ValueError(f"cannot read the losses file {path}: {err.strerror or err}; give "
                         "the .npz that autoassist-diagnose --losses-out wrote") from None
    except ValueError:  # numpy: neither .npy nor .npz
        raise ValueError(f"{path} is not an .npz file: give the losses that "
                         "autoassist-diagnose --losses-out wrote") from None
    if not {"losses", "ntok"} <= files:
        raise ValueError(f"{path} holds {sorted(files)}, not the losses of autoassist-diagnose "
                         "--losses-out (losses, ntok, ids)")
    ids = saved["ids"] if "ids" in files else np.arange(len(saved["losses"]))
    order = np.argsort(ids, kind="stable")
    return ids[order], saved["losses"][order], saved["ntok"][order]


def dynamics_scores(first: np.ndarray, last: np.ndarray, ntok: np.ndarray,
                    bins: int = BINS) -> Dict[str, np.ndarray]:
    """The scores of the module docstring (higher: more noise-like), one per pair, from each
    pair's mean token loss at an early (*first*) and a late (*last*) checkpoint and its
    target tokens *ntok*."""
    first = np.asarray(first, dtype=np.float64)
    last = np.asarray(last, dtype=np.float64)
    loss_last = length_z(last, ntok, bins)
    stall = length_z((last - first) / np.maximum(first, 1e-6), ntok, bins)
    return {"loss_last": loss_last, "stall": stall, "dynamics": loss_last + stall}


def dynamics_flags(score: np.ndarray, bar: float = BAR) -> np.ndarray:
    """The pairs whose dynamics *score* lies above *bar* robust standard deviations over the
    corpus's median: a bar set from the corpus itself."""
    return robust_z(score) > bar


def checkpoint_visits(checkpoint: str):
    """Each pair's first and latest loss over the visits the Assistant recorded in
    *checkpoint* (every rank's, merged: :func:`..assistant.visits.merge_states`): the
    training forward passes' own losses, at no extra cost.

    Returns:
        (first, last, visits): per dataset row; NaN and 0 for a pair never visited.

    Raises:
        ValueError: the file is damaged or holds no Assistant's visits (the message names
            it and the fix).
    """
    import torch

    from .. import compat  # noqa: F401  (fairseq's checkpoints under torch >= 2.6)
    from ..assistant.visits import merge_states
    from ..checkpoint_file import check_checkpoint_file
    from ..data.arrays import tensors_to_arrays

    fix = "give a checkpoint of an autoassist_translation run"
    if not os.path.isfile(checkpoint):
        raise ValueError(f"checkpoint not found: {checkpoint}; {fix}")
    check_checkpoint_file(checkpoint, fix)
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    saved = ((state.get("extra_state") or {}).get("train_iterator") or {}).get("autoassist")
    ranks = (saved or {}).get("ranks") or []
    try:
        merged = merge_states(tensors_to_arrays((r or {}).get("assistant") or {}).get("visits")
                              for r in ranks)
    except ValueError as err:
        raise ValueError(f"{checkpoint}: {err}; {fix} (autoassist-fairseq >= 0.2), or "
                         "give --dynamics the losses of two checkpoints") from None
    first = merged.first.astype(np.float64)
    last = merged.last.astype(np.float64)
    return first, last, merged.visits


def visits_dynamics(checkpoint: str, ntok: np.ndarray):
    """:func:`pair_dynamics` from the losses of the training passes themselves, as
    :func:`checkpoint_visits` reads them: the pairs visited at least twice are scored
    among themselves, the others get NaN scores and no flag.

    Raises:
        ValueError: as :func:`checkpoint_visits`; the checkpoint's dataset is not of
            ``len(ntok)`` pairs; fewer than two pairs were visited twice.
    """
    first, last, visits = checkpoint_visits(checkpoint)
    if len(first) != len(ntok):
        raise ValueError(f"{checkpoint} was trained on {len(first)} pairs, the corpus has "
                         f"{len(ntok)}: give a checkpoint of a run on this corpus")
    twice = visits >= 2
    if twice.sum() < 2:
        raise ValueError(f"{checkpoint}: {int(twice.sum())} pairs visited twice or more; "
                         "train at least two passes before scoring the dynamics")
    scores = {k: np.full(len(first), np.nan) for k in ("loss_last", "stall", "dynamics")}
    for k, v in dynamics_scores(first[twice], last[twice], ntok[twice]).items():
        scores[k][twice] = v
    flags = np.zeros(len(first), dtype=bool)
    flags[twice] = dynamics_flags(scores["dynamics"][twice])
    return scores, flags, {"first": first, "last": last, "ntok": np.asarray(ntok)}


def pair_dynamics(first_path: str, last_path: str, num_pairs: int):
    """Scores and flags of every training pair from two ``--losses-out`` files of one run.

    Returns:
        (scores, flags, inputs): the dict of :func:`dynamics_scores`, the flags of
        :func:`dynamics_flags` and the inputs ``first``, ``last``, ``ntok`` (and
        ``p_accept``, the late checkpoint's Assistant's, where it has one).

    Raises:
        ValueError: a file is unreadable, or the two hold other pairs than the corpus's
            *num_pairs* (a ``--sample-pairs`` diagnosis, or another corpus).
    """
    ids0, first, ntok = read_pass_losses(first_path)
    ids1, last, _ = read_pass_losses(last_path)
    for path, ids in ((first_path, ids0), (last_path, ids1)):
        if len(ids) != num_pairs or not np.array_equal(ids, np.arange(num_pairs)):
            raise ValueError(f"{path} holds the losses of {len(ids)} pairs, the corpus has "
                             f"{num_pairs}: diagnose every pair of this corpus (no "
                             "--sample-pairs) with autoassist-diagnose --losses-out")
    scores = dynamics_scores(first, last, ntok)
    inputs = {"first": first, "last": last, "ntok": ntok}
    accept = read_accept(last_path)
    if accept is not None:
        inputs["p_accept"] = accept
    return scores, dynamics_flags(scores["dynamics"]), inputs


def read_accept(path: str):
    """The Assistant's P(accept) of each pair in a ``--losses-out`` file, in id order (None
    where the checkpoint held no Assistant)."""
    saved = np.load(path)
    if "accept" not in saved.files:
        return None
    ids = saved["ids"] if "ids" in saved.files else np.arange(len(saved["accept"]))
    return saved["accept"][np.argsort(ids, kind="stable")]
