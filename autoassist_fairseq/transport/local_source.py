"""Windows made in the Boss's own process: the deterministic mode and the uniform fallback.

``--assistant-sync`` trades the Assistant process's asynchrony for runs that repeat
exactly. Window k is scored with the Assistant's state after exactly the losses of the
batches numbered below ``first_seq(k) - lag``, learned in batch order, and after no other
loss. Which losses those are depends only on the batch plan, never on timing, so the
windows, the batches and the Boss's updates depend only on the seed, the data and the
flags.

``lag`` counts the batches that can be made but not yet trained and reported when the
next window is needed: those prefetched by the data loader and its buffer thread, an
update's micro-batches, and the newest losses, which the Boss hands over one step late.
Window k waits for the losses of batch ``first_seq(k) - lag - 1`` (or any later one: a
batch fairseq skips, e.g. after an out-of-memory error, reports none); with a lag of at
least that pipeline's depth the Boss trains those batches without needing window k, so the
wait ends. A wait that does not end within ``LOSS_TIMEOUT`` raises instead of hanging.

Without an Assistant the source accepts every candidate: the uniform batches a run falls
back on when its Assistant process fails (``--assistant-fallback uniform``).

Learning happens when a window is made, on the thread that asks for it (the data loader's
buffer thread when fairseq buffers batches, else the training thread); the lock makes a
saved state consistent with the windows made: the Assistant, and the losses it has
received but not learned yet, which a resumed run learns in the same order.
"""

import threading
import time
import traceback
from typing import Callable, List, Optional, Tuple

import numpy as np

from ..data.batch_generator import BatchGenerator
from .process import AssistantDied

# How long a window may wait for the losses it must learn from first (seconds).
LOSS_TIMEOUT = 300.0

HeldLoss = Tuple[int, np.ndarray, np.ndarray]  # (batch number, dataset ids, losses)


def pipeline_lag(num_workers: int = 0, buffer_size: int = 0, update_freq: int = 1) -> int:
    """Batches that may be made but not yet trained and reported when a window is needed.

    Counts fairseq's pipeline: ``2 * num_workers`` index batches a ``DataLoader`` primes
    plus the one it hands on, ``buffer_size`` batches a ``BufferedIterator`` holds plus the
    one its thread carries, ``update_freq`` micro-batches gathered for one update, and the
    newest losses held back one step (:class:`~..losses.BossLosses`); one more for safety.
    """
    return 2 * max(num_workers, 0) + 1 + max(buffer_size, 0) + 1 + max(update_freq, 1) + 2


