"""Two CPU workers with gloo: each has its own shard and Assistant, and the same updates."""

import re
import sys

import torch

from utils import BIN, REPO, run, train_args


def test_two_workers_finish_with_equal_updates(train_data, tmp_path):
    fairseq_train, *args = train_args(train_data, tmp_path, extra=["--max-epoch", "3"])
    cmd = [sys.executable, REPO / "scripts" / "launch_cpu_workers.py", "2", "--",
           BIN / fairseq_train, *args]
    proc = run(cmd, timeout=600)
    out = proc.stdout
    assert "done training" in out
    ends = [int(u) for u in re.findall(r"\| train \| epoch 00\d .*num_updates (\d+)", out)]
    assert len(ends) == 3, out[-3000:]
    # every rank's batch count, gathered by rank 0 at the start of epoch 3
    state = torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)
    ranks = state["extra_state"]["train_iterator"]["autoassist"]["rank_batches"]
    assert ranks == [ends[1], ends[1]]
    assert len(state["extra_state"]["train_iterator"]["autoassist"]["ranks"]) == 2
