import numpy as np
import pytest
from fairseq.data import data_utils

from autoassist_fairseq.data.batch_generator import BatchGenerator

N = 5000


@pytest.fixture(scope="module")
def sizes():
    rng = np.random.default_rng(0)
    src = np.clip(rng.lognormal(2.7, 0.5, N).astype(int), 1, 200)
    tgt = np.clip((src * rng.uniform(0.8, 1.3, N)).astype(int), 1, 200)
    return src, tgt


def _gen(sizes, **kw):
    src, tgt = sizes
    args = dict(max_tokens=1024, window_size=1000, seed=3)
    args.update(kw)
    return BatchGenerator(np.arange(N), src, tgt, **args)


def _epoch(gen, epoch, accept_fn):
    """The windows of data pass *epoch*, up to the one that ends it."""
    gen.begin_pass(epoch)
    windows = [gen.next_window(accept_fn)]
    while not windows[-1].ends_pass:
        windows.append(gen.next_window(accept_fn))
    return windows


def _all(n):
    return np.ones(len(n))


def test_batches_respect_max_tokens_and_cover_shard(sizes):
    gen = _gen(sizes)
    windows = _epoch(gen, 1, _all)
    batches = [b for w in windows for b in w.batches]
    ids = np.concatenate(batches)
    assert len(ids) == len(set(ids.tolist())) == N  # each pair once, all pairs
    for b in batches:
        assert len(b) * gen.num_tokens(b).max() <= 1024
    assert sum(w.considered_pairs for w in windows) == N


def test_rejected_pairs_return_next_epoch(sizes):
    gen = _gen(sizes)
    half = lambda ids: np.full(len(ids), 0.5)  # noqa: E731
    w1 = _epoch(gen, 1, half)
    accepted = np.concatenate([b for w in w1 for b in w.batches])
    rejected = np.setdiff1d(np.arange(N), accepted)
    assert 0.4 < len(accepted) / N < 0.6
    assert len(accepted) == len(set(accepted.tolist()))
    assert sum(w.accepted_pairs for w in w1) == len(accepted)
    assert gen.data_pass == 2 and gen.cursor == 0  # the stream went on into the next pass
    w2 = _epoch(gen, 2, _all)
    seen = np.concatenate([b for w in w2 for b in w.batches])
    assert set(rejected.tolist()) <= set(seen.tolist())


def test_order_changes_per_epoch(sizes):
    gen = _gen(sizes)
    first = [b.tolist() for w in _epoch(gen, 1, _all) for b in w.batches]
    second = [b.tolist() for w in _epoch(gen, 2, _all) for b in w.batches]
    again = [b.tolist() for w in _epoch(gen, 1, _all) for b in w.batches]
    assert first != second and first == again


def test_stream_runs_pass_after_pass(sizes):
    gen = _gen(sizes)
    gen.begin_pass(1)
    passes = {}
    for _ in range(3 * (gen.num_windows + 1)):
        w = gen.next_window(lambda ids: np.full(len(ids), 0.7))
        passes.setdefault(w.data_pass, []).extend(w.batches)
    assert sorted(passes) == [1, 2, 3]
    for batches in passes.values():  # every pass: each pair at most once
        ids = np.concatenate(batches)
        assert len(ids) == len(set(ids.tolist())) and 0.6 < len(ids) / N < 0.8


def test_accept_all_and_generation_from_begin(sizes):
    from autoassist_fairseq.transport.messages import RestartStream

    gen = _gen(sizes)
    gen.begin(RestartStream(3))
    state = dict(gen.state_dict(), generation=7)
    other = _gen(sizes)
    other.begin(RestartStream(3, state=state, accept_all=True))
    w = other.next_window(lambda ids: np.zeros(len(ids)))  # accept_all overrides the scores
    assert w.accepted_pairs == w.considered_pairs and w.state_after["generation"] == 7
    assert w.state_after["accept_all"] is True


def test_pass_batch_count_is_what_accept_all_yields(sizes):
    gen = _gen(sizes)
    assert gen.pass_batch_count(4) == sum(len(w.batches) for w in _epoch(gen, 4, _all))


def test_shards_are_disjoint_and_cover_the_data(sizes):
    seen = []
    for shard in range(3):
        gen = _gen(sizes, num_shards=3, shard_id=shard)
        seen.append(np.concatenate([b for w in _epoch(gen, 1, _all) for b in w.batches]))
    union = np.concatenate(seen)
    assert len(union) == len(set(union.tolist())) == N


def test_state_dict_round_trip_gives_identical_batches(sizes):
    score = lambda ids: 0.3 + 0.7 * (ids % 7 == 0)  # noqa: E731
    gen = _gen(sizes)
    gen.begin_pass(2)
    for _ in range(2):
        gen.next_window(score)
    state = gen.state_dict()
    rest = [gen.next_window(score) for _ in range(gen.num_windows + 2)]
    other = _gen(sizes)
    other.load_state_dict(state)
    again = [other.next_window(score) for _ in range(gen.num_windows + 2)]
    assert [b.tolist() for w in rest for b in w.batches] == \
        [b.tolist() for w in again for b in w.batches]
    assert [w.weights.tolist() for w in rest] == [w.weights.tolist() for w in again]
    assert rest[-1].data_pass == 3  # crossed into the next pass


def _padding(batches, src, tgt):
    real = sum(src[b].sum() + tgt[b].sum() for b in batches)
    padded = sum(len(b) * (src[b].max() + tgt[b].max()) for b in batches)
    return 1 - real / padded


