"""What each training step's logging output carries of the iterator's counters.

fairseq reduces the logs of an update once its steps are done (the task's
``reduce_metrics``), and skips that reduce after an update it throws away (an ``--fp16``
overflow). :class:`StepLogs` keeps every count of such an update: it goes with the next
update's first step, so that ``aa_boss_tok`` and the other run totals lose none. It also
turns the counters the stream, the client and the Assistant keep cumulatively into what
happened since the last log.
"""

from typing import List, Optional

from ..metrics import COUNTED, SUMMED

# the step statistics that count (tokens, pairs, seconds, losses dropped): those of an update
# whose logs fairseq never reduced are added to the next update's
CARRIED = SUMMED + tuple(COUNTED)


class StepLogs:
    """The counts of the update under way's steps until their logs are reduced, and the
    cumulative counters as last logged.

    ``logged_nonfinite``: the Assistant's count of non-finite losses as last logged; a
    restored Assistant's count was logged by the saved run, so the iterator sets it from the
    restored state.
    """

    def __init__(self):
        # the stats of the update under way's steps, until its logs are reduced; those of an
        # update never reduced go with the next update's first step (_carried)
        self._unreduced: List[dict] = []
        self._carried: dict = {}
        self._logged = {}
        self.logged_nonfinite = 0
        self._dropped = 0

    def update_begins(self) -> None:
        """A new update starts: the counts of a previous one whose logs were never reduced
        are carried to its first step."""
        if self._unreduced:  # the previous update's logs were never reduced
            self._carried = {key: sum(float(s.get(key, 0.0)) for s in self._unreduced)
                             for key in CARRIED}
            self._unreduced = []

    def update_reduced(self) -> None:
        """The update's logs were reduced: its counts are in the run's totals."""
        self._unreduced = []

    def step(self, stats: dict) -> dict:
        """A training step's *stats* (:mod:`..metrics`) as its logging output carries them:
        the first step of an update also carries the summed counts of the steps whose logs
        fairseq never reduced."""
        if self._carried:
            stats = dict(stats)
            for key, value in self._carried.items():
                stats[key] = stats.get(key, 0.0) + value
            self._carried = {}
        self._unreduced.append(stats)
        return stats

    def since_last(self, now: dict, assistant: Optional[dict], dropped_losses: int,
                   failure) -> dict:
        """What happened since the last call: the change of the cumulative counters *now*,
        of the Assistant's non-finite losses (*assistant*: its latest statistics, None
        while it does not learn) and of the losses dropped on the way to it; the
        Assistant's other statistics as they are, and whether it failed (*failure*: the
        client's, None or empty while it has not)."""
        delta = {k: v - self._logged.get(k, 0) for k, v in now.items()}
        self._logged = now
        if assistant is not None:
            stats = dict(assistant)
            # cumulative in the Assistant: logged as what happened since the last call
            nonfinite = stats.pop("nonfinite", self.logged_nonfinite)
            delta.update(stats, nonfinite=nonfinite - self.logged_nonfinite)
            self.logged_nonfinite = nonfinite
        dropped = max(dropped_losses, self._dropped)
        delta["dropped_losses"], self._dropped = dropped - self._dropped, dropped
        delta["failed"] = 1.0 if failure else 0.0
        return delta
