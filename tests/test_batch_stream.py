"""The Boss's side of the batch stream: fixed epochs over passes, exact save and resume."""

import json

import numpy as np
import pytest

from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.data.batch_stream import BatchStream, StreamState, agree_num_batches
from autoassist_fairseq.metrics import COUNTERS

N = 3000


@pytest.fixture(scope="module")
def sizes():
    rng = np.random.default_rng(1)
    src = np.clip(rng.lognormal(2.5, 0.5, N).astype(int), 1, 120)
    return src, np.clip((src * rng.uniform(0.8, 1.3, N)).astype(int), 1, 120)


def _gen(sizes, **kw):
    return BatchGenerator(np.arange(N), *sizes, max_tokens=800, window_size=700, seed=5, **kw)


def _score(ids):  # a fixed Assistant: odd ids are easy
    return np.where(ids % 2 == 1, 0.3, 0.9)


def _source(gen):
    return lambda: gen.next_window(_score)


def test_agree_num_batches_is_the_mean_rounded_up():
    assert agree_num_batches([{"full": 100, "rate": 0.5}, {"full": 102, "rate": 0.6}]) == 56
    assert agree_num_batches([{"full": 10, "rate": 1.3}]) == 10  # never above a full pass
    assert agree_num_batches([{"full": 10, "rate": 0.0}]) == 1


def test_epochs_take_fixed_counts_and_skip_for_good(sizes):
    """Epochs of a fixed count run over pass boundaries: no skipped pair is added back to
    fill an epoch, and within a pass every pair is trained at most once."""
    gen = _gen(sizes)
    gen.begin_pass(1)
    stream = BatchStream(_gen(sizes))
    full = gen.pass_batch_count(1)
    passes = []  # the data pass of every batch taken, in order

    def source():
        window = gen.next_window(_score)
        passes.extend([window.data_pass] * len(window.batches))
        return window

    trained = {}
    for epoch in range(1, 4):
        count = agree_num_batches([{"full": full, "rate": stream.rate.value}])
        stream.begin_epoch()
        for _ in range(count):
            ids = stream.next_batch(source).ids
            trained.setdefault(passes.pop(0), []).append(ids)
        assert len(stream.issued) == count
        if epoch > 1:  # the rate is known after the first windows: epochs shrink
            assert count < 0.75 * full
    easy_share = []
    for batches in list(trained.values())[:-1]:  # complete passes (the last may be cut)
        ids = np.concatenate(batches)
        assert len(ids) == len(set(ids.tolist()))
        easy_share.append(np.mean(ids % 2 == 1))
    assert max(easy_share) < 0.35  # easy pairs (P=0.3 against 0.9) stay mostly skipped
    expected = (0.3 * gen.pair_tokens(np.arange(1, N, 2)) + 0.9 * gen.pair_tokens(
        np.arange(0, N, 2))) / gen.pair_tokens(np.arange(N))
    assert stream.rate.value == pytest.approx(expected, abs=0.05)


@pytest.mark.parametrize("reweight", [False, True])
def test_state_at_a_consumed_count_resumes_exactly(sizes, reweight):
    """Batches issued ahead of training (loader workers, buffer thread) go back into the
    saved plan; a stream restored from it continues with exactly the same batches."""
    gen = _gen(sizes)
    gen.begin_pass(2)
    stream = BatchStream(_gen(sizes), reweight=reweight)
    stream.begin_epoch(offset=4)  # a resumed epoch: 4 batches were trained before
    issued = [stream.next_batch(_source(gen)) for _ in range(40)]
    state = stream.state(consumed=4 + 25)  # 25 of the 40 issued were trained
    rest = issued[25:] + [stream.next_batch(_source(gen)) for _ in range(30)]

    gen2 = _gen(sizes)
    gen2.load_state_dict(state.generator)
    restored = BatchStream(_gen(sizes), reweight=reweight)
    restored.restore(StreamState(**vars(state)))
    again = [restored.next_batch(_source(gen2)) for _ in range(len(rest))]
    assert [b.ids.tolist() for b in again] == [b.ids.tolist() for b in rest]
    # each batch keeps its run-wide number (its losses name it to the Assistant)
    assert [b.seq for b in again] == [b.seq for b in rest]
    assert [b.seq for b in issued + rest[15:]] == list(range(len(issued) + len(rest) - 15))
    # the next epoch's batch count comes from the rate estimate: it must resume too
    assert list(restored.rate.recent) == list(stream.rate.recent)
    if reweight:
        for (_, w1, _), (ids, w2, _) in zip(rest, again):
            assert w2.tolist() == w1.tolist()
            assert set(np.round(1 / w2.astype(np.float64), 5).tolist()) <= {0.3, 0.9}  # 1/P
    else:
        assert all(b.weights is None for b in again)


