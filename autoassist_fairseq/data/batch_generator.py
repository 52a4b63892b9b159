"""Windows of candidates -> Boss batches of accepted pairs, under fairseq's rules.

An epoch visits every pair of the shard exactly once. As fairseq does, the shard is
sorted by length (ties in an order drawn from ``(seed, epoch, shard)``); windows are
contiguous slices of that order, visited in random order, so each window holds pairs of
similar length. Each window is scored at once with the Assistant's *current* state and
its accepted pairs are cut by fairseq's own ``batch_by_size`` (so ``max_tokens``,
``max_sentences``, ``required_batch_size_multiple`` and padding follow fairseq); the
partly filled last batch of every window is deferred, and the remainders are batched
together after the last window, so windows add almost no batches. Rejected pairs are
candidates again next epoch.

With a fixed batch count (distributed runs must agree on one), the last window is
followed by a top-up window of the most useful rejected pairs, and a window that would
overflow the count leaves its surplus rejected.
"""

import math
from typing import Callable, List, Optional

import numpy as np

from .messages import WindowPlan

AcceptFn = Callable[[np.ndarray], np.ndarray]


class BatchGenerator:
    """Utility-aware batches for one shard of a dataset.

    Args:
        indices (np.ndarray): dataset indices that pass fairseq's size filter.
        src_sizes, tgt_sizes (np.ndarray): lengths of every pair (whole dataset).
        max_tokens (int, optional): fairseq's ``--max-tokens``.
        max_sentences (int, optional): fairseq's ``--batch-size``.
        required_batch_size_multiple (int): fairseq's option of that name (default: 1).
        window_size (int): candidates scored per window (default: 4096).
        seed (int): fairseq's ``--seed`` (default: 1).
        num_shards, shard_id (int): this worker's disjoint part (default: 1, 0).
    """

    VERSION = 2

    def __init__(self, indices, src_sizes, tgt_sizes, max_tokens=None, max_sentences=None,
                 required_batch_size_multiple=1, window_size=4096, seed=1, num_shards=1,
                 shard_id=0):
        if max_tokens is None and max_sentences is None:
            raise ValueError("set --max-tokens or --batch-size: AutoAssist batches need a bound")
        if not 0 <= shard_id < num_shards:
            raise ValueError(f"shard_id {shard_id} is not in [0, {num_shards})")
        if window_size < 1:
            raise ValueError(f"--assistant-window={window_size} must be >= 1")
        self.src_sizes = np.asarray(src_sizes, dtype=np.int64)
        self.tgt_sizes = (np.asarray(tgt_sizes, dtype=np.int64) if tgt_sizes is not None
                          else np.zeros_like(self.src_sizes))
        # pairs in fairseq's length order, dealt round-robin: shards are disjoint and get
        # the same length distribution
        self.shard = np.asarray(indices, dtype=np.int64)[shard_id::num_shards]
        self.max_tokens, self.max_sentences = max_tokens, max_sentences
        self.bsz_mult = required_batch_size_multiple
        self.window_size = window_size
        self.seed, self.shard_id = seed, shard_id
        self.num_windows = max(1, math.ceil(len(self.shard) / window_size))
        self._full_count = None
        self._epoch_counts = {}
        self.epoch = 0
        self.num_batches: Optional[int] = None
        self._order_cache = None
        self._reset_epoch_state()

    # -- fairseq batching ----------------------------------------------------------
    def num_tokens(self, ids: np.ndarray) -> np.ndarray:
        """Tokens a pair costs in a batch, as LanguagePairDataset.num_tokens counts."""
        return np.maximum(self.src_sizes[ids], self.tgt_sizes[ids])

    def pair_tokens(self, ids: np.ndarray) -> int:
        """Real (non-padding) source + target tokens of *ids*."""
        return int(self.src_sizes[ids].sum() + self.tgt_sizes[ids].sum())

    def make_batches(self, ids: np.ndarray) -> List[np.ndarray]:
        """Sort *ids* by length as LanguagePairDataset.ordered_indices does, then cut with
        fairseq's ``batch_by_size``."""
        if len(ids) == 0:
            return []
        ids = ids[np.lexsort((self.tgt_sizes[ids], self.src_sizes[ids]))]
        batches = self._batch_by_size(ids, self.bsz_mult)
        # fairseq 0.12's batch_by_size silently drops up to required_batch_size_multiple - 1
        # pairs at the end; every accepted pair must reach the Boss, so they get batches
        covered = sum(len(b) for b in batches)
        if covered < len(ids):
            missing = ids[~np.isin(ids, np.concatenate(batches) if batches else ids[:0])]
            batches += self._batch_by_size(missing, 1)
        return batches

    def _batch_by_size(self, ids, multiple):
        from fairseq.data import data_utils

        return [np.asarray(b, dtype=np.int64) for b in data_utils.batch_by_size(
            ids, self.num_tokens, max_tokens=self.max_tokens, max_sentences=self.max_sentences,
            required_batch_size_multiple=multiple, num_tokens_vec=self.num_tokens(ids))]

    def full_batch_count(self) -> int:
        """Batches a plain fairseq epoch over this shard would have."""
        if self._full_count is None:
            self._full_count = len(self.make_batches(self.shard))
        return self._full_count

    def epoch_batch_count(self, epoch: int) -> int:
        """Batches *epoch* would have if every candidate were accepted (a little above
        :meth:`full_batch_count`: windows cut the length order in a few more places)."""
        if epoch not in self._epoch_counts:
            order, windows = self._order(epoch)
            count, deferred = 0, []
            for w in range(self.num_windows):
                batches = self.make_batches(self._window_ids(order, windows, w))
                count += max(0, len(batches) - 1)
                deferred += batches[-1:]
            count += len(self.make_batches(np.concatenate(deferred))) if deferred else 0
            self._epoch_counts = {epoch: count}
        return self._epoch_counts[epoch]

    # -- epochs ----------------------------------------------------------------------
    def _reset_epoch_state(self):
        self.cursor = 0
        self.planned = 0
        self.rejected: List[np.ndarray] = []
        self.deferred: List[np.ndarray] = []

    def _order(self, epoch: int):
        """The shard in fairseq's length order (ties in random order), and the random order
        in which its windows, contiguous slices of that order, are visited."""
        rng = np.random.default_rng([self.seed, epoch, self.shard_id])
        ids = rng.permutation(self.shard)
        ids = ids[np.lexsort((self.tgt_sizes[ids], self.src_sizes[ids]))]  # stable
        return ids, rng.permutation(self.num_windows)

    def _window_ids(self, order, windows, w):
        start = windows[w] * self.window_size
        return order[start:start + self.window_size]

    def begin_epoch(self, epoch: int, num_batches: Optional[int] = None) -> None:
        """Start *epoch*; with *num_batches*, yield exactly that many batches."""
        if num_batches is not None and num_batches < 0:
            raise ValueError(f"num_batches must be >= 0, got {num_batches}")
        self.epoch, self.num_batches = epoch, num_batches
        self._order_cache = self._order(epoch)
        self._reset_epoch_state()

    def next_window(self, accept_fn: AcceptFn) -> Optional[WindowPlan]:
        """Score and batch the next window; None once the epoch is complete.

        Windows ``0 .. num_windows - 1`` hold candidates; window ``num_windows`` batches the
        partly filled last batches the others deferred; window ``num_windows + 1`` tops up
        a fixed batch count.
        """
        if self._order_cache is None:
            raise RuntimeError("call begin_epoch() before next_window()")
        if self.cursor < self.num_windows:
            return self._regular_window(accept_fn)
        if self.cursor == self.num_windows:
            return self._deferred_window()
        if self.cursor == self.num_windows + 1 and self.num_batches is not None \
                and self.planned < self.num_batches:
            return self._top_up_window(accept_fn)
        return None

    def _window_rng(self, window: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch, self.shard_id, window, 1])

    def _room(self, batches, rejected):
        """Cut *batches* to what the fixed count leaves; the surplus stays rejected."""
        if self.num_batches is not None and self.planned + len(batches) > self.num_batches:
            room = self.num_batches - self.planned
            rejected += batches[room:]
            batches = batches[:room]
        return batches, rejected

    def _regular_window(self, accept_fn: AcceptFn) -> WindowPlan:
        w = self.cursor
        ids = self._window_ids(*self._order_cache, w)
        rng = self._window_rng(w)
        prob = np.asarray(accept_fn(ids), dtype=np.float64)
        accepted = rng.random(len(ids)) < prob
        batches = self.make_batches(ids[accepted])
        # the last batch is only partly filled: it waits for the other windows' remainders
        deferred = batches.pop() if batches else np.zeros(0, np.int64)
        rng.shuffle(batches)
        batches, rejected = self._room(batches, [ids[~accepted]])
        cost = self.num_tokens(ids).astype(np.float64)
        plan = self._plan(w, batches, np.concatenate(rejected), deferred=deferred,
                          expected_token_rate=float((prob * cost).sum() / max(cost.sum(), 1.0)))
        plan.considered_pairs, plan.considered_tokens = len(ids), self.pair_tokens(ids)
        # Horvitz-Thompson: a pair kept with probability p stands for 1/p of itself
        plan.weight_ids, plan.weights = ids[accepted], (1.0 / prob[accepted]).astype(np.float32)
        plan.accepted_pairs += len(deferred)
        plan.accepted_tokens += self.pair_tokens(deferred)
        return plan

    def _deferred_window(self) -> WindowPlan:
        """The windows' remainders, batched together (already counted as accepted)."""
        pool = np.concatenate(self.deferred) if self.deferred else np.zeros(0, np.int64)
        batches = self.make_batches(pool)
        self._window_rng(self.num_windows).shuffle(batches)
        batches, rejected = self._room(batches, [np.zeros(0, np.int64)])
        plan = self._plan(self.num_windows, batches, np.concatenate(rejected))
        plan.accepted_pairs, plan.accepted_tokens = 0, 0
        return plan

    def _top_up_window(self, accept_fn: AcceptFn) -> WindowPlan:
        """Fill the fixed count with the rejected pairs the Assistant rates most useful."""
        need = self.num_batches - self.planned
        pool = np.concatenate(self.rejected) if self.rejected else np.zeros(0, np.int64)
        pool = pool[np.argsort(-np.asarray(accept_fn(pool)), kind="stable")] if len(pool) else pool
        per_batch = max(1, len(self.shard) // max(1, self.full_batch_count()))
        take = min(len(pool), need * per_batch)
        while True:
            batches = self.make_batches(pool[:take])
            if len(batches) >= need or take == len(pool):
                break
            take = min(len(pool), take * 2)
        batches = batches[:need]
        batches += [np.zeros(0, np.int64)] * (need - len(batches))  # shard exhausted
        self._window_rng(self.num_windows + 1).shuffle(batches)
        used = np.concatenate(batches) if batches else np.zeros(0, np.int64)
        self.rejected = [np.setdiff1d(pool, used)]
        plan = self._plan(self.num_windows + 1, batches, np.zeros(0, np.int64), record=False)
        plan.weight_ids, plan.weights = used, np.ones(len(used), np.float32)
        # top-up pairs were counted as considered and rejected in their own window
        plan.topup_pairs, plan.accepted_pairs, plan.accepted_tokens = plan.accepted_pairs, 0, 0
        return plan

    def _plan(self, window, batches, rejected, deferred=None, expected_token_rate=1.0,
              record=True):
        accepted = np.concatenate(batches) if batches else np.zeros(0, np.int64)
        deferred = np.zeros(0, np.int64) if deferred is None else deferred
        self.cursor = window + 1
        self.planned += len(batches)
        if record:
            self.rejected.append(rejected)
            self.deferred.append(deferred)
        return WindowPlan(epoch=self.epoch, window=window, batches=batches, rejected=rejected,
                          deferred=deferred, accepted_pairs=len(accepted),
                          accepted_tokens=self.pair_tokens(accepted),
                          expected_token_rate=expected_token_rate)

    # -- resume ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"version": self.VERSION, "epoch": self.epoch, "num_batches": self.num_batches,
                "next_window": self.cursor, "planned": self.planned,
                "rejected": concat_ids(self.rejected), "deferred": concat_ids(self.deferred)}

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != self.VERSION:
            raise RuntimeError(f"batch generator state version {state.get('version')} is not "
                               f"{self.VERSION}; relaunch with --reset-dataloader")
        self.begin_epoch(state["epoch"], state["num_batches"])
        self.cursor, self.planned = state["next_window"], state["planned"]
        self.rejected = [np.asarray(state["rejected"], dtype=np.int64)]
        self.deferred = [np.asarray(state["deferred"], dtype=np.int64)]


def concat_ids(arrays: List[np.ndarray]) -> np.ndarray:
    """One id array from a list of them (empty list: an empty int64 array)."""
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
