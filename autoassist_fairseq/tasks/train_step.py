"""The Boss's training step on a batch of the Assistant's iterator: fairseq's step with the
token losses captured (:mod:`..losses`), the batch's losses handed to the Assistant, the
step's counters logged, and the trace of the batches trained (``--assistant-trace-dir``)."""

import os

import numpy as np

from ..losses import capture_token_losses, sentence_losses


def train_step_with_losses(step, itr, sample: dict, criterion, update_num: int,
                           padding_idx: int, trace: "BatchTrace" = None):
    """One training step of the Boss on a batch of the Assistant's iterator *itr*.

    Runs ``step()`` (fairseq's ``train_step``) with the token losses captured, hands the
    batch's per-sentence losses to the Assistant (one step later), and returns the step's
    result and this step's statistics (:mod:`..metrics`, from the iterator's counters): for
    a batch fairseq's ``--amp`` retries, those of its first step, which fairseq dropped.

    Returns:
        tuple: ``(loss, sample_size, logging_output), stats``.
    """
    meta = sample["autoassist"]
    itr.client.check()
    itr.begin_update(update_num)
    with capture_token_losses(criterion, sample.get("autoassist_weight")) as captured:
        result = step()
    retry = itr.hold_losses(meta, sentence_losses(captured.token_losses, sample, padding_idx))
    if trace is not None and not retry:  # fairseq's --amp trains the same batch again
        trace.write(itr.epoch, update_num, meta["ids"])
    src_tokens, target = sample["net_input"]["src_tokens"], sample["target"]
    # with padding: what the Boss's matrix products compute (batch size x longest sides)
    padded = target.size(0) * (src_tokens.size(1) + target.size(1))
    return result, itr.log_step(int(meta["seq"]), meta["tokens"], padded, retry)


class BatchTrace:
    """The dataset ids of every batch the Boss trains on, a line per batch (epoch, update,
    ids) in ``DIR/trained.rank<R>.tsv`` (``--assistant-trace-dir``); opened at the first
    batch, line-buffered so that a crash loses no trained batch."""

    def __init__(self, directory: str, rank: int):
        self.path = os.path.join(directory, f"trained.rank{rank}.tsv")
        self._file = None

    def write(self, epoch: int, update_num: int, ids: np.ndarray) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._file = open(self.path, "a", buffering=1)
        self._file.write(f"{epoch}\t{update_num}\t{','.join(map(str, ids.tolist()))}\n")