def test_padding_close_to_fairseq(sizes):
    src, tgt = sizes
    with data_utils.numpy_seed(1):  # fairseq: one global length sort
        order = np.random.permutation(N)
        order = order[np.argsort(tgt[order], kind="mergesort")]
        order = order[np.argsort(src[order], kind="mergesort")]
    fairseq_batches = data_utils.batch_by_size(
        order, lambda i: max(src[i], tgt[i]), max_tokens=1024,
        num_tokens_vec=np.maximum(src, tgt)[order])
    ours = [b for w in _epoch(_gen(sizes, window_size=2000), 1, _all) for b in w.batches]
    assert _padding(ours, src, tgt) - _padding(fairseq_batches, src, tgt) < 0.05


def test_padding_stays_close_to_fairseq_when_most_pairs_are_skipped(sizes):
    """Accepted pairs are pooled across windows until a window's worth is batched: with
    70% skipped, batches are cut from pools as large as with nothing skipped."""
    src, tgt = sizes
    keep = lambda ids: np.where((ids * 7919) % 10 < 3, 1.0, 0.0)  # noqa: E731 (30%)
    windows = _epoch(_gen(sizes, window_size=2000), 1, keep)
    ours = [b for w in windows for b in w.batches]
    accepted = np.concatenate(ours)
    assert sorted(accepted.tolist()) == np.flatnonzero(keep(np.arange(N))).tolist()
    order = accepted[np.lexsort((tgt[accepted], src[accepted]))]
    fairseq_batches = data_utils.batch_by_size(
        order, None, max_tokens=1024, num_tokens_vec=np.maximum(src, tgt)[order])
    assert _padding(ours, src, tgt) - _padding(fairseq_batches, src, tgt) < 0.05
    assert len(ours) <= 1.1 * len(fairseq_batches)
    # most windows are pooled with the next one: they hand over no batch of their own
    assert sum(not w.batches for w in windows[:-1]) >= 1


def test_consecutive_batches_mix_lengths_as_fairseq_does(sizes):
    """fairseq shuffles batches of every length across the epoch; a run of a window's
    batches must not hold one length only (slices of the length order did)."""
    src, _ = sizes
    gen = _gen(sizes)
    first = _epoch(gen, 1, _all)[0].batches
    means = np.array([src[b].mean() for b in first])
    q10, q90 = np.quantile(src, [0.1, 0.9])
    assert means.min() < q10 and means.max() > q90  # a window spans the lengths
    # in stream order, neighbouring batches differ in length as shuffled batches do
    step = np.abs(np.diff(means)).mean()
    assert step > 0.5 * np.abs(means[:, None] - means[None, :]).mean()


def test_a_generator_without_a_batch_bound_is_a_programming_error():
    """fairseq-train stops without --max-tokens or --batch-size before the task is set up;
    below it, a generator built without either is a caller's mistake."""
    with pytest.raises(AssertionError, match="a batch needs a bound"):
        BatchGenerator(np.arange(3), np.ones(3), np.ones(3))


def test_no_pair_lost_with_batch_size_multiple(sizes):
    """fairseq's batch_by_size drops up to 7 pairs with --required-batch-size-multiple 8."""
    gen = _gen(sizes, required_batch_size_multiple=8)
    for window in (1003, 77):
        ids = np.arange(window)
        batches = gen.make_batches(ids)
        assert sorted(np.concatenate(batches).tolist()) == ids.tolist()
    batches = [b for w in _epoch(_gen(sizes, required_batch_size_multiple=8, window_size=333), 1,
                                 _all) for b in w.batches]
    assert sorted(np.concatenate(batches).tolist()) == list(range(N))


def test_a_few_skipped_pairs_add_no_batches_with_batch_size_multiple(sizes):
    """With --required-batch-size-multiple 8 (fairseq's default), a pool whose size is not
    a multiple of 8 loses its last batch in fairseq's batch_by_size; those pairs are carried
    with the next window's, not batched on their own (which made a pass longer as soon as
    a few pairs were skipped: 1.6% fewer tokens per update on Tatoeba)."""
    src, tgt = sizes

    def pass_batches(accept_fn):
        gen = _gen(sizes, required_batch_size_multiple=8, window_size=500)
        return [b for w in _epoch(gen, 1, accept_fn) for b in w.batches]

    every = pass_batches(_all)
    some = pass_batches(lambda ids: np.where(ids % 997 == 5, 0.0, 1.0))  # 6 of 5000 skipped
    assert len(some) <= len(every)
    # every batch but the pass's last few is full: its size a multiple of 8 and not tiny
    assert sum(len(b) < 8 for b in some) <= 1
    assert sorted(np.concatenate(some).tolist()) == [i for i in range(N) if i % 997 != 5]


def test_an_empty_shard_and_nonfinite_probabilities_are_refused(sizes):
    """A worker without a pair would loop over empty passes, and a NaN P(accept) never
    takes its pair: both raise, naming the cause."""
    src, tgt = sizes
    with pytest.raises(ValueError, match="worker 2 of 3 has no training pair.*holds 2 pairs"):
        BatchGenerator(np.arange(2), src, tgt, max_tokens=100, num_shards=3, shard_id=2)
    gen = BatchGenerator(np.arange(len(src)), src, tgt, max_tokens=100, window_size=50)
    gen.begin_pass(1)
    with pytest.raises(FloatingPointError, match="non-finite acceptance probabilities"):
        gen.next_window(lambda ids: np.where(ids % 7 == 0, np.nan, 0.5))
