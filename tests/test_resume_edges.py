"""Resumes from the edges: a plain ``translation`` checkpoint saved mid-epoch, and a data
pass resumed with another ``--assistant-window``."""

import logging

import numpy as np
import torch

from autoassist_fairseq.transport.local_source import LocalSource
from autoassist_fairseq.transport.process import AssistantProcess
from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.tasks.batch_iterator import AutoAssistEpochBatchIterator
from autoassist_fairseq.data.batch_stream import BatchStream, StreamState
from utils import FixedAssistant

N = 3000


class HalfAssistant(FixedAssistant):
    """Stands in for the Assistant: accepts even ids with probability 1, odd ones 0.5."""

    def accept_probability(self, ids):
        return np.where(np.asarray(ids) % 2 == 0, 1.0, 0.5)


def _sizes():
    rng = np.random.default_rng(0)
    src = rng.integers(3, 40, N)
    return src, src + rng.integers(0, 5, N)


def _generator(window_size=500):
    return BatchGenerator(np.arange(N), *_sizes(), max_tokens=512, window_size=window_size,
                          seed=5)


def _collate(items):
    ids = torch.tensor(items)
    return {"id": ids, "ntokens": len(items), "net_input": {"src_lengths": ids % 5}}


def test_plain_translation_checkpoint_saved_mid_epoch_resumes(caplog):
    """fairseq's own iterator state, saved at batch 10 of epoch 1, carries no batch count:
    the rest of the epoch comes from a fresh pass, the count agreed afresh."""
    procs = []

    def start():
        procs.append(AssistantProcess(HalfAssistant, _generator))
        return procs[-1]

    itr = AutoAssistEpochBatchIterator(list(range(N)), _collate, _generator(), start)
    try:
        with caplog.at_level(logging.WARNING):
            itr.load_state_dict({"version": 2, "epoch": 1, "iterations_in_epoch": 10,
                                 "shuffle": True})
        epoch = itr.next_epoch_itr()
        assert epoch.n == 10 and len(epoch) == itr.generator.pass_batch_count(1)
        assert sum(1 for _ in epoch) == len(epoch) - 10
        assert "rest of the epoch comes from a fresh data pass" in caplog.text
    finally:
        itr.shutdown()
        for p in procs:
            p.shutdown()


def _pass_one(windows_from, stream, already):
    """Pairs of data pass 1: *already* plus the stream's batches until the pass ends."""
    seen = list(already) + [ids for ids, _ in stream.pending]
    stream.pending.clear()
    while True:
        window = windows_from()
        if window.data_pass != 1:
            return seen
        seen += list(window.batches)
        if window.ends_pass:
            return seen


def test_changed_window_mid_pass_goes_on_with_the_same_order():
    """Saved after 5 windows of 500 and resumed with windows of 1500 (the probing case):
    the pass visits every pair exactly once, in the saved pass's order."""
    old = _generator(500)
    old.begin_pass(1)
    stream = BatchStream(_generator(500))
    trained = []
    for _ in range(5):
        stream.take(old.next_window(lambda ids: np.ones(len(ids))))
    while stream.pending:
        trained.append(stream.next_batch(None)[0])
    saved = stream.state(len(stream.issued))

    new = _generator(1500)
    resumed = BatchStream(_generator(1500))
    resumed.restore(StreamState(**vars(saved)))
    new.load_state_dict(resumed.gen_state)
    pass_one = _pass_one(lambda: new.next_window(lambda ids: np.ones(len(ids))), resumed,
                         trained)
    ids = np.concatenate(pass_one)
    assert len(ids) == N and len(np.unique(ids)) == N
    # the candidates after the resume are the saved pass's order from pair 2500 on
    order = old._order_cache[0]
    new.load_state_dict(saved.generator)  # again, to look at its next window
    window = new.next_window(lambda ids: np.ones(len(ids)))
    assert window.considered_pairs == N - 2500
    assert set(window.weight_ids.tolist()) == set(order[2500:].tolist()) | set(
        saved.generator["carried"].tolist())


class _NonfiniteCounter(HalfAssistant):
    """Counts non-finite losses as the Assistant does (cumulative, saved and restored)."""

    def __init__(self):
        self.nonfinite = 0

    def begin_pass(self, data_pass):
        pass

    @property
    def stats(self):
        return dict(FixedAssistant.stats, nonfinite=self.nonfinite)

    def learn(self, ids, losses):
        self.nonfinite += int(np.count_nonzero(~np.isfinite(losses)))

    def state_dict(self):
        return {"nonfinite": self.nonfinite}

    def load_state_dict(self, state):
        self.nonfinite = state["nonfinite"]


