"""Per-sentence losses on their way to the Assistant: handed over one step late, once."""

import numpy as np
import torch

from autoassist_fairseq.losses import BossLosses, sentence_losses


def test_losses_are_handed_over_one_step_late_and_flushed_on_demand():
    held = BossLosses()
    first, second = {"ids": np.array([3, 1])}, {"ids": np.array([7])}
    assert held.hold(first, torch.tensor([0.5, 1.5])) is False
    assert list(held.ready()) == []  # the newest stays until a later step
    held.hold(second, torch.tensor([2.0]))
    out = list(held.ready())
    assert len(out) == 1 and out[0][0].tolist() == [3, 1] and out[0][1].tolist() == [0.5, 1.5]
    flushed = list(held.ready(keep_last=False, wait=True))
    assert [ids.tolist() for ids, _ in flushed] == [[7]]


def test_a_retried_batch_is_reported_once():
    """fairseq's --amp retries an update with the same samples after an overflow."""
    held = BossLosses()
    meta = {"ids": np.array([4, 5])}
    assert held.hold(meta, torch.tensor([float("inf"), 2.0])) is False
    assert held.hold(meta, torch.tensor([1.0, 2.0])) is True  # the retry: not kept again
    assert [ids.tolist() for ids, _ in held.ready(keep_last=False)] == [[4, 5]]


def test_sentence_loss_is_the_mean_over_real_target_tokens():
    sample = {"target": torch.tensor([[5, 6, 7], [5, 1, 1]])}  # padding_idx 1
    tokens = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]).reshape(-1)
    assert sentence_losses(tokens, sample, padding_idx=1).tolist() == [2.0, 4.0]
