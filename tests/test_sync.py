"""--assistant-sync: the batches depend only on the seed, the data and the flags."""

import logging
import re
import threading
import time

import numpy as np
import pytest
import torch

from autoassist_fairseq.transport.process import AssistantDied
from autoassist_fairseq.transport.client import AssistantClient
from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.data.batch_stream import BatchStream
from autoassist_fairseq.tasks.batch_iterator import AutoAssistEpochBatchIterator
from autoassist_fairseq.data.run_points import RunPoints
from autoassist_fairseq.transport.local_source import LocalSource, pipeline_lag

from utils import FixedAssistant, read_trace, run, train_args

SYNC = ["--assistant-sync", "--assistant-warmup", "5"]


def _valid_losses(output):
    return [float(x) for x in re.findall(r"\| valid on 'valid' subset \| loss ([0-9.]+)", output)]


def test_sync_runs_repeat_exactly_and_resume_exactly(train_data, tmp_path):
    """Two runs with one seed train the same batches, with the Assistant skipping pairs;
    one of them, stopped in the middle of epoch 2 and resumed, still trains exactly the
    uninterrupted run's batches and reaches the same validation losses."""
    def args(name, *extra):
        return train_args(train_data, tmp_path / name, extra=[
            "--max-epoch", "3", "--assistant-trace-dir", tmp_path / f"trace-{name}", *SYNC,
            *extra])

    whole_out = run(args("whole")).stdout
    whole = read_trace(tmp_path / "trace-whole")
    epoch1 = sum(1 for e, _, _ in whole if e == 1)
    stop = epoch1 + 7
    run(args("part") + ["--max-update", str(stop)])
    saved = torch.load(tmp_path / "part" / "checkpoint_last.pt", weights_only=False)
    rank = saved["extra_state"]["train_iterator"]["autoassist"]["ranks"][0]
    assert rank["assistant"]["held_losses"], "losses not learned yet must be saved"
    proc = run(args("part"))
    out = proc.stdout + proc.stderr
    assert "resuming epoch 2 at batch 7/" in out
    part = read_trace(tmp_path / "trace-part")
    assert [(e, u) for e, u, _ in part] == [(e, u) for e, u, _ in whole]
    assert [ids for _, _, ids in part] == [ids for _, _, ids in whole]
    assert _valid_losses(out)[-2:] == _valid_losses(whole_out)[-2:]
    # the Assistant did skip pairs, from its own learned state
    accept = [float(a) for a in re.findall(r"\| train \| epoch .*\| aa_accept_tok ([0-9.]+)",
                                             whole_out)]
    assert len(accept) == 3 and min(accept) < 0.95, accept


class _FailingAssistant:
    """Scores odd ids as easy; its third window raises, as a bug in a rule would."""

    stats = {"threshold": 1.0, "lambda": 0.5, "accuracy": 0.5, "chance": 0.5, "loss_batches": 0}

    def __init__(self):
        self.calls = 0

    def begin_pass(self, data_pass):
        pass

    def learn(self, ids, losses):
        pass

    def accept_probability(self, ids):
        self.calls += 1
        if self.calls == 3:
            raise FloatingPointError("a rule's bug")
        return np.where(ids % 2 == 1, 0.2, 1.0)


@pytest.mark.parametrize("fallback", ["uniform", "error"])
def test_sync_fallback_continues_on_uniform_batches_or_stops(fallback):
    """An error in the in-process Assistant is a failure like a dead Assistant process:
    `uniform` goes on with every pair accepted from the next window on, `error` stops."""
    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 30, 2000), rng.integers(3, 30, 2000)
    gen = BatchGenerator(np.arange(2000), *sizes, max_tokens=600, window_size=300, seed=3)
    stream = BatchStream(gen)
    client = AssistantClient(lambda: LocalSource(gen, _FailingAssistant, lag=0), gen, stream,
                             fallback=fallback)
    client.start(first_pass=1)

    def train():  # the Boss: take a batch, report its losses
        batch = stream.next_batch(client.next_window)
        client.send_losses(batch.ids, np.ones(len(batch.ids)), batch.seq)
        return batch

    if fallback == "error":
        with pytest.raises(AssistantDied, match="a rule's bug"):
            for _ in range(200):
                train()
        return
    trained = [train() for _ in range(200)]
    assert client.fell_back and isinstance(client.source, LocalSource)
    seqs = [b.seq for b in trained]
    assert seqs == list(range(len(seqs)))  # no batch lost or repeated at the switch
    # the first two windows skipped odd ids, the uniform ones take them all
    late = np.concatenate([b.ids for b in trained[-60:]])
    assert np.mean(late % 2 == 1) > 0.4


