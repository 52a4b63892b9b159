"""Selection rules: which candidates the Assistant lets into the Boss's batches.

Every rule runs inside the same Assistant, from the losses the Boss already reports (no
extra forward pass), and only changes P(accept i):

- ``paper``: Algorithm 1 of AutoAssist, (1 - lambda_k) + lambda_k g(psi_i | theta).
- ``random``: the random-skip control, P(accept i) = r_e for every pair of data pass e.
- ``learnable``: skips pairs already learned *and* pairs that cannot be learned, from each
  pair's own loss history (:class:`PairHistory`); pairs not seen yet follow the paper's g.
- ``noise``: skips only the pairs ``learnable`` takes for unlearnable and takes every other
  pair: a noise filter, which keeps every pair the Boss can still learn from. A pair is
  marked only after visits whose losses do not fall, so copies (easy for the Boss) are never
  marked; what it gains, and what an oracle that leaves out every noisy pair gains, is in
  docs/results/equal-compute.md.

The functions here are pure; :class:`PairHistory` only holds the per-pair arrays.
"""

from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from .schedule import moving_average

RULES = ("paper", "random", "learnable", "noise")

# float16 holds the stored losses (2 bytes a pair); larger values would become inf.
_FLOAT16_MAX = float(np.finfo(np.float16).max)
# strikes are kept in uint8
MAX_PATIENCE = int(np.iinfo(np.uint8).max)


def parse_random_rates(text: str) -> Tuple[float, ...]:
    """Per-pass acceptance rates of the ``random`` rule from ``"1.0,0.8,0.74"``, as
    :func:`~..tasks.config.check_hparams` checked them.

    Args:
        text (str): comma-separated rates, each in (0, 1]; the last repeats for later passes.

    Returns:
        tuple: the rates, in pass order.
    """
    rates = tuple(float(t) for t in str(text).split(","))
    assert all(0.0 < r <= 1.0 for r in rates), rates
    return rates


def pass_rate(rates: Sequence[float], data_pass: int) -> float:
    """r_e of 1-based *data_pass*; the last rate repeats for later passes."""
    return float(rates[min(max(int(data_pass), 1), len(rates)) - 1])


def update_high_threshold(high: Optional[float], losses: np.ndarray, quantile: float,
                          decay: float) -> float:
    """Q_k <- decay * Q_k + (1 - decay) * (q-quantile of the batch's losses).

    The same EMA as T_k, over a high quantile instead of the mean: "far above the Boss's
    recent losses". The first batch sets Q_k.

    Raises:
        ValueError: if *losses* is empty or holds a non-finite value.
    """
    return moving_average(high, losses, decay,
                          statistic=lambda x: np.quantile(x, quantile))


def update_strikes(last: np.ndarray, strikes: np.ndarray, losses: np.ndarray, high: float,
                   min_decline: float) -> np.ndarray:
    """Count, per pair, consecutive visits far above the losses without declining.

    A visit with loss above *high* is a strike; it restarts the count at 1 if the loss fell
    by more than *min_decline* (relative) since the pair's previous visit, since the Boss is
    still learning the pair; a visit at or below *high* clears the count.

    Args:
        last (np.ndarray): each pair's loss at its previous visit (NaN: first visit).
        strikes (np.ndarray): each pair's count so far (uint8).
        losses (np.ndarray): each pair's loss at this visit (finite).
        high (float): Q_k, already updated with this batch.
        min_decline (float): relative decline between two visits that counts as learning.

    Returns:
        np.ndarray: the new counts (uint8).
    """
    last = np.asarray(last, dtype=np.float64)
    above = losses > high
    declined = losses < last * (1.0 - min_decline)  # False where last is NaN
    grown = np.minimum(strikes.astype(np.int64) + 1, MAX_PATIENCE)
    return np.where(above, np.where(declined, 1, grown), 0).astype(np.uint8)


def learnable_utility(g: np.ndarray, last: np.ndarray, strikes: np.ndarray,
                      threshold: Optional[float], patience: int) -> np.ndarray:
    """u_i of the ``learnable`` rule, used in place of g_i in Algorithm 1.

    - not seen yet (*last* NaN): g_i, the paper's prediction from the features;
    - unlearnable (*strikes* >= *patience*): 0;
    - otherwise 1[last loss > T_k]: the pair's own last loss instead of a prediction of it.

    Args:
        g (np.ndarray): g(psi_i | theta) (used only where *last* is NaN).
        last (np.ndarray): loss at the pair's latest visit, NaN if never seen.
        strikes (np.ndarray): output of :func:`update_strikes` at that visit.
        threshold (float, optional): T_k (None: nothing learned yet, so g for all).
        patience (int): strikes that mark a pair unlearnable.
    """
    g = np.asarray(g, dtype=np.float64)
    last = np.asarray(last, dtype=np.float64)
    if threshold is None:
        return g
    known = np.where(strikes >= patience, 0.0, (last > threshold).astype(np.float64))
    return np.where(np.isnan(last), g, known)


