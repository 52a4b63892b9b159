"""A run that ends while the buffer's daemon thread collates batches with torch: run by
tests/test_collate_exit.py, which checks that the interpreter exits cleanly (no SIGABRT)."""

import sys
import types

import numpy as np
import torch

from autoassist_fairseq.data.collate import collated_batches


class Batch:
    def __init__(self, ids, seq):
        self.ids, self.seq, self.weights = np.array(ids), seq, None


class Stream:
    def __init__(self):
        self.issued = []

    def next_batch(self, next_window):
        batch = Batch([len(self.issued) % 8], len(self.issued))
        self.issued.append(batch)
        return batch


def collate(samples):
    x = torch.randn(300, 300)
    for _ in range(20):
        x = torch.tanh(x @ x)  # torch work in the buffer's thread
    return {"id": torch.tensor(samples), "ntokens": len(samples),
            "net_input": {"src_lengths": torch.ones(len(samples), dtype=torch.long)}}


itr = types.SimpleNamespace(stream=Stream(), client=types.SimpleNamespace(next_window=None),
                            dataset=list(range(8)), collate_fn=collate, num_workers=0, shard_id=0)
batches = iter(collated_batches(itr, 10 ** 6, buffer_size=1000))
next(batches)
next(batches)
print("trained", flush=True)  # the run ends while the buffer's thread collates
