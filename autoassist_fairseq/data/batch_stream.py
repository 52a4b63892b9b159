"""The Boss's side of the batch stream: what it took from the Assistant, and what is left.

The Assistant produces windows of batches, pass after pass (``batch_generator``). The Boss
takes batches from that stream one at a time; an epoch is a fixed number of them, agreed
by every rank before it starts (:func:`agree_num_batches`). A pass that ends early because
pairs were skipped does not end the epoch: the next pass fills it. So no skipped pair is
ever added back and no rank waits on dummy batches, and every rank still makes the same
number of updates, which keeps distributed collectives in step.

:class:`BatchStream` mirrors exactly what has been taken: the generator's state after the
last window taken, the batches taken but not yet issued, and every batch issued in the
current epoch, so that the state at any consumed count (checkpoints happen while data
loader workers and the buffer thread run ahead) can be saved and resumed exactly.
"""

import json
import logging
import math
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Deque, List, NamedTuple, Optional, Tuple

import numpy as np

from ..metrics import COUNTERS
from .batch_generator import BatchGenerator, weights_of
from .plan import WindowPlan


class Batch(NamedTuple):
    """A batch of the stream: its dataset ids, their importance weights (or None), and its
    run-wide number, which its losses carry back to the Assistant."""

    ids: np.ndarray
    weights: Optional[np.ndarray]
    seq: int


logger = logging.getLogger(__name__)


def agree_num_batches(views: List[dict]) -> int:
    """This epoch's batch count from every rank's view ``{"full": ..., "rate": ...}``.

    The mean over ranks of ``full_r * rate_r`` (the rank's batches with every pair accepted,
    times the share of tokens its Assistant expects to accept), rounded up: an epoch is about
    one pass of every shard; a rank whose pass is shorter or longer goes on in its stream.
    """
    want = [min(v["full"], v["full"] * v["rate"]) for v in views]
    return max(1, math.ceil(sum(want) / len(want)))


@dataclass
class StreamState:
    """What a rank must save to resume its stream exactly (see :meth:`BatchStream.state`)."""

    generator: dict
    pending: List[np.ndarray]
    weights: Optional[List[np.ndarray]] = None
    # the rate estimate's (accepted, considered) tokens of recent windows: the next epoch's
    # batch count depends on it, so a resumed run must count as the uninterrupted one
    rate: Optional[List[List[float]]] = None
    # the counts of the windows taken, still to be credited to the pending batches (so that
    # a resumed run counts every window once; what the batches trained hold is in the run's
    # totals, which the iterator saves)
    untold: Optional[dict] = None
    untold_batches: int = 0
    # the counts already credited to the first pending batches: issued before the save (a
    # loader ran ahead), not trained. A resumed run credits them the same, so that its log
    # lines equal the uninterrupted run's; None (saved before this field): they are in
    # ``untold``, spread again over every batch still to be credited
    credits: Optional[List[dict]] = None
    # the counters of the data pass under way, as of the windows taken (its log line)
    pass_counts: Optional[dict] = None


@dataclass
class _RateEstimate:
    """Token-weighted expected acceptance rate over the last pass's worth of windows."""

    windows: int
    recent: Deque[Tuple[float, float]] = field(default_factory=deque)

    def add(self, rate: float, tokens: float) -> None:
        self.recent.append((rate * tokens, tokens))
        while len(self.recent) > self.windows:
            self.recent.popleft()

    @property
    def value(self) -> float:
        tokens = sum(t for _, t in self.recent)
        return sum(a for a, _ in self.recent) / tokens if tokens else 1.0


