"""Resumes from the edges: a plain ``translation`` checkpoint saved mid-epoch, and a data
pass resumed with another ``--assistant-window``."""

import logging

import numpy as np
import pytest
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
        logged += itr.log_step(meta["seq"], 0, 0, retry=False)["nonfinite"]
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
    # export_handover's, for an Assistant without weights
    handover = {"assistant": None, "run_totals": first.run_totals,
                "batches_done": first.batches_done}
    uninterrupted = iterator(1000, epoch=2, handover=handover)
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


def test_a_lower_max_tokens_at_a_resume_is_logged_from_where_it_applies(caplog):
    """Issue 48, item 2. A run resumed with a lower --max-tokens (after running out of
    memory) trains the batches already planned as saved, which exceed it, and says so: how
    many, from where the new value applies, and how to apply it at once; the windows after
    them keep it."""
    def iterator(max_tokens):
        gen = BatchGenerator(np.arange(N), *_sizes(), max_tokens=max_tokens, window_size=500,
                             seed=5)
        return AutoAssistEpochBatchIterator(list(range(N)), _collate, gen,
                                            lambda: LocalSource(gen, _NonfiniteCounter, lag=0))

    def train(itr, epoch, batches):
        trained = []
        for _ in range(batches):
            meta = next(epoch)["autoassist"]
            itr.client.send_losses(meta["ids"], np.ones(len(meta["ids"])), meta["seq"])
            trained.append(np.asarray(meta["ids"]))
        return trained

    src, tgt = _sizes()

    def cost(ids):  # padding included, as fairseq's batch_by_size counts
        return len(ids) * int(np.maximum(src[ids], tgt[ids]).max())

    saved_run = iterator(512)
    train(saved_run, saved_run.next_epoch_itr(), 5)
    state = saved_run.state_dict()
    planned = [np.asarray(ids) for ids in state["autoassist"]["ranks"][0]["stream"]["pending"]]
    over = sum(1 for ids in planned if cost(ids) > 200)
    assert over > 0
    resumed = iterator(200)
    resumed.load_state_dict(state)
    with caplog.at_level(logging.WARNING):
        epoch = resumed.next_epoch_itr()
    assert f"{over} of the {len(planned)} batches already planned exceed this run's " \
           "--max-tokens 200 (up to " in caplog.text, caplog.text
    assert f"--max-tokens 200 applies from the first window after them, {len(planned)} " \
           "batches from here. To apply it at once (e.g. after running out of memory), " \
           "resume with --reset-dataloader" in caplog.text, caplog.text
    trained = train(resumed, epoch, len(planned) + 20)
    assert [ids.tolist() for ids in trained[:len(planned)]] == [ids.tolist() for ids in planned]
    assert all(cost(ids) <= 200 for ids in trained[len(planned):])


def test_the_counts_of_an_update_fairseq_never_reduced_are_not_lost():
    """Issue 48, item 6. After an --fp16 overflow fairseq skips reduce_metrics for that
    update, whose stats the iterator had already popped: they go with the next update's
    logs, so the run's totals (aa_boss_tok, aa_skip_tok) count every batch trained."""
    from fairseq import metrics

    from autoassist_fairseq import metrics as aa_metrics
    from autoassist_fairseq.tasks.train_step import train_step_with_losses

    class Criterion:
        def compute_loss(self, model, net_output, sample, reduce=True):
            loss = net_output.reshape(-1)
            return (loss.sum(), loss.sum()) if reduce else (loss, loss)

    gen = _generator()
    itr = AutoAssistEpochBatchIterator(list(range(N)), _collate, gen,
                                       lambda: LocalSource(gen, _NonfiniteCounter, 10**9))
    epoch, crit, tokens = itr.next_epoch_itr(), Criterion(), 0
    update = 0
    with metrics.aggregate(new_root=True):
        for step in range(30):
            sample = next(epoch)
            bsz = len(sample["autoassist"]["ids"])
            out = torch.ones(bsz, 3)
            sample.update(target=torch.full((bsz, 3), 5), net_input={"src_tokens": out})
            _, stats = train_step_with_losses(
                lambda: (crit.compute_loss(None, out, sample), bsz, {}), itr, sample, crit,
                update, padding_idx=1)
            tokens += sample["autoassist"]["tokens"]
            if step in (4, 11, 12):  # an overflow: no reduce, and the update is not counted
                continue
            itr.end_update(aa_metrics.reduce([aa_metrics.logging_output(stats, {})],
                                             itr.run_totals))
            update += 1
    credited = itr.stream.credited_at(itr.iterations_in_epoch)
    assert itr.run_totals["boss_tokens"] == tokens
    assert itr.run_totals["considered_tokens"] == pytest.approx(credited["considered_tokens"])
    assert itr.run_totals["accepted_tokens"] == pytest.approx(credited["accepted_tokens"])


