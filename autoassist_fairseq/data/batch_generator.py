"""Windows of candidates -> Boss batches of accepted pairs, under fairseq's rules.

The generator is a stream of data passes. A pass visits every pair of the shard exactly
once, in windows of random pairs (a permutation drawn from ``(seed, pass, shard)``, cut into
``window_size`` slices). Each window is scored at once with the Assistant's *current* state.
Its accepted pairs join a pool with those carried over from earlier windows; once the pool
holds ``window_size`` pairs it is sorted by length and cut by fairseq's own
``batch_by_size`` (``fairseq_batcher``: so ``max_tokens``, ``max_sentences``,
``required_batch_size_multiple`` and padding follow fairseq), its batches are shuffled, and
its partly filled last batch is carried on. So batches are always cut from about
``window_size`` pairs, however many are skipped, and padding stays near fairseq's. The last
window of a pass batches what is left and ends the pass; the next pass starts right away,
and rejected pairs are candidates again there.

Windows are random pairs so that consecutive updates mix lengths as fairseq's shuffled
batches do: windows of similar length give runs of about 18 updates of one length, from
which the Boss learned less per token (docs/results/equal-compute.md).

Passes are not the Boss's epochs: an epoch takes a fixed number of batches from the
stream (see ``batch_stream``), so no skipped pair is ever added back to fill a count.
"""

import math
from typing import Callable, Optional

import numpy as np

from ..assistant.acceptance import draw_accepted
from .fairseq_batcher import FairseqBatcher
from .plan import WindowPlan

AcceptFn = Callable[[np.ndarray], np.ndarray]