def _sync_iterator():
    gen = _generator()
    return AutoAssistEpochBatchIterator(list(range(N)), _collate, gen,
                                        lambda: LocalSource(gen, _NonfiniteCounter, lag=0))


def _train(itr, epoch, batches, nan_batches=0):
    """Train *batches* batches (the first *nan_batches* with 3 non-finite losses each);
    returns the non-finite losses logged meanwhile."""
    logged = 0
    for k in range(batches):
        meta = next(epoch)["autoassist"]
        losses = np.ones(len(meta["ids"]))
        losses[:3] = np.nan if k < nan_batches else 1.0
        itr.client.send_losses(meta["ids"], losses, meta["seq"])
        logged += itr.pop_log_stats()["nonfinite"]
    return logged


def test_nonfinite_losses_of_the_saved_run_are_not_logged_again_after_a_resume():
    """The Assistant's count of non-finite losses is cumulative and restored at a resume;
    the resumed run's log counts only those that arrive after it (the next windows carry
    the count, a few windows of 500 pairs)."""
    itr = _sync_iterator()
    assert _train(itr, itr.next_epoch_itr(), 60, nan_batches=3) == 9
    state = itr.state_dict()
    resumed = _sync_iterator()
    resumed.load_state_dict(state)
    assert _train(resumed, resumed.next_epoch_itr(), 60) == 0
    assert resumed.stream.assistant_stats["nonfinite"] == 9  # restored, and still 9


def test_a_state_saved_at_an_epochs_end_resumes_on_the_next_data_shard():
    """--data a:b: epoch 2 trains shard b. Resumed from the checkpoint saved at the end of
    epoch 1, it starts a fresh batch plan on shard b, as the uninterrupted run does, and
    never trains shard a's pairs planned before the save."""
    def iterator(n, **kw):
        gen = BatchGenerator(np.arange(n), *(size[:n] for size in _sizes()), max_tokens=512,
                             window_size=500, seed=5)
        return AutoAssistEpochBatchIterator(list(range(n)), _collate, gen,
                                            # no loss is reported: learn from none
                                            lambda: LocalSource(gen, _NonfiniteCounter, 10**9),
                                            data_shard_per_epoch=True, **kw)

    first = iterator(N)
    for _ in first.next_epoch_itr():
        pass
    saved = first.state_dict()
    assert saved["autoassist"]["ranks"][0]["stream"]["pending"], "shard a's plan was saved"
    carry = {"assistant": None, "run_totals": first.run_totals,
             "batches_done": first.batches_done}  # export_carry's, for an Assistant without weights
    uninterrupted = iterator(1000, epoch=2, carry=carry)
    resumed = iterator(1000, epoch=2)
    resumed.load_state_dict(saved)
    for itr in (uninterrupted, resumed):
        ids = np.concatenate([s["autoassist"]["ids"] for s in itr.next_epoch_itr()])
        assert ids.max() < 1000
    assert resumed.batches_done == uninterrupted.batches_done


def test_an_update_after_one_fairseq_skipped_acts_as_a_new_update(monkeypatch):
    """After an --fp16 overflow fairseq does not count the update, so the next update comes
    with the same number: it still hands over the losses and gathers the states a save
    needs. A micro-batch of the same update, or an --amp retry (nothing consumed), does not."""
    from autoassist_fairseq.data.run_points import RunPoints

    gen = _generator()
    itr = AutoAssistEpochBatchIterator(list(range(N)), _collate, gen,
                                       lambda: LocalSource(gen, _NonfiniteCounter, 10**9),
                                       points=RunPoints(update_freq=2))
    flushes = []
    monkeypatch.setattr(itr, "flush_losses", lambda: flushes.append(itr.iterations_in_epoch))
    epoch = itr.next_epoch_itr()

    def micro_batch(update, consume=True):
        if consume:
            next(epoch)
        itr.begin_update(update)

    for update in (0, 1, 1):  # update 1 overflows: the next update has its number again
        micro_batch(update)
        micro_batch(update)
    micro_batch(1, consume=False)  # an --amp retry of that update: the same samples again
    micro_batch(1, consume=False)
    micro_batch(2)
    micro_batch(2)
    assert flushes == [1, 3, 5, 7]  # at the first micro-batch of each update trained