def test_a_restored_stream_credits_every_batch_as_the_saved_one_did(sizes):
    """The log's aa_accept_* and aa_skip_tok come from the window counts credited to each
    batch as it is issued. Batches issued ahead of training and saved back into the plan
    keep the credit they had (were: their counts went back into the pool and were spread
    again over all batches still to come, so a resumed run logged other shares and skipped
    tokens than the uninterrupted one, a few tokens off, though it trained the same
    batches); a second save before they are issued keeps it too."""
    gen = _gen(sizes)
    gen.begin_pass(1)
    stream = BatchStream(_gen(sizes))
    stream.begin_epoch()
    for _ in range(40):
        stream.next_batch(_source(gen))
    state = stream.state(consumed=25)  # 15 issued, not trained (a loader ran ahead)
    for _ in range(30):
        stream.next_batch(_source(gen))
    expected = stream.issued_counts[25:]

    gen2 = _gen(sizes)
    gen2.load_state_dict(state.generator)
    restored = BatchStream(_gen(sizes))
    restored.restore(StreamState(**vars(state)))
    restored.begin_epoch(offset=25)
    for _ in range(5):
        restored.next_batch(_source(gen2))
    again = restored.state(consumed=25 + 3)  # 2 of the 15 issued again, not trained
    restored = BatchStream(_gen(sizes))
    restored.restore(StreamState(**vars(again)))
    gen3 = _gen(sizes)
    gen3.load_state_dict(again.generator)
    restored.begin_epoch(offset=28)
    for _ in range(len(expected) - 3):
        restored.next_batch(_source(gen3))
    got = restored.issued_counts
    assert len(got) == len(expected) - 3
    for mine, theirs in zip(got, expected[3:]):
        assert mine == pytest.approx(theirs), (mine, theirs)


def test_windows_of_an_old_generation_are_dropped(sizes):
    gen = _gen(sizes)
    gen.begin_pass(1)
    stream = BatchStream(_gen(sizes))
    stream.next_batch(_source(gen))
    stale = gen.next_window(_score)  # made before the restart below
    state = stream.restart()
    assert state["generation"] == 1
    fresh = _gen(sizes)
    fresh.load_state_dict(state)
    fresh_windows = [fresh.next_window(_score) for _ in range(3)]
    windows = [stale] + fresh_windows
    def taken():  # considered pairs of every window taken (batches issued or not)
        return stream.credited["considered_pairs"] + stream._untold["considered_pairs"]

    taken_before = taken()
    while stream.pending:
        stream.next_batch(lambda: windows.pop(0))
    stream.next_batch(lambda: windows.pop(0))
    # the stale window was dropped, the fresh ones (same pairs, new generation) taken
    used = len(fresh_windows) - len(windows)
    assert all(w is not stale for w in windows) and used >= 1
    assert taken() - taken_before == pytest.approx(
        sum(w.considered_pairs for w in fresh_windows[:used]))
    assert stream.gen_state == fresh_windows[used - 1].state_after


def _pass_lines(caplog):
    return [r.getMessage() for r in caplog.records if "AutoAssist data pass" in r.getMessage()]


def test_each_data_pass_logs_its_own_acceptance_and_resumes_it(sizes, caplog, tmp_path):
    """A fairseq epoch mixes passes, so the per-pass acceptance (what the random control
    must follow) has its own log line and pass-log record, which a stream resumed mid-pass
    still gets right."""
    caplog.set_level("INFO", logger="autoassist_fairseq.data.batch_stream")
    gen = _gen(sizes)
    gen.begin_pass(1)
    windows = []

    def source():
        windows.append(gen.next_window(lambda ids: _score(ids) * (0.5 if gen.data_pass > 1 else 1)))
        return windows[-1]

    pass_log = tmp_path / "passes.jsonl"
    stream = BatchStream(_gen(sizes), pass_log=str(pass_log))
    issued = [stream.next_batch(source) for _ in range(30)]
    state = stream.state(consumed=30)
    while sum(w.ends_pass for w in windows) < 2:
        issued.append(stream.next_batch(source))
    lines = _pass_lines(caplog)
    records = [json.loads(line) for line in pass_log.read_text().splitlines()]
    assert len(lines) == len(records) == 2
    for data_pass, line in zip((1, 2), lines):
        mine = [w for w in windows if w.data_pass == data_pass]
        tokens = sum(w.accepted_tokens for w in mine) / sum(w.considered_tokens for w in mine)
        pairs = sum(w.accepted_pairs for w in mine) / sum(w.considered_pairs for w in mine)
        assert line == (f"AutoAssist data pass {data_pass} (shard 0): accepted {tokens:.4f} "
                        f"of its tokens, {pairs:.4f} of its pairs")
        assert records[data_pass - 1] == dict(
            data_pass=data_pass, shard=0, token_rate=pytest.approx(tokens),
            pair_rate=pytest.approx(pairs),
            **{key: pytest.approx(sum(getattr(w, key) for w in mine)) for key in COUNTERS})
    assert 0.5 < float(lines[0].split()[7]) < 0.75 and float(lines[1].split()[7]) < 0.4

    caplog.clear()  # resumed after 30 batches of pass 1: the same two lines
    gen = _gen(sizes)
    gen.load_state_dict(state.generator)
    restored = BatchStream(_gen(sizes), pass_log=str(pass_log))
    restored.restore(StreamState(**vars(state)))
    for _ in range(len(issued) - 30):
        restored.next_batch(source)
    assert _pass_lines(caplog) == lines
    # appended after the interrupted run's records: the same two again
    assert [json.loads(line) for line in pass_log.read_text().splitlines()] == records * 2


def test_the_rate_estimate_forgets_windows_older_than_a_pass():
    """The next epoch's batch count follows the acceptance of the last pass's worth of
    windows, not of the whole run: early windows that took everything drop out."""
    from autoassist_fairseq.data.batch_stream import _RateEstimate

    rate = _RateEstimate(windows=3)
    assert rate.value == 1.0  # nothing seen: every pair
    for accepted, tokens in ((1.0, 100.0), (1.0, 100.0), (0.5, 100.0), (0.5, 300.0)):
        rate.add(accepted, tokens)
    # the first window is out; the other three, token-weighted: (100 + 50 + 150) / 500
    assert len(rate.recent) == 3 and rate.value == pytest.approx(0.6)
    rate.add(0.2, 100.0)
    rate.add(0.2, 100.0)
    assert rate.value == pytest.approx((150 + 20 + 20) / 500)
