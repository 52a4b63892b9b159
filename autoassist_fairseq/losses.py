"""Step 5 of the data flow: per-sentence Boss losses, taken from the training forward pass.

As fairseq's ``examples/translation_moe`` does, the criterion's ``compute_loss`` is asked
for token-level losses (``reduce=False``) instead of their sum. During one training step we
shadow the criterion's bound ``compute_loss`` with a wrapper that keeps a detached copy of
the token losses and returns their sum, so the loss and its gradient are the criterion's
own (summed in a different order: equal up to float rounding) and no second forward pass
is run.

A sentence's loss is the *mean* over its non-padding target tokens: the Assistant
compares sentences of every length against one threshold T_k, and a summed loss would
mostly tell long sentences from short ones.

With ``--assistant-reweight`` the summed loss weighs each sentence's tokens by its
importance weight 1 / P(accept), rescaled so that the weights of a batch's target tokens
sum to their count: the gradient's size stays that of an unweighted batch (the learning
rate keeps its meaning), while its direction is that of uniform batches in expectation.
The token losses kept for the Assistant are the unweighted ones.
"""

import math
from collections import OrderedDict, deque

import numpy as np
import torch


def label_smoothing_floor(epsilon: float, vocab_size: int) -> float:
    """The lowest token loss ``label_smoothed_cross_entropy`` allows, in nats.

    fairseq's criterion puts 1 - epsilon on the reference and epsilon / (V - 1) on each of
    the other V - 1 types; its loss is the cross-entropy from that target q, so no model can
    go below the entropy of q: -(1 - eps) ln(1 - eps) - eps ln(eps / (V - 1)). The part of a
    loss above it, the KL divergence from q to the model, is the *reducible* loss: zero
    exactly where the gradient with respect to the logits is zero, so it is the learning
    signal a pair has left. Under ``cross_entropy`` (epsilon 0) the floor is 0.

    Args:
        epsilon (float): ``--label-smoothing``, in [0, 1).
        vocab_size (int): the output vocabulary, ``len(task.target_dictionary)``.
    """
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing {epsilon} is out of range: it must be in [0, 1)")
    if epsilon == 0.0:
        return 0.0
    if vocab_size < 2:
        raise ValueError(f"a vocabulary of {vocab_size} types has no label smoothing floor")
    return -(1.0 - epsilon) * math.log(1.0 - epsilon) - epsilon * math.log(epsilon / (vocab_size - 1))


class capture_token_losses:
    """Context manager: within it, *criterion*'s loss also leaves its per-token terms in
    ``self.token_losses`` (a detached tensor, ``bsz * tgt_len`` values, 0 at padding)."""

    def __init__(self, criterion, weights=None):
        # one loss per target token: tasks.config.check_criterion refused other criteria
        self.criterion = criterion
        self.weights = weights  # per-sentence importance weights (bsz,), or None
        self.token_losses = None

    def __enter__(self):
        original = self.criterion.compute_loss

        def compute_loss(model, net_output, sample, reduce=True):
            out = original(model, net_output, sample, reduce=False)
            terms = out if isinstance(out, tuple) else (out,)
            self.token_losses = terms[0].detach()
            if not reduce:
                return out
            summed = tuple(t.sum() for t in terms)
            if self.weights is not None:  # the loss only: nll_loss stays the logged truth
                weighted = weigh(terms[0], sample["target"], self.weights,
                                 self.criterion.padding_idx)
                summed = (weighted,) + summed[1:]
            return summed if isinstance(out, tuple) else summed[0]

        self.criterion.compute_loss = compute_loss  # instance attribute, removed on exit
        return self

    def __exit__(self, *exc):
        del self.criterion.compute_loss
        return False