class LocalSource:
    """Makes the windows of one shard in the Boss's process.

    Args:
        generator (BatchGenerator): the shard's generator (the Boss's copy).
        make_assistant (callable, optional): builds the :class:`~..assistant.Assistant`;
            None accepts every candidate (uniform batches).
        lag (int, optional): see the module's docstring (default: 0).
        timeout (float, optional): seconds a window waits for its losses (default:
            ``LOSS_TIMEOUT``).
    """

    def __init__(self, generator: BatchGenerator, make_assistant: Optional[Callable] = None,
                 lag: int = 0, timeout: float = LOSS_TIMEOUT):
        assert lag >= 0, lag
        self.generator = generator
        self.assistant = make_assistant() if make_assistant is not None else None
        self.lag, self.timeout = lag, timeout
        self._held: List[HeldLoss] = []  # received, not learned yet, in batch order
        self._reported = -1  # the highest batch number whose losses arrived
        self._learned_msgs = 0
        self._announced = None  # the data pass last announced to the Assistant
        self._cond = threading.Condition()

    dropped_losses = 0  # nothing is ever dropped

    @property
    def learns(self) -> bool:
        """Whether an Assistant scores the windows (not the uniform fallback)."""
        return self.assistant is not None

    # -- Boss -> source ------------------------------------------------------------------
    def restart(self, gen_state: dict, accept_all: bool, reported_before: int,
                accept_all_from: Optional[int] = None) -> None:
        """Go on from *gen_state* (windows made since are dropped by the Boss). Every batch
        numbered below *reported_before* has been trained, its losses already given. From
        the window whose first batch is numbered *accept_all_from* on, every pair is
        accepted; before it, only with *accept_all* or without an Assistant (the state's
        own ``accept_all`` is a record, see :meth:`BatchGenerator.begin`)."""
        with self._cond:
            self.generator.load_state_dict(gen_state)
            self.generator.accept_all = bool(accept_all) or self.assistant is None
            self.generator.accept_all_from = accept_all_from
            self._reported = max(self._reported, reported_before - 1)
            self._cond.notify_all()

    def send_losses(self, ids: np.ndarray, losses: np.ndarray, seq: int) -> None:
        """The per-sentence losses of batch *seq* (batches arrive in training order)."""
        if self.assistant is None:
            return
        with self._cond:
            self._held.append((int(seq), np.asarray(ids, np.int64),
                               np.asarray(losses, np.float64)))
            self._reported = max(self._reported, int(seq))
            self._cond.notify_all()

    def load(self, state: dict) -> None:
        """An Assistant state saved by :meth:`state` (or by the Assistant process, which has
        no held losses)."""
        if self.assistant is None:
            return
        with self._cond:
            self.assistant.load_state_dict(state)
            held = state.get("held_losses") or []
            self._held = [(int(s), np.asarray(i, np.int64), np.asarray(v, np.float64))
                          for s, i, v in held] + self._held

    # -- source -> Boss ------------------------------------------------------------------
    def next_window(self):
        """The next window, from the Assistant's state after exactly the losses of the
        batches numbered below ``first_seq - lag``."""
        with self._cond:
            gen = self.generator
            if gen.accepts_all_next or self.assistant is None:
                return gen.next_window(None)
            due = gen.batches_made - self.lag  # learn the losses of batches below this
            self._wait_for(due)
            self._learn_below(due)
            if gen.data_pass != self._announced:
                self._announced = gen.data_pass
                self._assistant_call(self.assistant.begin_pass, gen.data_pass)
            plan = gen.next_window(self._accept_probability)
            plan.stats = self.stats()
            return plan

    # Only the Assistant's own code fails as a dead Assistant would (--assistant-fallback
    # applies); an exception of the generator or of this class is a bug of the Boss's
    # process and propagates, so that --assistant-fallback uniform never hides it.
    @staticmethod
    def _assistant_call(fn, *args):
        try:
            return fn(*args)
        except Exception:
            raise AssistantDied("the Assistant failed (in the Boss's process, "
                                f"--assistant-sync):\n{traceback.format_exc()}") from None

    def _accept_probability(self, ids: np.ndarray) -> np.ndarray:
        prob = self._assistant_call(self.assistant.accept_probability, ids)
        prob = np.asarray(prob, dtype=np.float64)
        bad = np.count_nonzero(~np.isfinite(prob))
        if bad:  # the Assistant's output: its failure, as in the Assistant process
            raise AssistantDied(f"the Assistant failed (in the Boss's process, "
                                f"--assistant-sync): it gave non-finite acceptance "
                                f"probabilities for {bad} of {len(prob)} candidates")
        return prob

    def _wait_for(self, due: int) -> None:
        deadline = time.monotonic() + self.timeout
        while self._reported < due - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(
                    f"--assistant-sync: the window after batch {self.generator.batches_made} "
                    f"waited {self.timeout:.0f}s for the losses of batch {due - 1}, but the "
                    f"last losses came from batch {self._reported}: more batches are in "
                    f"flight than the lag of {self.lag} allows for. Please report this with "
                    "your command; to train meanwhile, drop --assistant-sync")
            self._cond.wait(min(left, 1.0))

    def _learn_below(self, due: int) -> None:
        keep = 0
        for seq, ids, losses in self._held:
            if seq >= due:
                break
            if len(ids):
                self._assistant_call(self.assistant.learn, ids, losses)
            self._learned_msgs += 1
            keep += 1
        del self._held[:keep]

    def stats(self) -> dict:
        stats = self._assistant_call(getattr, self.assistant, "stats")
        return dict(stats, loss_msgs=self._learned_msgs)

    def state(self) -> dict:
        """``{"assistant": ..., "stats": ...}`` as the Assistant process answers; the
        assistant state also holds the losses received but not learned yet."""
        if self.assistant is None:
            return {"assistant": None, "stats": None}
        with self._cond:
            state = self.assistant.state_dict()
            state["held_losses"] = [(s, i.copy(), v.copy()) for s, i, v in self._held]
            return {"assistant": state, "stats": self.stats()}

    # -- the rest of the source interface (as AssistantProcess) ----------------------------
    def check(self) -> None:
        """Nothing runs apart: a failure raises where the window is made."""

    def shutdown(self) -> None:
        """Nothing to stop."""