class PairHistory:
    """Each pair's loss at its latest visit and its strike count, for the ``learnable`` rule.

    The rule joins two ideas from the literature. Pairs already learned, whose last loss is
    below the running mean T_k, are skipped as InfoBatch prunes them (`Qin et al., ICLR 2024
    <https://arxiv.org/abs/2303.04947>`_). Pairs that stay in the top of the loss
    distribution without their loss declining between visits are taken for unlearnable
    (misaligned or untranslatable) and skipped too: a sentence whose loss stops declining
    adds little, as in Dynamic Sentence Sampling (`Wang et al., ACL 2018
    <https://aclanthology.org/P18-2048/>`_), and high loss with no progress across epochs
    marks the "hard-to-learn" region that holds mislabelled examples in Dataset
    Cartography (`Swayamdipta et al., EMNLP 2020 <https://arxiv.org/abs/2009.10795>`_).
    Unseen pairs follow the paper's g, so the first pass is the paper's rule.

    Memory: 3 bytes a dataset row (float16 loss, uint8 strikes); its state holds only the
    seen rows, 7 bytes each (int32 id, float16 loss, uint8 strikes).

    Args:
        num_rows (int): pairs in the dataset (ids are row numbers).
        quantile (float): q of Q_k, the EMA of the q-quantile of each loss batch.
        decay (float): EMA factor of Q_k per loss batch (the Assistant's threshold decay).
        min_decline (float): relative loss decline between two visits that counts as learning.
        patience (int): consecutive high, non-declining visits that mark a pair unlearnable.
    """

    def __init__(self, num_rows: int, quantile: float, decay: float, min_decline: float,
                 patience: int):
        self.num_rows = int(num_rows)
        self.quantile, self.decay = quantile, decay
        self.min_decline, self.patience = min_decline, patience
        self.reset()

    def reset(self) -> None:
        """Forget every pair (all unseen)."""
        self.last = np.full(self.num_rows, np.nan, dtype=np.float16)
        self.strikes = np.zeros(self.num_rows, dtype=np.uint8)
        self.high: Optional[float] = None
        self.unlearnable = 0  # pairs currently taken for unlearnable

    def observe(self, ids: np.ndarray, losses: np.ndarray) -> None:
        """Record one batch of finite losses (a repeated id keeps its last loss)."""
        self.high = update_high_threshold(self.high, losses, self.quantile, self.decay)
        _, from_end = np.unique(ids[::-1], return_index=True)
        if len(from_end) < len(ids):
            keep = len(ids) - 1 - from_end
            ids, losses = ids[keep], losses[keep]
        before = self.strikes[ids]
        after = update_strikes(self.last[ids], before, losses, self.high, self.min_decline)
        self.strikes[ids] = after
        self.last[ids] = np.minimum(losses, _FLOAT16_MAX)
        # kept up to date here, so that reading it costs nothing at every window
        self.unlearnable += int(np.count_nonzero(after >= self.patience)) \
            - int(np.count_nonzero(before >= self.patience))

    def utility(self, ids: np.ndarray, g_fn: Callable[[np.ndarray], np.ndarray],
                threshold: Optional[float]) -> np.ndarray:
        """u_i of :func:`learnable_utility`; *g_fn* is called on the unseen pairs only."""
        last = self.last[ids].astype(np.float64)
        unseen = np.isnan(last)
        g = np.zeros(len(ids))
        if unseen.any():
            g[unseen] = g_fn(ids[unseen])
        return learnable_utility(g, last, self.strikes[ids], threshold, self.patience)

    def is_unlearnable(self, ids: np.ndarray) -> np.ndarray:
        """Whether each pair of *ids* is currently taken for unlearnable."""
        return self.strikes[ids] >= self.patience

    def state_dict(self) -> dict:
        seen = np.flatnonzero(~np.isnan(self.last))
        # int32, not uint32: fairseq broadcasts a checkpoint's tensors to every rank at a
        # resume, and gloo has no unsigned type but uint8
        id_type = np.int32 if self.num_rows <= np.iinfo(np.int32).max else np.int64
        return {"num_rows": self.num_rows, "high": self.high, "ids": seen.astype(id_type),
                "loss": self.last[seen], "strikes": self.strikes[seen]}

    def load_state_dict(self, state: dict) -> None:
        if int(state["num_rows"]) != self.num_rows:
            raise ValueError(f"saved loss history covers {state['num_rows']} pairs but the "
                             f"dataset has {self.num_rows}: the checkpoint was trained on "
                             "other data; use --reset-dataloader to start a new Assistant")
        ids = np.asarray(state["ids"], dtype=np.int64)
        self.reset()
        self.last[ids] = np.asarray(state["loss"], dtype=np.float16)
        self.strikes[ids] = np.asarray(state["strikes"], dtype=np.uint8)
        self.high = state["high"]
        self.unlearnable = int(np.count_nonzero(self.strikes >= self.patience))
