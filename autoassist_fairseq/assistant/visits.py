"""Each pair's losses over its visits: the training dynamics the Boss reports at no extra cost.

For every pair the Assistant keeps, from the per-sentence losses the Boss already sends, its
loss at the first and at the latest visit, their sum, the number of visits and the data
passes of the first and latest visit. :mod:`..diagnose.dynamics` turns the first and latest
loss into the pair's dynamics score; the passes let the states of several ranks, each of
which saw the pair in some passes, be merged (:func:`merge_states`): a pair is visited at
most once a pass, by one rank.

Memory: 14 bytes a dataset row (float16 first and latest loss, float32 sum, uint16 visits
and passes): 560 MB for 40M pairs; a saved state holds only the visited rows, 24 bytes each
(the id and the counters as int32, for the ranks' broadcast).
"""

from typing import Iterable, Optional

import numpy as np

_FLOAT16_MAX = float(np.finfo(np.float16).max)
_UINT16_MAX = int(np.iinfo(np.uint16).max)
FIELDS = ("first", "last", "sum", "visits", "first_pass", "last_pass")


class PairVisits:
    """The per-pair arrays of the module docstring.

    Args:
        num_rows (int): pairs in the dataset (ids are row numbers).
    """

    def __init__(self, num_rows: int):
        self.num_rows = int(num_rows)
        self.reset()

    def reset(self) -> None:
        """Forget every visit."""
        n = self.num_rows
        self.first = np.full(n, np.nan, dtype=np.float16)
        self.last = np.full(n, np.nan, dtype=np.float16)
        self.sum = np.zeros(n, dtype=np.float32)
        self.visits = np.zeros(n, dtype=np.uint16)
        self.first_pass = np.zeros(n, dtype=np.uint16)  # 0: never visited
        self.last_pass = np.zeros(n, dtype=np.uint16)

    def observe(self, ids: np.ndarray, losses: np.ndarray, data_pass: int) -> None:
        """Record one batch of finite losses of 1-based *data_pass* (a repeated id counts
        once, with its last loss)."""
        ids = np.asarray(ids, dtype=np.int64)
        losses = np.minimum(np.asarray(losses, dtype=np.float64), _FLOAT16_MAX)
        _, from_end = np.unique(ids[::-1], return_index=True)
        if len(from_end) < len(ids):
            keep = len(ids) - 1 - from_end
            ids, losses = ids[keep], losses[keep]
        new = self.visits[ids] == 0
        self.first[ids[new]] = losses[new]
        self.first_pass[ids[new]] = min(int(data_pass), _UINT16_MAX)
        self.last[ids] = losses
        self.last_pass[ids] = min(int(data_pass), _UINT16_MAX)
        self.sum[ids] += losses.astype(np.float32)
        self.visits[ids] = np.minimum(self.visits[ids].astype(np.int64) + 1, _UINT16_MAX)

    def state_dict(self) -> dict:
        """The visited rows only. Integers are saved as int32 or int64: fairseq broadcasts
        a checkpoint's tensors to every rank at a resume, and gloo has no unsigned types
        but uint8."""
        seen = np.flatnonzero(self.visits > 0)
        id_type = np.int32 if self.num_rows <= np.iinfo(np.int32).max else np.int64
        state = {"num_rows": self.num_rows, "ids": seen.astype(id_type)}
        for f in FIELDS:
            values = getattr(self, f)[seen]
            state[f] = values.astype(np.int32) if values.dtype == np.uint16 else values
        return state

    def load_state_dict(self, state: dict) -> None:
        if int(state["num_rows"]) != self.num_rows:
            raise ValueError(f"saved visits cover {state['num_rows']} pairs but the dataset has "
                             f"{self.num_rows}: the checkpoint was trained on other data; use "
                             "--reset-dataloader to start a new Assistant")
        self.reset()
        ids = np.asarray(state["ids"], dtype=np.int64)
        for f in FIELDS:
            array = getattr(self, f)
            array[ids] = np.asarray(state[f]).astype(array.dtype)


def merge_states(states: Iterable[Optional[dict]]) -> PairVisits:
    """One :class:`PairVisits` from the saved states of several ranks: visits and sums add
    up; the first loss is that of the rank that saw the pair in the earliest pass, the
    latest that of the rank that saw it in the latest pass.

    Raises:
        ValueError: no state, or states of datasets of other sizes.
    """
    states = [s for s in states if s is not None]
    if not states:
        raise ValueError("no rank's state holds the pairs' visits: the checkpoint's Assistant "
                         "recorded none (a checkpoint of plain --task translation, or of an "
                         "older autoassist-fairseq)")
    sizes = {int(s["num_rows"]) for s in states}
    if len(sizes) > 1:
        raise ValueError(f"the ranks' visits cover datasets of {sorted(sizes)} pairs: the "
                         "checkpoint mixes states of other data")
    merged = PairVisits(sizes.pop())
    for state in states:
        ids = np.asarray(state["ids"], dtype=np.int64)
        first_pass = np.asarray(state["first_pass"])
        last_pass = np.asarray(state["last_pass"])
        earlier = (merged.visits[ids] == 0) | (first_pass < merged.first_pass[ids])
        merged.first[ids[earlier]] = np.asarray(state["first"])[earlier]
        merged.first_pass[ids[earlier]] = first_pass[earlier]
        later = last_pass >= merged.last_pass[ids]
        merged.last[ids[later]] = np.asarray(state["last"])[later]
        merged.last_pass[ids[later]] = last_pass[later]
        merged.sum[ids] += np.asarray(state["sum"], dtype=np.float32)
        merged.visits[ids] = np.minimum(merged.visits[ids].astype(np.int64)
                                        + np.asarray(state["visits"]), _UINT16_MAX)
    return merged
