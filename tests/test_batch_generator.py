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


def _epoch(gen, epoch, accept_fn, num_batches=None):
    gen.begin_epoch(epoch, num_batches)
    windows = []
    while (w := gen.next_window(accept_fn)) is not None:
        windows.append(w)
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
    rejected = np.concatenate([w.rejected for w in w1])
    accepted = np.concatenate([b for w in w1 for b in w.batches])
    assert 0.4 < len(accepted) / N < 0.6
    assert len(np.intersect1d(rejected, accepted)) == 0 and len(rejected) + len(accepted) == N
    w2 = _epoch(gen, 2, _all)
    seen = np.concatenate([b for w in w2 for b in w.batches])
    assert set(rejected.tolist()) <= set(seen.tolist())


def test_order_changes_per_epoch(sizes):
    gen = _gen(sizes)
    first = [b.tolist() for w in _epoch(gen, 1, _all) for b in w.batches]
    second = [b.tolist() for w in _epoch(gen, 2, _all) for b in w.batches]
    again = [b.tolist() for w in _epoch(gen, 1, _all) for b in w.batches]
    assert first != second and first == again


@pytest.mark.parametrize("target", [30, 200])
def test_fixed_count_is_exact_without_duplicates(sizes, target):
    gen = _gen(sizes)
    half = lambda ids: np.full(len(ids), 0.5)  # noqa: E731
    windows = _epoch(gen, 1, half, num_batches=target)
    batches = [b for w in windows for b in w.batches]
    assert len(batches) == target
    ids = np.concatenate(batches)
    assert len(ids) == len(set(ids.tolist()))


def test_epoch_batch_count_is_what_accept_all_yields(sizes):
    gen = _gen(sizes)
    assert gen.epoch_batch_count(4) == sum(len(w.batches) for w in _epoch(gen, 4, _all))


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
    gen.begin_epoch(2, num_batches=60)
    for _ in range(2):
        gen.next_window(score)
    state = gen.state_dict()
    rest = [b.tolist() for w in iter(lambda: gen.next_window(score), None) for b in w.batches]
    other = _gen(sizes)
    other.load_state_dict(state)
    again = [b.tolist() for w in iter(lambda: other.next_window(score), None) for b in w.batches]
    assert rest == again and len(rest) > 0


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


def test_bad_arguments():
    with pytest.raises(ValueError, match="--max-tokens or --batch-size"):
        BatchGenerator(np.arange(3), np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="--assistant-window=0"):
        BatchGenerator(np.arange(3), np.ones(3), np.ones(3), max_tokens=10, window_size=0)


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
