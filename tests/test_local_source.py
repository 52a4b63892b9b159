"""``--assistant-sync``'s LocalSource waits for and learns exactly the due losses.

Window k is scored by the Assistant after exactly the losses of the batches numbered below
``first_seq(k) - lag``: it waits until the losses of batch ``first_seq(k) - lag - 1`` have
arrived (or raises after its timeout), learns those below the due point and no later ones,
and the losses received but not learned yet survive a state save and load.

The stand-in Assistant learns "ids" that are the batch numbers themselves, so what it
learned reads as a list of batch numbers.
"""

import pickle
import threading

import numpy as np
import pytest

from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.transport.local_source import LocalSource


class RecordingAssistant:
    """Stands in for the Assistant: remembers what it learned, in order, and what it had
    learned when it scored each window."""

    stats = {"threshold": 0.0, "lambda": 0.0, "accuracy": 0.0, "loss_batches": 0}

    def __init__(self):
        self.learned = []  # batch numbers, in the order learned
        self.windows = []  # self.learned as it was when each window was scored

    def begin_pass(self, data_pass):
        pass

    def learn(self, ids, losses):
        self.learned += np.asarray(ids).tolist()

    def accept_probability(self, ids):
        self.windows.append(list(self.learned))
        return np.ones(len(ids))

    def state_dict(self):
        return {"learned": list(self.learned)}

    def load_state_dict(self, state):
        self.learned = list(state["learned"])


def _generator():
    rng = np.random.default_rng(0)
    n = 600
    sizes = rng.integers(3, 30, n), rng.integers(3, 30, n)
    gen = BatchGenerator(np.arange(n), *sizes, max_tokens=300, window_size=100, seed=1)
    gen.begin_pass(1)
    return gen


def _source(lag, timeout=10.0):
    return LocalSource(_generator(), RecordingAssistant, lag=lag, timeout=timeout)


def _report(source, seqs):
    """The Boss trained batches *seqs* and sends their losses (id = the batch number)."""
    for seq in seqs:
        source.send_losses(np.array([seq]), np.array([1.0]), seq)


def _in_thread(source):
    result = {}

    def make():
        try:
            result["plan"] = source.next_window()
        except BaseException as exc:  # noqa: B036 - handed to the test
            result["error"] = exc

    thread = threading.Thread(target=make, daemon=True)
    thread.start()
    return thread, result


def test_a_window_waits_for_its_due_losses_and_goes_on_once_they_arrive():
    """Window 1 (lag 1) needs the losses of batch first_seq - 2: it blocks while only the
    earlier ones have arrived, and returns as soon as that batch's losses are sent."""
    source = _source(lag=1)
    first = source.next_window()
    made = len(first.batches)
    assert made >= 3, made  # window 1's due point, made - 1, leaves a batch to wait for
    _report(source, range(made - 2))  # all but the one window 1 waits for (made - 2)
    thread, result = _in_thread(source)
    thread.join(0.2)
    assert thread.is_alive(), "the window did not wait for the losses of its due batch"
    _report(source, [made - 2])
    thread.join(5)
    assert not thread.is_alive() and "error" not in result, result
    assert result["plan"].first_seq == made
    assert source.assistant.windows[1] == list(range(made - 1))


def test_a_window_whose_losses_never_come_raises_naming_the_flag():
    source = _source(lag=0, timeout=0.2)
    source.next_window()  # window 0 waits for nothing
    with pytest.raises(RuntimeError, match="--assistant-sync"):
        source.next_window()  # window 1 needs window 0's losses, which never come


def test_each_window_learned_exactly_the_batches_below_its_due_point():
    """With lag 2, window k learns the batches numbered below first_seq(k) - 2, even when
    later losses have arrived already; they are learned by the next window, in order."""
    lag = 2
    source = _source(lag=lag)
    made = 0
    firsts = []
    for _ in range(4):
        plan = source.next_window()
        assert plan.first_seq == made
        firsts.append(plan.first_seq)
        _report(source, range(made, made + len(plan.batches)))  # every batch so far
        made += len(plan.batches)
    windows = source.assistant.windows
    assert len(windows) == 4
    for k, first in enumerate(firsts):
        assert windows[k] == list(range(max(first - lag, 0))), (k, first, windows[k])
    assert firsts[1] > lag  # window 1 learned something, and losses were left over


def test_losses_held_back_survive_a_state_save_and_load():
    """Losses received but not learned yet are part of the saved state: a resumed source
    learns them with the next window, as the source that went on does."""
    lag = 2
    source = _source(lag=lag)
    sent = 0
    for _ in range(2):
        plan = source.next_window()
        _report(source, range(sent, sent + len(plan.batches)))
        sent += len(plan.batches)
    first_of_window_1 = source.generator.batches_made - len(plan.batches)
    saved = pickle.loads(pickle.dumps(source.state()))  # as a checkpoint holds it
    held = [seq for seq, _, _ in saved["assistant"]["held_losses"]]
    # window 1 learned below first_seq(1) - lag; the rest of what was sent is held
    assert held == list(range(first_of_window_1 - lag, sent))
    gen_state = source.generator.state_dict()

    resumed = _source(lag=lag)
    resumed.load(saved["assistant"])
    resumed.restart(gen_state, accept_all=False, reported_before=sent)
    for src in (source, resumed):
        plan = src.next_window()
        assert plan.first_seq == sent
    due = sent - lag
    assert source.assistant.windows[-1] == list(range(due))
    assert resumed.assistant.windows[-1] == list(range(due))