class BatchGenerator(FairseqBatcher):
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

    def __init__(self, indices, src_sizes, tgt_sizes, max_tokens=None, max_sentences=None,
                 required_batch_size_multiple=1, window_size=4096, seed=1, num_shards=1,
                 shard_id=0):
        super().__init__(src_sizes, tgt_sizes, max_tokens, max_sentences,
                         required_batch_size_multiple)
        assert 0 <= shard_id < num_shards, (shard_id, num_shards)
        assert window_size >= 1, "checked by the task's config (--assistant-window)"
        # pairs in fairseq's order, dealt round-robin: shards are disjoint and get the same
        # length distribution
        self.shard = np.asarray(indices, dtype=np.int64)[shard_id::num_shards]
        if not len(self.shard):  # every rank sees the same count, so all stop here
            raise ValueError(f"worker {shard_id} of {num_shards} has no training pair: the "
                             f"training set holds {len(indices)} pairs within fairseq's size "
                             "limits (--max-source-positions, --max-target-positions, "
                             "--max-tokens); train on fewer workers, or check the data and "
                             "those limits")
        self.window_size = window_size
        self.seed, self.shard_id = seed, shard_id
        # (data pass, seed) of a pass resumed from a state saved under another --seed: that
        # pass goes on in the order its seed drew, so that each of its pairs is a candidate
        # once; the passes after it use self.seed
        self._resumed_seed: Optional[tuple] = None
        self.num_windows = max(1, math.ceil(len(self.shard) / window_size))
        self._full_count = None
        self._pass_counts = {}
        self.data_pass = 0
        self.cursor = 0  # windows made in this pass
        self.position = 0  # pairs of this pass's order visited
        self.carry = np.zeros(0, np.int64)
        self.carry_weights = np.zeros(0, np.float32)
        self.accept_all = False
        # the first batch number of annealing by updates (not saved: the Boss's iterator
        # sends it with every restart of the stream)
        self.accept_all_from: Optional[int] = None
        self.generation = 0  # echoed in every window: the Boss drops those of old streams
        # batches of every window made so far, run-wide: window k's first batch has this
        # number (its ``first_seq``), so the Boss and the Assistant name a batch alike
        self.batches_made = 0
        self._order_cache = None

    # -- batch counts and pools ------------------------------------------------------
    def full_batch_count(self) -> int:
        """Batches of one pass over this shard in one pool (about a plain fairseq epoch's)."""
        if self._full_count is None:
            self._full_count = len(self.make_batches(self.shard))
        return self._full_count

    def pass_batch_count(self, data_pass: int) -> int:
        """Batches *data_pass* would have if every candidate were accepted (a little above
        :meth:`full_batch_count`: pools of ``window_size`` pairs pack a little less tightly)."""
        if data_pass not in self._pass_counts:
            order, _ = self._order(data_pass)
            count, carry = 0, np.zeros(0, np.int64)
            for w in range(self.num_windows):
                batches, carry = self._cut(np.concatenate([carry, self._window_ids(order, w)]))
                count += len(batches)
            count += len(self.make_batches(carry))
            self._pass_counts = {data_pass: count}
        return self._pass_counts[data_pass]

    def _cut(self, pool: np.ndarray):
        """(batches, carried pairs) of a pool: once it holds ``window_size`` pairs, the
        batches fairseq cuts from it but the last one, whose pairs are carried on with the
        next window's, as are the pairs fairseq left out of any batch.

        The left-out pairs are carried too, so that every batch but a pass's last is cut
        from a full pool: batched on their own they would make a batch of a few pairs in
        most windows of a pass where any pair is skipped
        (``required_batch_size_multiple`` 8, Tatoeba: 1.6% fewer tokens per update after
        77 tokens were skipped, docs/design.md).
        """
        if len(pool) < self.window_size:
            return [], pool
        ids = self._sorted(pool)
        batches = self._batch_by_size(ids, self.bsz_mult)[:-1]
        return batches, ids[sum(len(b) for b in batches):]

    # -- passes ----------------------------------------------------------------------
    def _order(self, data_pass: int):
        """The shard in a random order of *data_pass*, and the window to start from."""
        rng = np.random.default_rng([self.pass_seed(data_pass), data_pass, self.shard_id])
        return rng.permutation(self.shard), 0

    def pass_seed(self, data_pass: int) -> int:
        """The seed of *data_pass*'s order and draws: ``--seed``, except for a pass resumed
        from a state saved under another one, which keeps the saved seed."""
        if self._resumed_seed is not None and self._resumed_seed[0] == data_pass:
            return self._resumed_seed[1]
        return self.seed

    def _window_ids(self, order, w):
        start = w * self.window_size
        return order[start:start + self.window_size]

    @property
    def pass_done(self) -> bool:
        """Whether every pair of this pass's order was a candidate."""
        return self.position >= len(self.shard)

    def begin_pass(self, data_pass: int) -> None:
        """Start *data_pass* (1-based) from its first window."""
        assert data_pass >= 1, f"passes are numbered from 1, got {data_pass}"
        self.data_pass = data_pass
        self._order_cache = self._order(data_pass)
        self.cursor = 0
        self.position = 0
        self.carry = np.zeros(0, np.int64)  # accepted, not batched yet
        self.carry_weights = np.zeros(0, np.float32)

    def begin(self, msg) -> None:
        """Apply a ``RestartStream`` control message: a saved state, or a fresh pass; and
        whether every candidate is accepted from now on (annealing, uniform fallback).

        A state's ``accept_all`` records what its windows did; whether the next ones accept
        every pair is the Boss's to say at every restart, so a run resumed after the saved
        run fell back to uniform batches scores its windows with its own Assistant again."""
        if msg.state is not None:
            self.load_state_dict(msg.state)
        else:
            self.begin_pass(msg.data_pass)
        self.accept_all = bool(msg.accept_all)
        self.accept_all_from = msg.accept_all_from

    @property
    def accepts_all_next(self) -> bool:
        """Whether the next window accepts every candidate: annealing (from a batch number
        on), or the uniform fallback."""
        return self.accept_all or (self.accept_all_from is not None
                                   and self.batches_made >= self.accept_all_from)

    def next_window(self, accept_fn: AcceptFn) -> Optional[WindowPlan]:
        """Score and batch the next window of the stream; None before :meth:`begin`.

        Windows ``0 .. num_windows - 1`` hold candidates; window ``num_windows`` batches the
        pairs still carried and ends the pass. A window holds the next ``window_size`` pairs
        of the pass's order: a pass resumed with another window size goes on with the same
        order from the same pair (then the window count of that pass differs).
        """
        if self._order_cache is None:
            return None
        if self.accepts_all_next:
            self.accept_all = True  # from here on, also in the states saved after this window
            accept_fn = _accept_everything
        if not self.pass_done:
            plan = self._regular_window(accept_fn)
        else:
            plan = self._last_window()
            self.begin_pass(self.data_pass + 1)
        plan.first_seq = self.batches_made
        self.batches_made += len(plan.batches)
        plan.state_after = self.state_dict()
        return plan

    def _window_rng(self, window: int) -> np.random.Generator:
        return np.random.default_rng([self.pass_seed(self.data_pass), self.data_pass,
                                      self.shard_id, window, 1])

    def _regular_window(self, accept_fn: AcceptFn) -> WindowPlan:
        w = self.cursor
        ids = self._order_cache[0][self.position:self.position + self.window_size]
        rng = self._window_rng(w)
        prob = np.asarray(accept_fn(ids), dtype=np.float64)
        if not np.isfinite(prob).all():  # a NaN would skip its pair in every pass, silently
            raise FloatingPointError(f"the Assistant gave non-finite acceptance probabilities "
                                     f"in window {w} of data pass {self.data_pass}")
        accepted = draw_accepted(prob, rng)
        # Horvitz-Thompson: a pair kept with probability p stands for 1/p of itself
        weight = (1.0 / prob[accepted]).astype(np.float32)
        pool = np.concatenate([self.carry, ids[accepted]])
        pool_weights = np.concatenate([self.carry_weights, weight])
        batches, self.carry = self._cut(pool)
        self.carry_weights = weights_of(self.carry, pool, pool_weights)
        rng.shuffle(batches)
        self.cursor = w + 1
        self.position += len(ids)
        cost = self.num_tokens(ids).astype(np.float64)
        kept = ids[accepted]
        return WindowPlan(
            data_pass=self.data_pass, window=w, batches=batches,
            considered_pairs=len(ids), considered_tokens=self.pair_tokens(ids),
            accepted_pairs=len(kept), accepted_tokens=self.pair_tokens(kept),
            expected_token_rate=float((prob * cost).sum() / max(cost.sum(), 1.0)),
            weight_ids=pool, weights=pool_weights)

    def _last_window(self) -> WindowPlan:
        """The pairs still carried, batched (already counted as accepted); ends the pass."""
        batches = self.make_batches(self.carry)
        self._window_rng(self.cursor).shuffle(batches)
        return WindowPlan(data_pass=self.data_pass, window=self.cursor, batches=batches,
                          weight_ids=self.carry, weights=self.carry_weights)

    # -- resume ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The layout is part of the checkpoint schema (``data/schema.py``), which checks a
        saved state before it reaches :meth:`load_state_dict`."""
        return {"data_pass": self.data_pass, "next_window": self.cursor, "next_pair": self.position,
                "window_size": self.window_size, "carried": self.carry.copy(),
                "carried_weights": self.carry_weights.copy(), "accept_all": self.accept_all,
                "generation": self.generation, "batches_made": self.batches_made,
                "seed": self.pass_seed(self.data_pass)}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state; a pass saved under another ``--seed`` goes on with the saved
        one."""
        data_pass = int(state["data_pass"])
        saved_seed = int(state["seed"])
        self._resumed_seed = (data_pass, saved_seed) if saved_seed != self.seed else None
        self._pass_counts = {}  # counted with the seed of the pass they count
        self.begin_pass(data_pass)
        self.cursor = int(state["next_window"])
        self.position = min(int(state["next_pair"]), len(self.shard))
        self.carry = np.asarray(state["carried"], dtype=np.int64)
        self.carry_weights = np.asarray(state["carried_weights"], dtype=np.float32)
        self.accept_all = bool(state.get("accept_all", False))
        self.generation = int(state.get("generation", 0))
        self.batches_made = int(state.get("batches_made", 0))


def weights_of(ids: np.ndarray, weight_ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``weights[k]`` for every id of *ids*, where ``weight_ids[k] == id`` (all present)."""
    order = np.argsort(weight_ids, kind="stable")
    return weights[order][np.searchsorted(weight_ids[order], ids)].astype(np.float32)


def _accept_everything(ids: np.ndarray) -> np.ndarray:
    return np.ones(len(ids))