def _by_sentence(token_losses: torch.Tensor, target: torch.Tensor, padding_idx: int):
    """*token_losses* as (bsz, len), and the mask of their non-padding target tokens."""
    if token_losses.numel() % max(target.size(0), 1) or \
            token_losses.numel() > target.numel():
        raise ValueError(f"the criterion gave {token_losses.numel()} token losses for a batch of "
                         f"{target.size(0)} x {target.size(1)} target tokens: it is not one "
                         "loss per target token; use --criterion label_smoothed_cross_entropy "
                         "or cross_entropy")
    tokens = token_losses.reshape(target.size(0), -1)
    # criteria may drop a target prefix (--ignore-prefix-size): align the mask from the end
    return tokens, target[:, target.size(1) - tokens.size(1):].ne(padding_idx)


def weigh(token_losses: torch.Tensor, target: torch.Tensor, weights: torch.Tensor,
          padding_idx: int) -> torch.Tensor:
    """Sum of *token_losses* with each sentence's tokens weighted by *weights*, scaled so
    that the weights of the batch's non-padding target tokens sum to their count."""
    tokens, mask = _by_sentence(token_losses, target, padding_idx)
    w = weights.to(tokens.device, tokens.dtype)
    counts = mask.sum(1).to(tokens.dtype)
    w = w * counts.sum() / (w * counts).sum().clamp(min=1e-12)
    return (tokens * w[:, None]).sum()


def sentence_losses(token_losses: torch.Tensor, sample: dict, padding_idx: int) -> torch.Tensor:
    """Mean token loss of every sentence of *sample*, on the losses' device."""
    tokens, mask = _by_sentence(token_losses, sample["target"], padding_idx)
    return tokens.float().sum(1) / mask.sum(1).clamp(min=1)


class BossLosses:
    """Per-sentence losses on their way to the Assistant, handed over one step late.

    The copy to the CPU is started without blocking (into pinned memory, on a GPU) when a
    step's losses are held, and they are handed over by a later step once the copy is done,
    so the Boss's step never waits for the device. The dataset ids and the batch's run-wide
    number come from the batch plan (``sample["autoassist"]``), already on the CPU.
    """

    def __init__(self, recent: int = 64):
        self._held = deque()  # (ids, cpu losses, cuda event or None, seq), oldest first
        # the numbers of the batches held lately (fairseq's --amp retry; on a GPU it prepares
        # the sample again, so the retried batch is known by its number, not by its dict)
        self._recent = OrderedDict()
        self._size = recent

    def hold(self, meta: dict, losses: torch.Tensor) -> bool:
        """Keep a step's losses; returns True (and keeps nothing) for a batch seen lately:
        fairseq's ``--amp`` retries an update with the same samples after an overflow."""
        seq = int(meta["seq"])
        if seq in self._recent:
            return True
        self._recent[seq] = None
        while len(self._recent) > self._size:
            self._recent.popitem(last=False)
        event = None
        if losses.is_cuda:
            copy = torch.empty(losses.shape, dtype=losses.dtype, pin_memory=True)
            copy.copy_(losses, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        else:
            copy = losses.detach()
        self._held.append((meta["ids"], copy, event, seq))
        return False

    def ready(self, keep_last: bool = True, wait: bool = False):
        """Yield ``(ids, losses, seq)`` of the batches whose copy is done, in training order;
        by default the newest is kept for a later step. *wait* blocks until every copy is
        done (before a save)."""
        while len(self._held) > (1 if keep_last else 0):
            ids, copy, event, seq = self._held[0]
            if event is not None and not event.query():
                if not wait:
                    return
                event.synchronize()
            self._held.popleft()
            yield ids, copy.numpy().astype(np.float64), seq


def per_sentence_loss(token_losses: torch.Tensor, sample: dict, padding_idx: int):
    """Mean token loss of every sentence of *sample*.

    Returns:
        tuple: (dataset ids, losses), both numpy arrays of length bsz.
    """
    losses = sentence_losses(token_losses, sample, padding_idx)
    return sample["id"].cpu().numpy().astype(np.int64), losses.cpu().numpy().astype(np.float64)
