"""Windows of candidates -> Boss batches of accepted pairs, under fairseq's rules.

The generator is a stream of data passes. A pass visits every pair of the shard exactly
once, in windows of random pairs (a permutation drawn from ``(seed, pass, shard)``, cut
into ``window_size`` slices). Each window is scored at once with the Assistant's *current*
state; its accepted pairs are sorted by length and cut by fairseq's own ``batch_by_size``
(so ``max_tokens``, ``max_sentences``, ``required_batch_size_multiple`` and padding follow
fairseq), and its batches are shuffled. Random windows matter: with windows of similar
length (slices of the length order) a run of consecutive updates saw one length only,
which cost the Boss more loss per token than fairseq's batches, shuffled across all
lengths (docs/results/equal-compute.md). The partly filled last batch of every window is
deferred, and the remainders are batched together after the last window, which ends the
pass. The next pass starts right away: rejected pairs are candidates again there.

Passes are not the Boss's epochs: an epoch takes a fixed number of batches from the
stream (see ``batch_stream``), so no skipped pair is ever added back to fill a count.
"""

import math
from typing import Callable, List, Optional

import numpy as np

from .plan import WindowPlan

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

    VERSION = 4  # 4: windows of random pairs (3: slices of the length order)

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
        # pairs in fairseq's order, dealt round-robin: shards are disjoint and get the same
        # length distribution
        self.shard = np.asarray(indices, dtype=np.int64)[shard_id::num_shards]
        self.max_tokens, self.max_sentences = max_tokens, max_sentences
        self.bsz_mult = required_batch_size_multiple
        self.window_size = window_size
        self.seed, self.shard_id = seed, shard_id
        self.num_windows = max(1, math.ceil(len(self.shard) / window_size))
        self._full_count = None
        self._epoch_counts = {}
        self.epoch = 0
        self.cursor = 0
        self.deferred: List[np.ndarray] = []
        self.accept_all = False
        self.generation = 0  # echoed in every window: the Boss drops those of old streams
        self._order_cache = None

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
        :meth:`full_batch_count`: a window's pairs pack a little less tightly)."""
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

    # -- passes ----------------------------------------------------------------------
    def _order(self, epoch: int):
        """The shard in a random order of pass *epoch*, and the order in which its windows,
        slices of that order, are visited."""
        rng = np.random.default_rng([self.seed, epoch, self.shard_id])
        return rng.permutation(self.shard), np.arange(self.num_windows)

    def _window_ids(self, order, windows, w):
        start = windows[w] * self.window_size
        return order[start:start + self.window_size]

    def begin_epoch(self, epoch: int) -> None:
        """Start data pass *epoch* (1-based) from its first window."""
        if epoch < 1:
            raise ValueError(f"passes are numbered from 1, got {epoch}")
        self.epoch = epoch
        self._order_cache = self._order(epoch)
        self.cursor = 0
        self.deferred: List[np.ndarray] = []
        self.deferred_weights: List[np.ndarray] = []

    def begin(self, msg) -> None:
        """Apply a ``BeginEpoch`` control message: a saved state, or a fresh pass; and
        whether every candidate is accepted from now on (annealing, uniform fallback)."""
        if msg.state is not None:
            self.load_state_dict(msg.state)
        else:
            self.begin_epoch(msg.epoch)
            self.accept_all = False
        self.accept_all = self.accept_all or bool(msg.accept_all)

    def next_window(self, accept_fn: AcceptFn) -> Optional[WindowPlan]:
        """Score and batch the next window of the stream; None before :meth:`begin`.

        Windows ``0 .. num_windows - 1`` hold candidates; window ``num_windows`` batches the
        partly filled last batches the others deferred and ends the pass.
        """
        if self._order_cache is None:
            return None
        if self.accept_all:
            accept_fn = _accept_everything
        if self.cursor < self.num_windows:
            plan = self._regular_window(accept_fn)
        else:
            plan = self._deferred_window()
            self.begin_epoch(self.epoch + 1)
        plan.state_after = self.state_dict()
        return plan

    def _window_rng(self, window: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch, self.shard_id, window, 1])

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
        self.cursor = w + 1
        # Horvitz-Thompson: a pair kept with probability p stands for 1/p of itself
        weight = (1.0 / prob[accepted]).astype(np.float32)
        self.deferred.append(deferred)
        self.deferred_weights.append(weights_of(deferred, ids[accepted], weight))
        cost = self.num_tokens(ids).astype(np.float64)
        kept = np.concatenate(batches + [deferred])
        return WindowPlan(
            epoch=self.epoch, window=w, batches=batches, deferred=deferred,
            considered_pairs=len(ids), considered_tokens=self.pair_tokens(ids),
            accepted_pairs=len(kept), accepted_tokens=self.pair_tokens(kept),
            expected_token_rate=float((prob * cost).sum() / max(cost.sum(), 1.0)),
            weight_ids=ids[accepted], weights=weight)

    def _deferred_window(self) -> WindowPlan:
        """The windows' remainders, batched together (already counted as accepted)."""
        pool = concat_ids(self.deferred)
        batches = self.make_batches(pool)
        self._window_rng(self.num_windows).shuffle(batches)
        return WindowPlan(epoch=self.epoch, window=self.num_windows, batches=batches,
                          weight_ids=pool, weights=_concat_weights(self.deferred_weights))

    # -- resume ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"version": self.VERSION, "epoch": self.epoch, "next_window": self.cursor,
                "deferred": concat_ids(self.deferred),
                "deferred_weights": _concat_weights(self.deferred_weights),
                "accept_all": self.accept_all, "generation": self.generation}

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != self.VERSION:
            raise RuntimeError(f"batch generator state version {state.get('version')} is not "
                               f"{self.VERSION}; relaunch with --reset-dataloader")
        self.begin_epoch(int(state["epoch"]))
        self.cursor = int(state["next_window"])
        self.deferred = [np.asarray(state["deferred"], dtype=np.int64)]
        self.deferred_weights = [np.asarray(state["deferred_weights"], dtype=np.float32)]
        self.accept_all = bool(state.get("accept_all", False))
        self.generation = int(state.get("generation", 0))


def weights_of(ids: np.ndarray, weight_ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``weights[k]`` for every id of *ids*, where ``weight_ids[k] == id`` (all present)."""
    order = np.argsort(weight_ids, kind="stable")
    return weights[order][np.searchsorted(weight_ids[order], ids)].astype(np.float32)


def _concat_weights(arrays: List[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, np.float32)


def _accept_everything(ids: np.ndarray) -> np.ndarray:
    return np.ones(len(ids))


def concat_ids(arrays: List[np.ndarray]) -> np.ndarray:
    """One id array from a list of them (empty list: an empty int64 array)."""
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