class _AcceptAll(_NonfiniteCounter):
    def accept_probability(self, ids):
        return np.ones(len(ids))


def _seeded(seed):
    return BatchGenerator(np.arange(N), *_sizes(), max_tokens=512, window_size=500, seed=seed)


def test_another_seed_at_a_resume_applies_from_the_next_data_pass(caplog):
    """Issue 48, not tried yet: saved after 10 batches of --seed 5, resumed with --seed 9.
    The pass goes on in its saved order (each pair trained once, the same batches as the
    uninterrupted run; every pair accepted, so that the epoch is the pass), the log says from
    when the new seed applies, and the next pass is drawn from it."""
    def iterator(seed):
        gen = _seeded(seed)
        return AutoAssistEpochBatchIterator(list(range(N)), _collate, gen,
                                            lambda: LocalSource(gen, _AcceptAll, lag=0))

    def pass_one(itr, epoch):
        ids = []
        for sample in epoch:
            meta = sample["autoassist"]
            itr.client.send_losses(meta["ids"], np.ones(len(meta["ids"])), meta["seq"])
            ids.append(list(meta["ids"]))
        return ids

    uninterrupted = iterator(5)
    whole = pass_one(uninterrupted, uninterrupted.next_epoch_itr())
    assert sorted(i for ids in whole for i in ids) == list(range(N))
    saved_run = iterator(5)
    epoch = saved_run.next_epoch_itr()
    for _ in range(10):
        meta = next(epoch)["autoassist"]
        saved_run.client.send_losses(meta["ids"], np.ones(len(meta["ids"])), meta["seq"])
    state = saved_run.state_dict()
    next_pair = state["autoassist"]["ranks"][0]["stream"]["generator"]["next_pair"]
    assert 0 < next_pair < N
    resumed = iterator(9)
    resumed.load_state_dict(state)
    with caplog.at_level(logging.WARNING):
        epoch = resumed.next_epoch_itr()
    assert "--seed changed from 5 to 9 at a resume in the middle of data pass 1: the pass " \
           f"goes on in its saved order and acceptance draws (of seed 5) from its pair " \
           f"{next_pair}, so that each of its pairs is a candidate once; --seed 9 draws the " \
           "order and acceptance from data pass 2 on" in caplog.text, caplog.text
    assert "resume with --reset-dataloader" in caplog.text
    rest = pass_one(resumed, epoch)
    assert whole[:10] + rest == whole  # exactly the uninterrupted pass
    resumed.shutdown(), saved_run.shutdown(), uninterrupted.shutdown()
    # the pass after it is drawn from the new seed; a second resume keeps each pass's seed
    gen = _seeded(9)  # this run's --seed 9, resuming a pass of --seed 5
    gen.load_state_dict(dict(_seeded(5).state_dict(), data_pass=1))
    assert gen.pass_seed(1) == 5 and gen.pass_seed(2) == 9 and gen.state_dict()["seed"] == 5
    new = _seeded(9)
    new.begin_pass(2)
    gen.begin_pass(2)
    assert np.array_equal(gen._order_cache[0], new._order_cache[0])
    assert gen.state_dict()["seed"] == 9


def test_another_number_of_workers_at_a_resume_mid_pass_is_refused_between_passes_not():
    """Two workers' states resumed by one: in the middle of a data pass the plans cannot be
    re-split (an error with the reason and the fix, before any training); with no plan in
    a pass (saved between passes) every worker starts from worker 0's Assistant."""
    itr = _sync_iterator()
    _train(itr, itr.next_epoch_itr(), 10)
    state = itr.state_dict()
    saved = state["autoassist"]
    saved["ranks"] = [saved["ranks"][0], saved["ranks"][0]]  # as two workers would save
    saved["world_size"] = 2
    resumed = _sync_iterator()
    with pytest.raises(ValueError, match=r"saved by 2 workers in the middle of data pass 1, "
                                         r"and this run has 1: .* Resume with 2 workers "
                                         r"\(--distributed-world-size 2\), or with "
                                         r"--reset-dataloader"):
        resumed.load_state_dict(state)
    for entry in saved["ranks"]:  # between passes: nothing planned, carried or visited
        entry["stream"] = dict(entry["stream"], pending=[], generator=dict(
            entry["stream"]["generator"], next_pair=0, next_window=0, data_pass=2,
            carried=torch.zeros(0, dtype=torch.int64),
            carried_weights=torch.zeros(0)))
    resumed.load_state_dict(state)
    resumed.shutdown(), itr.shutdown()