def test_a_loader_thread_in_the_fallback_switch_gets_a_whole_source(monkeypatch):
    """The uniform source is positioned before it is published: a loader thread asking for
    a window while the switch is under way gets one from the old source, never from a
    half-built one (which once called the generator without a scoring function)."""
    rng = np.random.default_rng(1)
    sizes = rng.integers(3, 30, 2000), rng.integers(3, 30, 2000)
    gen = BatchGenerator(np.arange(2000), *sizes, max_tokens=600, window_size=300, seed=3)
    stream = BatchStream(gen)
    client = AssistantClient(lambda: LocalSource(gen), gen, stream, fallback="uniform")
    client.start(first_pass=1)
    old = client.source
    switching, release = threading.Event(), threading.Event()
    restart = LocalSource.restart

    def slow_restart(self, *args, **kwargs):
        if self is not old:  # the uniform source being built: hold the switch half-way
            switching.set()
            assert release.wait(10)
        return restart(self, *args, **kwargs)

    monkeypatch.setattr(LocalSource, "restart", slow_restart)
    switch = threading.Thread(target=client._on_failure, args=(AssistantDied("gone"),))
    switch.start()
    assert switching.wait(10)
    window = client.next_window()  # a loader thread, mid-switch
    assert client.source is old and len(window.batches) > 0
    release.set()
    switch.join(10)
    assert client.fell_back and client.source is not old
    assert len(client.next_window().batches) > 0


def test_the_loss_messages_a_failed_source_dropped_stay_counted_after_the_fallback():
    """The client's count of dropped loss messages is cumulative over the run: the uniform
    source that replaces a failed one adds to it, so the log's deltas never go back."""
    rng = np.random.default_rng(2)
    sizes = rng.integers(3, 30, 500), rng.integers(3, 30, 500)
    gen = BatchGenerator(np.arange(500), *sizes, max_tokens=600, window_size=300, seed=3)

    class Dropping(LocalSource):
        dropped_losses = 5

    client = AssistantClient(lambda: Dropping(gen), gen, BatchStream(gen), fallback="uniform")
    client.start(first_pass=1)
    assert client.dropped_losses == 5
    client._on_failure(AssistantDied("gone"))
    assert client.fell_back and client.dropped_losses == 5


class _OddHalfAssistant(FixedAssistant):
    """Accepts even ids always and odd ones with probability 0.3, whatever it learns."""

    def begin_pass(self, data_pass):
        pass

    def accept_probability(self, ids):
        return np.where(np.asarray(ids) % 2 == 0, 1.0, 0.3)


def _annealed_run(buffer_size, updates=120, anneal=0.5):
    """The batches a sync run trains, annealing by updates, with the data loader's buffer
    thread *buffer_size* batches ahead; returns [(seq, ids)]."""
    n = 3000
    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 30, n), rng.integers(3, 30, n)

    def generator():
        return BatchGenerator(np.arange(n), *sizes, max_tokens=400, window_size=48, seed=2)

    def collate(items):
        ids = torch.tensor(items)
        return {"id": ids, "ntokens": len(items), "net_input": {"src_lengths": ids % 5}}

    gen = generator()
    lag = pipeline_lag(0, buffer_size, 1)
    itr = AutoAssistEpochBatchIterator(
        list(range(n)), collate, gen, lambda: LocalSource(gen, _OddHalfAssistant, lag),
        buffer_size=buffer_size, points=RunPoints(anneal=anneal, max_update=updates))
    trained = []
    try:
        while len(trained) < updates:
            for sample in itr.next_epoch_itr():
                time.sleep(0.01)  # a training step: the buffer thread fills up meanwhile
                itr.begin_update(len(trained))
                meta = sample["autoassist"]
                itr.client.send_losses(meta["ids"], np.ones(len(meta["ids"])), meta["seq"])
                trained.append((meta["seq"], sorted(meta["ids"].tolist())))
                if len(trained) == updates:
                    break
    finally:
        itr.shutdown()
    return trained


def test_sync_annealing_by_updates_does_not_depend_on_prefetch():
    """With --max-update, annealing starts at a batch number, not at whatever window the
    loader had taken when the annealing update began: runs whose loaders prefetch 0 and 12
    batches train the same batches, and the windows from the annealing batch on take
    every pair."""
    base, ahead = _annealed_run(0), _annealed_run(12)
    assert [ids for _, ids in base] == [ids for _, ids in ahead]
    odd = [np.mean(np.asarray(ids) % 2) for _, ids in base]
    # skipping before (odd ids at 0.3), none once the windows from batch 60 on arrive
    assert np.mean(odd[:50]) < 0.35 and np.mean(odd[-30:]) > 0.42, (odd[:50], odd[-30:])