class BatchStream:
    """The batches a rank takes from its Assistant's windows.

    Args:
        generator (BatchGenerator): the Boss's copy of this shard's generator; gives the
            batch counts, and makes the windows itself after a fallback to uniform batches.
        reweight (bool): keep each pair's importance weight with its batch.
        pass_log (str, optional): a JSON-lines file to append each finished data pass's
            record to (:func:`pass_record`; default: none).
    """

    def __init__(self, generator: BatchGenerator, reweight: bool = False,
                 pass_log: Optional[str] = None):
        self.generator = generator
        self.reweight = reweight
        self.pass_log = pass_log
        self.gen_state: Optional[dict] = None  # the generator's state after the last window
        self.pending: Deque[Batch] = deque()  # taken, not yet issued
        self.issued: List[Batch] = []  # issued in the current epoch, in order
        self.issued_counts: List[dict] = []  # the counters credited to each issued batch
        self.issued_offset = 0  # consumed count of the epoch at issued[0]
        # this process's counts credited to the batches issued, cumulative: the iterator's
        # counters log their change (``tasks.counters``)
        self.credited = dict.fromkeys(COUNTERS, 0.0)
        self._untold = dict.fromkeys(COUNTERS, 0.0)  # counts of windows taken, not yet issued
        self._untold_batches = 0
        self._credits: Deque[dict] = deque()  # restored credits of the first pending batches
        self.pass_counts = dict.fromkeys(COUNTERS, 0.0)  # the data pass under way
        self.rate = _RateEstimate(windows=generator.num_windows)
        self.assistant_stats: dict = {}
        self.generation = 0  # restarts of the Assistant's stream; older windows are dropped
        # the training thread saves and restarts while a loader thread may take batches
        self.lock = threading.Lock()

    # -- epochs -------------------------------------------------------------------------
    def begin_epoch(self, offset: int = 0) -> None:
        """Forget the previous epoch's issued batches; *offset*: batches already trained."""
        with self.lock:
            self.issued, self.issued_counts, self.issued_offset = [], [], offset

    def next_batch(self, next_window: Callable[[], WindowPlan]) -> Batch:
        """The next batch of the stream, taking windows from *next_window* as needed."""
        while True:
            with self.lock:
                if self.pending:
                    batch = self.pending.popleft()
                    self.issued.append(batch)
                    self.issued_counts.append(self._count_issue())
                    return batch
            window = next_window()
            with self.lock:
                if window.state_after.get("generation", 0) == self.generation:
                    self.take(window)

    @property
    def next_seq(self) -> int:
        """The number of the next batch to issue: every batch before it has been issued."""
        with self.lock:
            if self.pending:
                return self.pending[0].seq
            return int((self.gen_state or self.generator.state_dict()).get("batches_made", 0))

    def restart(self) -> dict:
        """A new generation of the stream: returns the generator state to restart from
        (after the last window taken); windows of older generations are dropped."""
        with self.lock:
            self.generation += 1
            state = self.gen_state if self.gen_state is not None else \
                self.generator.state_dict()
            return dict(state, generation=self.generation)

    def take(self, window: WindowPlan) -> None:
        for k, ids in enumerate(window.batches):
            weights = weights_of(ids, window.weight_ids, window.weights) if self.reweight else None
            self.pending.append(Batch(ids, weights, window.first_seq + k))
        self.gen_state = window.state_after
        for key in COUNTERS:
            value = getattr(window, key)
            self._untold[key] += value
            self.pass_counts[key] += value
        self._untold_batches += len(window.batches)
        if window.considered_tokens:
            self.rate.add(window.expected_token_rate, window.considered_tokens)
        if window.stats:
            self.assistant_stats = window.stats
        if window.ends_pass:
            self._log_pass(window.data_pass)

    def _log_pass(self, data_pass: int) -> None:
        """One log line per data pass: what share of it the Assistant accepted, and its
        record in the pass log. A fairseq epoch (a batch count) spans passes, so its
        ``aa_accept_tok`` mixes two; the random control's per-pass rates
        (``--assistant-random-rates``) are read from the records, not from the line's text."""
        record = pass_record(data_pass, self.generator.shard_id, self.pass_counts)
        logger.info(f"AutoAssist data pass {data_pass} (shard {record['shard']}): "
                    f"accepted {record['token_rate']:.4f} of its tokens, "
                    f"{record['pair_rate']:.4f} of its pairs")
        if self.pass_log:
            # one write of one line per record in append mode: the ranks' records, and a
            # resumed run's after the interrupted one's, interleave whole
            with open(self.pass_log, "a") as f:
                f.write(json.dumps(record) + "\n")
        self.pass_counts = dict.fromkeys(COUNTERS, 0.0)

    def _count_issue(self) -> dict:
        """Credit a window's counts to its batches as they are issued, so that every logging
        interval (not only those in which a window arrives) shows what was skipped; returns
        the batch's credit. A batch that a saved run had issued already gets the credit it
        had there."""
        if self._credits:
            moved = self._credits.popleft()
            for key in COUNTERS:
                self.credited[key] += moved[key]
            return moved
        share = 1.0 / max(1, self._untold_batches)
        moved = {}
        for key in COUNTERS:
            moved[key] = self._untold[key] * share
            self.credited[key] += moved[key]
            self._untold[key] -= moved[key]
        self._untold_batches = max(0, self._untold_batches - 1)
        return moved

    def _ahead(self, consumed: int) -> List[dict]:
        """The credits of the batches issued after *consumed* (prefetched, not trained)."""
        return self.issued_counts[max(0, consumed - self.issued_offset):]

    def credited_at(self, consumed: int) -> dict:
        """The counts credited to the batches trained when *consumed* batches of the epoch
        are (since this stream started)."""
        with self.lock:
            ahead = self._ahead(consumed)
            return {k: v - sum(c[k] for c in ahead) for k, v in self.credited.items()}

    # -- checkpoints ----------------------------------------------------------------------
    def state(self, consumed: int) -> StreamState:
        """The stream as of *consumed* batches of the current epoch trained: batches issued
        after that point (prefetched) go back in front of the pending ones."""
        with self.lock:
            batches = self.issued[max(0, consumed - self.issued_offset):] + list(self.pending)
            gen = self.gen_state if self.gen_state is not None else self.generator.state_dict()
            rate = [[a, t] for a, t in self.rate.recent]
            credits = [dict(c) for c in self._ahead(consumed)] + [dict(c) for c in self._credits]
            pass_counts = dict(self.pass_counts)
        weights = [b.weights for b in batches] if self.reweight else None
        return StreamState(generator=gen, pending=[b.ids for b in batches], weights=weights,
                           rate=rate, untold=dict(self._untold),
                           untold_batches=self._untold_batches, credits=credits,
                           pass_counts=pass_counts)

    def restore(self, state: StreamState) -> None:
        self.gen_state = dict(state.generator)
        weights = state.weights or [None] * len(state.pending)
        # the pending batches are the last ones the generator made, in order
        first = int(self.gen_state.get("batches_made", 0)) - len(state.pending)
        self.pending = deque(
            Batch(np.asarray(ids, np.int64), None if w is None else np.asarray(w, np.float32),
                  first + k)
            for k, (ids, w) in enumerate(zip(state.pending, weights)))
        # a field left None was not recorded by the saving run
        if state.rate is not None:  # else: estimated afresh from the windows taken
            self.rate.recent = deque((float(a), float(t)) for a, t in state.rate)
        if state.untold is not None:  # else: the pending batches carry no counts
            self._untold = {k: float(state.untold.get(k, 0.0)) for k in COUNTERS}
            self._untold_batches = int(state.untold_batches)
        self._credits = deque({k: float(c.get(k, 0.0)) for k in COUNTERS}
                              for c in state.credits or [])
        if state.pass_counts is not None:  # else: the pass's first line after the
            # resume counts only the windows from there
            self.pass_counts = {k: float(state.pass_counts.get(k, 0.0)) for k in COUNTERS}


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 1.0


def pass_record(data_pass: int, shard: int, counts: dict) -> dict:
    """The record of a finished data pass of *shard*: its counters (as of the windows the
    Boss took) and the shares accepted, ``token_rate`` and ``pair_rate`` (1.0 for an empty
    pass). Its keys are the pass log's format, which research reads."""
    record = {"data_pass": int(data_pass), "shard": int(shard)}
    record.update({key: float(counts[key]) for key in COUNTERS})
    record["token_rate"] = _share(counts["accepted_tokens"], counts["considered_tokens"])
    record["pair_rate"] = _share(counts["accepted_pairs"], counts["considered_pairs"])
    return record
