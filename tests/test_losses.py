"""Per-sentence losses on their way to the Assistant: handed over one step late, once."""

import numpy as np
import pytest
import torch

from autoassist_fairseq.losses import BossLosses, sentence_losses


def test_losses_are_handed_over_one_step_late_and_flushed_on_demand():
    held = BossLosses()
    first, second = {"ids": np.array([3, 1]), "seq": 0}, {"ids": np.array([7]), "seq": 1}
    assert held.hold(first, torch.tensor([0.5, 1.5])) is False
    assert list(held.ready()) == []  # the newest stays until a later step
    held.hold(second, torch.tensor([2.0]))
    out = list(held.ready())
    assert len(out) == 1 and out[0][0].tolist() == [3, 1] and out[0][1].tolist() == [0.5, 1.5]
    assert out[0][2] == 0  # the batch's number travels with its losses
    flushed = list(held.ready(keep_last=False, wait=True))
    assert [(ids.tolist(), seq) for ids, _, seq in flushed] == [([7], 1)]


def test_a_retried_batch_is_reported_once():
    """fairseq's --amp retries an update with the same samples after an overflow."""
    held = BossLosses()
    meta = {"ids": np.array([4, 5]), "seq": 0}
    assert held.hold(meta, torch.tensor([float("inf"), 2.0])) is False
    assert held.hold(meta, torch.tensor([1.0, 2.0])) is True  # the retry: not kept again
    assert [ids.tolist() for ids, _, _ in held.ready(keep_last=False)] == [[4, 5]]


def test_sentence_loss_is_the_mean_over_real_target_tokens():
    sample = {"target": torch.tensor([[5, 6, 7], [5, 1, 1]])}  # padding_idx 1
    tokens = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]).reshape(-1)
    assert sentence_losses(tokens, sample, padding_idx=1).tolist() == [2.0, 4.0]


def test_label_smoothing_floor_is_fairseqs_loss_at_the_smoothed_target():
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    from autoassist_fairseq.losses import label_smoothing_floor

    eps, vocab = 0.1, 50
    target = torch.tensor([[3], [7]])
    smoothed = torch.full((2, vocab), eps / (vocab - 1))
    smoothed.scatter_(1, target, 1.0 - eps)
    at_target, _ = label_smoothed_nll_loss(smoothed.log(), target, eps, reduce=False)
    floor = label_smoothing_floor(eps, vocab)
    assert torch.allclose(at_target.flatten(), torch.full((2,), floor, dtype=torch.float32))
    # any other prediction, even the one-hot reference, lies above the floor
    other = torch.log_softmax(torch.randn(2, vocab), -1)
    confident = torch.log_softmax(torch.full((2, vocab), -30.0).scatter_(1, target, 30.0), -1)
    for lprobs in (other, confident):
        loss, _ = label_smoothed_nll_loss(lprobs, target, eps, reduce=False)
        assert (loss.flatten() > floor).all()
    assert label_smoothing_floor(0.0, vocab) == 0.0  # cross_entropy: no floor
    # 0.1 over about 8k types: the 1.77 bits per token that the results cite
    assert abs(label_smoothing_floor(0.1, 7_800) / np.log(2) - 1.77) < 0.01


class _Criterion:
    padding_idx = 1

    def compute_loss(self, model, net_output, sample, reduce=True):
        loss = net_output.reshape(-1)
        return (loss.sum(), loss.sum()) if reduce else (loss, loss)


class _Iterator:
    """The iterator's side of a training step: the real counters, whose sources are read
    (``pops``) once per step; every read finds 100 more tokens considered."""

    epoch = 1

    def __init__(self):
        from types import SimpleNamespace

        from autoassist_fairseq.tasks.counters import Counters

        self.losses = BossLosses()
        self.counters = Counters()
        self.client = SimpleNamespace(check=lambda: None)
        self.pops = 0

    def begin_update(self, update_num):
        pass

    def hold_losses(self, meta, losses):
        return self.losses.hold(meta, losses)

    def _read(self):
        self.pops += 1
        return {"considered_tokens": 100.0 * self.pops}, {}

    def log_step(self, seq, tokens, padded_tokens, retry):
        return self.counters.step(seq, tokens, padded_tokens, self._read, retry)


def test_an_amp_retry_on_a_prepared_copy_is_one_batch_with_its_first_steps_counts():
    """On a GPU fairseq prepares the sample again for the --amp retry (a new dict): the
    batch is still reported to the Assistant once, and the retry's step returns the counts
    of the first step, whose logging output fairseq dropped."""
    from autoassist_fairseq.tasks.train_step import train_step_with_losses

    crit, itr = _Criterion(), _Iterator()
    out = torch.tensor([[1.0, 2.0], [3.0, 4.0]])

    def sample(seq):
        return {"autoassist": {"ids": np.array([4, 5]) + seq, "tokens": 9, "seq": seq},
                "target": torch.tensor([[5, 6], [5, 6]]), "net_input": {"src_tokens": out}}

    def step(s):
        return train_step_with_losses(lambda: (crit.compute_loss(None, out, s), 2, {}), itr, s,
                                      crit, 0, padding_idx=1)

    _, first = step(sample(0))
    _, retry = step(sample(0))  # another dict, the same batch
    assert retry == first and first["boss_tokens"] == 9 and first["considered_tokens"] == 100
    assert itr.pops == 1
    _, second = step(sample(1))
    assert second["boss_tokens"] == 9 and second["considered_tokens"] == 100 and itr.pops == 2
    assert [seq for _, _, seq in itr.losses.ready(keep_last=False)] == [0, 1]


def test_token_losses_that_are_not_one_per_target_token_are_refused():
    from autoassist_fairseq.losses import sentence_losses

    doubled = torch.ones(2 * 2 * 3)  # R-Drop: the batch twice
    with pytest.raises(ValueError, match="gave 12 token losses for a batch of 2 x 3"):
        sentence_losses(doubled, {"target": torch.tensor([[5, 6, 7], [5, 6, 1]])}, padding_idx=1)


def test_sentence_losses_with_a_dropped_target_prefix_align_from_the_end():
    """--ignore-prefix-size N: the criterion returns the losses of target[:, N:]; a sentence's
    mean is over its own non-padding tokens of that part (fairseq pads targets on the right)."""
    pad = 1
    target = torch.tensor([[7, 5, 6, 2, pad, pad],
                           [7, 5, 6, 8, 9, 2]])
    losses = torch.tensor([[1.0, 2.0, 3.0, 0.0, 0.0],  # the prefix (7) dropped
                           [1.0, 1.0, 1.0, 1.0, 5.0]])
    got = sentence_losses(losses.reshape(-1), {"target": target}, pad)
    assert got.tolist() == pytest.approx([2.0, 1.8])  # (1+2+3)/3 and 9/5
