"""--assistant-reweight: accepted pairs carry 1 / P(accept), through resumes, into the loss."""

import numpy as np
import pytest
import torch

from autoassist_fairseq.transport.process import AssistantProcess
from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.tasks.batch_iterator import AutoAssistEpochBatchIterator
from autoassist_fairseq.losses import capture_token_losses, weigh
from utils import FixedAssistant

N = 3000


def quarter_for_even(ids):
    """P(accept) = 0.25 for even ids, 1 for odd ones."""
    return np.where(np.asarray(ids) % 2 == 0, 0.25, 1.0)


class EvenSkippingAssistant(FixedAssistant):
    """Stands in for the Assistant with the fixed acceptance rule above."""

    def accept_probability(self, ids):
        return quarter_for_even(ids)


def _generator():
    rng = np.random.default_rng(0)
    src = rng.integers(3, 40, N)
    return BatchGenerator(np.arange(N), src, src + rng.integers(0, 5, N), max_tokens=512,
                          window_size=500, seed=5)


def test_window_weights_are_inverse_acceptance_of_its_accepted_pairs():
    gen = _generator()
    gen.begin_pass(1)
    windows = [gen.next_window(quarter_for_even) for _ in range(gen.num_windows + 1)]
    assert windows[-1].ends_pass
    for w in windows[:-1]:
        accepted = np.concatenate(w.batches + [w.state_after["carried"]])
        assert sorted(w.weight_ids.tolist()) == sorted(accepted.tolist())
        np.testing.assert_allclose(w.weights, 1 / quarter_for_even(w.weight_ids))
    # the pass's remainders keep the weights of the windows that accepted them
    last = windows[-1]
    assert sorted(last.weight_ids.tolist()) == sorted(np.concatenate(last.batches).tolist())
    np.testing.assert_allclose(last.weights, 1 / quarter_for_even(last.weight_ids))


def _iterator(process_holder):
    def start():
        process_holder.append(AssistantProcess(EvenSkippingAssistant, _generator))
        return process_holder[-1]
    return AutoAssistEpochBatchIterator(list(range(N)), _collate, _generator(), start,
                                        reweight=True)


def _collate(items):
    ids = torch.tensor(items)
    return {"id": ids, "ntokens": len(items), "net_input": {"src_lengths": ids % 5}}


def _check_weights(sample):
    ids = sample["id"].numpy()
    expected = 1 / quarter_for_even(ids)
    np.testing.assert_allclose(sample["autoassist_weight"].numpy(), expected)


def test_batches_carry_weights_and_a_mid_epoch_resume_keeps_them():
    processes = []
    try:
        itr = _iterator(processes)
        epoch = itr.next_epoch_itr()
        for _ in range(5):  # the first window's batches: sampled pairs only
            _check_weights(next(epoch))
        state = itr.state_dict()
        saved = state["autoassist"]["ranks"][0]["stream"]
        assert len(saved["weights"]) == len(saved["pending"]) > 0
        rest = [(s["id"].tolist(), s["autoassist_weight"].tolist()) for s in epoch]
        itr.shutdown()

        again = _iterator(processes)
        again.load_state_dict(state)
        resumed = again.next_epoch_itr()
        assert resumed.n == 5
        rest_again = [(s["id"].tolist(), s["autoassist_weight"].tolist()) for s in resumed]
        again.shutdown()
    finally:
        for p in processes:
            p.shutdown()
    # the same batches with the same weights as without the interruption: the pending
    # pairs kept the weights of the window that accepted them
    assert rest_again == rest and len(rest) > 20
    weights = np.concatenate([w for _, w in rest])
    assert set(np.unique(weights).tolist()) == {1.0, 4.0}


def test_weigh_scales_sentences_and_keeps_the_token_count():
    target = torch.tensor([[5, 6, 7], [5, 6, 1]])  # padding_idx 1: 3 + 2 target tokens
    losses = torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 0.0]])
    plain = weigh(losses, target, torch.ones(2), padding_idx=1)
    assert plain.item() == pytest.approx(losses.sum().item())
    # weights 1 and 4: scaled by 5 tokens / (3 * 1 + 2 * 4) so they sum to the token count
    scale = 5 / 11
    weighted = weigh(losses.reshape(-1, 1), target, torch.tensor([1.0, 4.0]), padding_idx=1)
    assert weighted.item() == pytest.approx(scale * (3 * 1.0 + 4 * 4.0))


class ToyCriterion:
    padding_idx = 1

    def compute_loss(self, model, net_output, sample, reduce=True):
        loss = net_output.reshape(-1)
        return (loss.sum(), loss.sum()) if reduce else (loss, loss)


def test_captured_losses_stay_unweighted_and_nll_is_not_weighted():
    crit = ToyCriterion()
    sample = {"target": torch.tensor([[5, 6], [5, 6]])}
    out = torch.tensor([[1.0, 1.0], [3.0, 3.0]], requires_grad=True)
    with capture_token_losses(crit, torch.tensor([1.0, 3.0])) as captured:
        loss, nll = crit.compute_loss(None, out, sample)
    assert torch.equal(captured.token_losses, out.detach().reshape(-1))
    assert nll.item() == pytest.approx(8.0)
    assert loss.item() == pytest.approx(4 / 8 * (2 * 1.0 + 3 * 6.0))
    assert "compute_loss" not in vars(crit)  # the shadow is gone after the step