def test_a_failure_while_the_saved_assistant_loads_falls_back_on_a_fresh_stream():
    """The Assistant dies while it loads the state carried over (the next --data shard, or
    a resume on another number of workers, where the stream starts afresh): the uniform
    fallback starts at the first data pass instead of failing on a stream never begun."""
    gen = BatchGenerator(np.arange(500), np.full(500, 5), np.full(500, 6), max_tokens=200,
                         window_size=64)

    class DiesWhileLoading:
        learns = True
        dropped_losses = 0

        def load(self, state):
            raise AssistantDied("the Assistant process died: killed by SIGKILL")

        def shutdown(self):
            pass

    stream = BatchStream(gen)
    client = AssistantClient(DiesWhileLoading, gen, stream, fallback="uniform")
    client.start(1, {"model": {}}, "the previous data shard")
    assert client.fell_back
    batch = stream.next_batch(client.next_window)
    assert batch.seq == 0 and len(batch.ids) > 0


def test_a_run_resumed_after_the_uniform_fallback_agrees_the_same_epoch_lengths():
    """After a fallback to uniform batches the stream's windows accept every pair; a run
    resumed from a state saved then counts its next epoch as a whole pass, as the
    uninterrupted run does, not from the skipping windows before the failure."""
    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 30, 2000), rng.integers(3, 30, 2000)

    def iterator():
        gen = BatchGenerator(np.arange(2000), *sizes, max_tokens=600, window_size=300, seed=3)

        def collate(items):
            ids = torch.tensor(items)
            return {"id": ids, "ntokens": len(items), "net_input": {"src_lengths": ids % 5}}

        return AutoAssistEpochBatchIterator(
            list(range(2000)), collate, gen,
            lambda: LocalSource(gen, _FailingAssistant, lag=10**9), fallback="uniform")

    whole = iterator()
    for _ in whole.next_epoch_itr():
        pass
    assert whole.client.fell_back
    saved = whole.state_dict()
    second = len(whole.next_epoch_itr())
    assert second == whole.generator.pass_batch_count(whole._data_pass())  # a whole pass
    resumed = iterator()
    resumed.load_state_dict(saved)
    assert len(resumed.next_epoch_itr()) == second


@pytest.mark.parametrize("points, first", [
    (RunPoints(anneal=0.8, max_epoch=5), ("epoch", 2)),  # (1 - 0.8) * 5 is 0.999...
    (RunPoints(anneal=0.3, max_epoch=10), ("epoch", 8)),
    (RunPoints(anneal=0.7, max_update=10), ("update", 3)),  # 3.0000000000000004
    (RunPoints(anneal=0.125, max_update=2604, update_freq=2), ("update", 2279)),
])
def test_annealing_starts_where_the_share_says_in_decimal(points, first):
    """The first annealed epoch or update is that of the decimal share: float rounding of
    (1 - F) x N moved it by one."""
    kind, value = first
    if kind == "epoch":
        assert points.anneal_epoch == value and points.anneal_batch is None
    else:
        assert points.anneal_update == value and points.anneal_epoch is None
        assert points.anneal_batch == value * points.update_freq


class _FailsOnceAssistant:
    """Scores odd ids as easy (0.2) and counts the loss batches it learned; an instance
    made while ``fail_at`` is set raises on that call of accept_probability."""

    fail_at = None

    def __init__(self):
        self.calls, self.learned, self.fail_at = 0, 0, type(self).fail_at

    @property
    def stats(self):
        return {"threshold": 1.0, "lambda": 0.5, "accuracy": 0.5, "loss_batches": self.learned}

    def begin_pass(self, data_pass):
        pass

    def learn(self, ids, losses):
        self.learned += 1

    def accept_probability(self, ids):
        self.calls += 1
        if self.calls == self.fail_at:
            raise FloatingPointError("a rule's bug")
        return np.where(ids % 2 == 1, 0.2, 1.0)

    def state_dict(self):
        return {"learned": self.learned}

    def load_state_dict(self, state):
        self.learned = state["learned"]


def _fallback_iterator(n=2000):
    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 30, n), rng.integers(3, 30, n)
    gen = BatchGenerator(np.arange(n), *sizes, max_tokens=600, window_size=300, seed=3)

    def collate(items):
        ids = torch.tensor(items)
        return {"id": ids, "ntokens": len(items), "net_input": {"src_lengths": ids % 5}}

    return AutoAssistEpochBatchIterator(list(range(n)), collate, gen,
                                        lambda: LocalSource(gen, _FailsOnceAssistant, lag=0),
                                        fallback="uniform")


