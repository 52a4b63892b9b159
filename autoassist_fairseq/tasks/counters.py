"""The Boss's counters: every count a training step's log carries, and what a checkpoint
saves of them.

Every source reports a cumulative value: the stream the window counts credited to the
batches trained (:meth:`~..data.batch_stream.BatchStream.credited_at`), the client the Boss's
wait for windows and the loss messages dropped on the way to the Assistant, the Assistant
its non-finite losses, and the training steps the Boss's tokens (counted here). One routine,
:meth:`Counters.step`, turns them into what happened since the last step's log.

fairseq reduces the logs of an update once its steps are done (the task's
``reduce_metrics``), and skips that reduce after an update it throws away (an ``--fp16``
overflow): the next update's first step then logs everything since the last update that
was reduced, so ``aa_boss_tok`` and the other run totals lose none of it. fairseq's
``--amp`` retries an update after an overflow and keeps only the retry's logs: a retried
batch logs what its first step did.

The run's totals over every rank (``aa_boss_tok``, ``aa_boss_padded_tok``, ``aa_skip_tok``)
add up each update's counts that :func:`~..metrics.reduce` summed over the ranks' logs; they
are the only counts a checkpoint saves (its ``totals``).
"""

from typing import Callable, Dict, Optional, Tuple

from ..metrics import COUNTED, RUN_TOTALS, SUMMED

# cumulative at their sources, logged as what happened since the last step
CUMULATIVE = SUMMED + tuple(COUNTED)


class Counters:
    """The cumulative counts as last logged, and the run's totals.

    Args:
        run_totals (dict, optional): the totals of the previous data shard's iterator
            (``--data a:b``): one dict for the whole run, since fairseq's derived meters
            keep the first dict they read.
    """

    def __init__(self, run_totals: Optional[dict] = None):
        self.run_totals = run_totals if run_totals is not None \
            else dict.fromkeys(RUN_TOTALS, 0.0)
        self._trained = {"boss_tokens": 0.0, "boss_padded_tokens": 0.0}
        self._logged = dict.fromkeys(CUMULATIVE, 0.0)  # as of the last step's log
        self._reduced = dict(self._logged)  # as of the last update whose logs were reduced
        self._unreduced = False  # a step logged since the last reduce
        self._update: Dict[int, dict] = {}  # the update under way's steps, by batch number

    def start(self, assistant: Optional[dict]) -> None:
        """The Assistant starts from *assistant* (a saved state, or None): the non-finite
        losses it counted were logged by the run that saved it."""
        nonfinite = float((assistant or {}).get("nonfinite", 0))
        self._logged["nonfinite"] = self._reduced["nonfinite"] = nonfinite

    def step(self, seq: int, tokens: float, padded_tokens: float,
             read: Callable[[], Tuple[dict, dict]], retry: bool = False) -> dict:
        """The statistics (:mod:`..metrics`) of a training step on batch number *seq*, of
        *tokens* tokens (*padded_tokens* with padding): the change of every cumulative count
        since the last step, and the current values *read* returns beside the cumulative
        ones (a source absent from them has not changed). A *retry* (fairseq's ``--amp``
        trains a batch of this update again, as the loss handover tells) logs the batch's
        first step's statistics again, and counts nothing."""
        if retry:
            return dict(self._update[seq])
        self._trained["boss_tokens"] += tokens
        self._trained["boss_padded_tokens"] += padded_tokens
        cumulative, current = read()
        now = dict(self._logged, **cumulative, **self._trained)
        stats = {key: now[key] - self._logged[key] for key in CUMULATIVE}
        stats.update(current)
        self._logged = now
        self._update[seq] = stats
        self._unreduced = True
        return dict(stats)

    def update_begins(self) -> None:
        """A new update starts: after one whose logs fairseq never reduced, its first step
        logs everything since the last reduced update."""
        if self._unreduced:
            self._logged = dict(self._reduced)
            self._unreduced = False
        self._update = {}

    def update_reduced(self, summed: dict) -> None:
        """The update's logs were reduced: its counts over every rank, *summed*, go to the
        run's totals."""
        for key in RUN_TOTALS:
            self.run_totals[key] += summed[key]
        self._reduced = dict(self._logged)
        self._unreduced = False

    def state_dict(self) -> dict:
        """The run's totals, as the checkpoint saves them."""
        return dict(self.run_totals)

    def load_state_dict(self, totals: dict) -> None:
        """Restore the run's totals in place (the derived meters hold the dict)."""
        self.run_totals.update({key: float(totals[key]) for key in RUN_TOTALS})
