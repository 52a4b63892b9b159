"""Step 3 of the data flow, Boss side: the collation of an epoch's batches, as fairseq's own
``EpochBatchIterator`` does it: a ``DataLoader`` with ``--num-workers`` processes over the
stream's batches (each sample tagged with what the training step needs on the CPU), behind
a ``BufferedIterator`` of ``--data-buffer-size``.
"""

import functools

import numpy as np
import torch
from fairseq.data.iterators import BufferedIterator

from ..proctitle import set_title
from .batch_generator import weights_of


def collated_batches(itr, count: int, buffer_size: int):
    """The next *count* batches of *itr*'s stream, collated (prepared *buffer_size* ahead
    by a background thread when > 0)."""
    batches = _Collated(itr, count)
    return BufferedIterator(buffer_size, batches) if buffer_size > 0 else batches


class _Collated:
    """``count`` batches of the stream, collated by a ``DataLoader`` (with ``--num-workers``
    processes), each sample tagged with what the Boss's step needs on the CPU. *itr* is the
    ``AutoAssistEpochBatchIterator`` whose stream, client, dataset and collater they use."""

    def __init__(self, itr, count: int):
        self.itr, self.count = itr, count

    def __len__(self):
        return self.count

    def _batches(self):
        itr = self.itr
        for _ in range(self.count):
            yield itr.stream.next_batch(itr.client.next_window).ids.tolist()

    def __iter__(self):
        itr = self.itr
        loader = torch.utils.data.DataLoader(
            itr.dataset, batch_sampler=self._batches(), collate_fn=itr.collate_fn,
            num_workers=itr.num_workers,
            worker_init_fn=functools.partial(_title_loader, itr.shard_id))
        for k, sample in enumerate(loader):
            yield _tag(sample, itr.stream.issued[k])


def _title_loader(rank: int, worker: int) -> None:
    set_title(f"autoassist-loader (rank {rank}, worker {worker})", f"aa-loader-{rank}-{worker}")


def _tag(sample: dict, batch) -> dict:
    """Add ``sample["autoassist"]``: the dataset ids in the sample's order, its real token
    count (read here on the CPU so the training step needs no device sync) and the batch's
    run-wide number."""
    sample_ids = sample["id"].numpy()
    tokens = int(sample["net_input"]["src_lengths"].sum()) + int(sample["ntokens"])
    sample["autoassist"] = {"ids": sample_ids.astype(np.int64), "tokens": tokens,
                            "seq": batch.seq}
    if batch.weights is not None:
        sample["autoassist_weight"] = torch.from_numpy(
            weights_of(sample_ids, batch.ids, batch.weights))
    return sample