def _train_batches(itr, count, epoch=None):
    """Train *count* batches (across epochs), reporting losses; returns their ids."""
    trained = []
    epoch = epoch if epoch is not None else itr.next_epoch_itr()
    while len(trained) < count:
        try:
            sample = next(epoch)
        except StopIteration:
            epoch = itr.next_epoch_itr()
            continue
        meta = sample["autoassist"]
        itr.client.send_losses(meta["ids"], np.ones(len(meta["ids"])), meta["seq"])
        trained.append(meta["ids"])
    return trained, epoch


def test_a_run_resumed_after_the_uniform_fallback_scores_with_its_assistant_again(
        monkeypatch, caplog):
    """Issue 48, item 5. The saved run fell back to uniform batches: its checkpoints keep
    the Assistant's last state the Boss read (not None), and the resumed run trains the
    planned batches, then skips pairs again with its own Assistant, saying so."""
    monkeypatch.setattr(_FailsOnceAssistant, "fail_at", 5)  # its 5th window
    whole = _fallback_iterator()
    trained, epoch = _train_batches(whole, 25)  # 2 or 3 windows
    before = whole.client.state()  # a real state, as a save reads it
    learned = before["stats"]["loss_batches"]
    assert learned > 0 and before["assistant"]["learned"] == learned
    with caplog.at_level(logging.WARNING):
        _train_batches(whole, 60, epoch)
    assert whole.client.fell_back
    assert f"the checkpoints keep the Assistant's last state the Boss read (after {learned} " \
           "loss batches): a run resumed from them starts its Assistant from that state" \
           in caplog.text, caplog.text
    saved = whole.state_dict()
    rank = saved["autoassist"]["ranks"][0]
    assert rank["assistant"] is not None, "None saved over the Assistant's real state"
    assert rank["assistant"]["learned"] == learned
    assert len(rank["assistant"]["held_losses"]) == len(before["assistant"]["held_losses"])
    assert rank["stream"]["generator"]["accept_all"]

    monkeypatch.setattr(_FailsOnceAssistant, "fail_at", None)
    caplog.clear()
    resumed = _fallback_iterator()
    resumed.load_state_dict(saved)
    with caplog.at_level(logging.INFO):
        trained, _ = _train_batches(resumed, 80)
    assert f"restored Assistant state: T_k=1.000000 lambda_k=0.500000 accuracy=0.500000 after " \
           f"{learned} loss batches (from the checkpoint)" in caplog.text, caplog.text
    assert "the checkpoint's batch plan accepts every pair: the saved run went on with " \
           "uniform batches after its Assistant failed (--assistant-fallback uniform)" \
           in caplog.text, caplog.text
    assert "scored by this run's Assistant again, from the Assistant state restored above" \
           in caplog.text and "resume with --task translation" in caplog.text
    assert not resumed.client.fell_back
    odd = np.mean(np.concatenate(trained[-40:]) % 2 == 1)
    assert odd < 0.3, odd  # odd ids at 0.2 again (uniform batches: about half)


def test_a_bug_of_the_boss_process_is_not_taken_for_a_failed_assistant(monkeypatch):
    """Issue 48, item 7. Under --assistant-fallback uniform, an exception of the batch
    generator (the Boss's own code) in --assistant-sync mode propagates with its traceback,
    not as a dead Assistant that silently turns the run into uniform training; the
    Assistant's own exceptions, and non-finite scores, still fall back."""
    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 30, 2000), rng.integers(3, 30, 2000)
    gen = BatchGenerator(np.arange(2000), *sizes, max_tokens=600, window_size=300, seed=3)
    real_cut, calls = BatchGenerator._cut, []

    def cut(self, pool):
        calls.append(len(pool))
        if len(calls) == 3:  # once: the next window would go on fine
            raise IndexError("a generator bug")
        return real_cut(self, pool)

    monkeypatch.setattr(BatchGenerator, "_cut", cut)
    stream = BatchStream(gen)
    client = AssistantClient(lambda: LocalSource(gen, _OddHalfAssistant, lag=0), gen, stream,
                             fallback="uniform")
    client.start(first_pass=1)
    with pytest.raises(IndexError, match="a generator bug"):
        for _ in range(200):
            batch = stream.next_batch(client.next_window)
            client.send_losses(batch.ids, np.ones(len(batch.ids)), batch.seq)
    assert not client.fell_back and client.source.learns

    class NonFinite(_OddHalfAssistant):
        def accept_probability(self, ids):
            return np.full(len(ids), np.nan)

    source = LocalSource(gen, NonFinite, lag=0)
    source.restart(gen.state_dict(), accept_all=False, reported_before=gen.batches_made)
    with pytest.raises(AssistantDied, match="non-finite acceptance probabilities for 300 of "
                                            "300 candidates"):
        source.next_window()
