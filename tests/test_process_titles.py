"""The plugin's child processes can be told apart in ps and top."""

import os
import time

import numpy as np
import torch

from autoassist_fairseq.transport.process import AssistantProcess
from autoassist_fairseq.data.batch_generator import BatchGenerator
from autoassist_fairseq.tasks.batch_iterator import AutoAssistEpochBatchIterator
from utils import children

N = 400


class AcceptAll:
    stats = {"threshold": 0.0, "lambda": 0.0, "accuracy": 0.0, "loss_batches": 0}

    def begin_pass(self, data_pass):
        pass

    def accept_probability(self, ids):
        return np.ones(len(ids))

    def learn(self, ids, losses):
        pass

    def state_dict(self):
        return {}


def _generator():
    sizes = np.arange(N) % 20 + 3
    return BatchGenerator(np.arange(N), sizes, sizes, max_tokens=200, window_size=100)


def _collate(items):
    ids = torch.tensor(items)
    return {"id": ids, "ntokens": len(items), "net_input": {"src_lengths": ids % 5}}


def _read(pid, name):
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read().replace(b"\0", b" ").decode().strip()


def _titled(pid, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _read(pid, "comm").startswith("aa-"):
            break
        time.sleep(0.02)
    return _read(pid, "cmdline"), _read(pid, "comm")


def test_the_assistant_and_the_loader_workers_carry_their_rank():
    procs = []
    # this process's children from before (the warm forkserver of tests/warm.py, ...): never
    # retitled, each would hold _titled to its timeout
    others = set(children(os.getpid()))

    def start():
        procs.append(AssistantProcess(AcceptAll, _generator, rank=3))
        return procs[-1]

    itr = AutoAssistEpochBatchIterator(list(range(N)), _collate, _generator(), start,
                                       shard_id=0, num_workers=1)
    try:
        epoch = itr.next_epoch_itr()
        next(epoch)  # the loader worker runs now
        assistant = procs[0].proc.pid
        assert _titled(assistant) == ("autoassist-assistant (rank 3)", "aa-assistant-3")
        loaders = [pid for pid in children(os.getpid()) if pid != assistant and pid not in others]
        assert loaders
        titles = [_titled(pid) for pid in loaders]
        assert ("autoassist-loader (rank 0, worker 0)", "aa-loader-0-0") in titles, titles
    finally:
        itr.shutdown()
        for p in procs:
            p.shutdown()
