"""The Boss's counters (tasks.counters): cumulative sources logged as each step's change."""

import pytest

from autoassist_fairseq.tasks.counters import CUMULATIVE, Counters


_NONE = dict.fromkeys(("boss_tokens", "boss_padded_tokens", "considered_tokens",
                       "accepted_tokens"), 0.0)


class _Sources:
    """Cumulative sources that grow by one pair, 10 tokens and 0.5 s per read."""

    def __init__(self, nonfinite=0):
        self.reads, self.nonfinite = 0, nonfinite

    def __call__(self):
        self.reads += 1
        cumulative = {"considered_pairs": self.reads, "considered_tokens": 10.0 * self.reads,
                      "wait_seconds": 0.5 * self.reads, "nonfinite": self.nonfinite}
        return cumulative, {"threshold": 2.0, "failed": 0.0}


def test_each_step_logs_the_change_of_every_cumulative_source_and_the_current_values():
    counters, read = Counters(), _Sources()
    counters.update_begins()
    first = counters.step(0, 7, 12, read)
    assert set(CUMULATIVE) <= set(first)
    assert (first["considered_pairs"], first["considered_tokens"], first["boss_tokens"],
            first["boss_padded_tokens"], first["threshold"]) == (1, 10.0, 7, 12, 2.0)
    counters.update_reduced(_NONE)
    counters.update_begins()
    second = counters.step(1, 5, 8, read)
    assert (second["considered_pairs"], second["wait_seconds"], second["boss_tokens"],
            second["boss_padded_tokens"], second["accepted_pairs"]) == (1, 0.5, 5, 8, 0.0)


def test_an_update_never_reduced_is_logged_with_the_next_updates_first_step():
    """fairseq skips the reduce after an --fp16 overflow: the counts of its steps reach the
    logs with the next update's first step, none lost and none twice."""
    counters, read = Counters(), _Sources()
    reduced = []
    for update, skipped in enumerate([False, True, True, False, False]):
        counters.update_begins()
        steps = [counters.step(2 * update + k, 3, 4, read) for k in range(2)]
        if not skipped:
            reduced.extend(steps)
            counters.update_reduced(_NONE)
    assert sum(s["considered_pairs"] for s in reduced) == read.reads == 10
    assert sum(s["boss_tokens"] for s in reduced) == 3 * 10
    assert sum(s["wait_seconds"] for s in reduced) == pytest.approx(0.5 * 10)


def test_an_amp_retry_logs_its_first_steps_statistics_and_counts_nothing():
    counters, read = Counters(), _Sources()
    counters.update_begins()
    first = counters.step(4, 9, 10, read)
    assert counters.step(4, 9, 10, read, retry=True) == first and read.reads == 1
    counters.update_reduced(_NONE)
    counters.update_begins()
    assert counters.step(5, 9, 10, read)["boss_tokens"] == 9


def test_a_restored_assistants_nonfinite_losses_are_not_logged_again():
    counters, read = Counters(), _Sources(nonfinite=6)
    counters.start({"nonfinite": 6})
    counters.update_begins()
    assert counters.step(0, 1, 1, read)["nonfinite"] == 0
    read.nonfinite = 8
    assert counters.step(1, 1, 1, read)["nonfinite"] == 2


def test_the_run_totals_add_the_reduced_updates_and_are_saved_and_restored_in_one_dict():
    totals = {"boss_tokens": 1.0, "boss_padded_tokens": 2.0, "considered_tokens": 3.0,
              "accepted_tokens": 4.0}
    counters = Counters(totals)
    counters.update_reduced(dict(_NONE, boss_tokens=5.0, accepted_tokens=1.0))
    assert counters.run_totals is totals and counters.state_dict() == dict(
        totals, boss_tokens=6.0, accepted_tokens=5.0) and totals["boss_tokens"] == 6.0
    counters.load_state_dict(dict(totals, boss_tokens=10))
    assert counters.run_totals is totals and totals["boss_tokens"] == 10.0
