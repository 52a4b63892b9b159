"""Step 3 of the data flow, Boss side: fairseq's epoch iterator over the Assistant's batches.

``AutoAssistEpochBatchIterator`` honours fairseq's ``EpochBatchIterating`` contract
(``CountingIterator`` epochs, ``state_dict``/``load_state_dict``, ``end_of_epoch``), so
``GroupedIterator``, ``--update-freq``, progress bars and checkpoints work unchanged.

Each epoch has a batch count fixed before it starts and equal on every rank, so
distributed collectives never hang: ``N = max over ranks of ceil(full_r * rate_r)``,
where ``full_r`` is the rank's plain fairseq batch count and ``rate_r`` the share of
tokens its Assistant expected to accept in its latest window.
"""

import logging
import math
import time
from typing import Callable, List, Optional

import numpy as np
import torch
from fairseq.data.iterators import CountingIterator, EpochBatchIterating

from ..assistant.process import AssistantDied, AssistantProcess
from .batch_generator import BatchGenerator, concat_ids
from .messages import BeginEpoch, LoadState, WindowPlan

logger = logging.getLogger(__name__)

_COUNTERS = ("considered_pairs", "considered_tokens", "accepted_pairs", "accepted_tokens",
             "topup_pairs")


class AutoAssistEpochBatchIterator(EpochBatchIterating):
    """A multi-epoch iterator whose batches come from this worker's Assistant.

    Args:
        dataset (~fairseq.data.FairseqDataset): the training dataset.
        collate_fn (callable): merges a list of samples into a mini-batch.
        generator (BatchGenerator): this shard's batch generator; the Assistant process
            runs a copy, this one serves batch counts and the uniform fallback.
        start_process (callable): starts the :class:`AssistantProcess`.
        epoch (int, optional): the epoch to start from (default: 1).
        fallback (str, optional): on an Assistant failure, ``"error"`` stops the run,
            ``"uniform"`` continues on uniform batches (default: "error").
        num_shards, shard_id (int, optional): distributed world size and rank.
        all_gather (callable, optional): ``all_gather(obj) -> list`` over the ranks.
        reweight (bool, optional): give every batch a ``sample["autoassist_weight"]``
            tensor, each pair's 1 / P(accept) (default: False).
    """

    def __init__(self, dataset, collate_fn, generator: BatchGenerator,
                 start_process: Callable[[], AssistantProcess], epoch=1, fallback="error",
                 num_shards=1, shard_id=0, all_gather=None, reweight=False):
        self.dataset = dataset
        self.collate_fn = collate_fn
        self.generator = generator
        self.start_process = start_process
        self.epoch = max(epoch, 1)
        self.fallback = fallback
        self.num_shards, self.shard_id = num_shards, shard_id
        self.all_gather = all_gather or (lambda obj: [obj])
        self.shuffle = True
        self.process: Optional[AssistantProcess] = None
        self.uniform = False  # True once we fell back to uniform batches
        self._cur_epoch_itr = None
        self._resume: Optional[dict] = None  # checkpoint state, applied at next epoch start
        self._plan: Optional[dict] = None  # Boss-side mirror of the generator's epoch state
        self.rate = 1.0
        self.rank_states: List[Optional[dict]] = [None] * num_shards
        self.batches_done = 0  # batches this rank has trained on, over the whole run
        self.rank_batches: List[int] = [0] * num_shards  # every rank's, at the last epoch start
        self.assistant_stats: dict = {}
        self.totals = dict.fromkeys(_COUNTERS + ("wait_seconds",), 0.0)
        self._logged = dict(self.totals)
        self._dropped = 0
        # importance weight of every pair as of the window that last accepted it
        self.pair_weight = np.ones(len(dataset), np.float32) if reweight else None

    # -- EpochBatchIterating ------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._cur_epoch_itr) if self._cur_epoch_itr is not None \
            else self.generator.full_batch_count()

    @property
    def next_epoch_idx(self):
        if self._cur_epoch_itr is not None and self.end_of_epoch():
            return self.epoch + 1
        return self.epoch

    def next_epoch_itr(self, shuffle=True, fix_batches_to_gpus=False, set_dataset_epoch=True):
        """Agree on this epoch's batch count, tell the Assistant, return the iterator."""
        self.epoch = self.next_epoch_idx
        if set_dataset_epoch and hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(self.epoch)
        resume, self._resume = self._resume, None
        self._ensure_process(resume)
        num_batches = self._agree_num_batches()
        offset = 0
        plan = {"epoch": self.epoch, "num_batches": num_batches, "next_window": 0,
                "planned": 0, "rejected": [], "deferred": [], "pending": []}
        if resume is not None and resume.get("epoch") == self.epoch and resume["offset"] > 0:
            offset = resume["offset"]
            num_batches = resume["num_batches"] or num_batches
            saved = resume.get("plan")
            # only the rank that writes checkpoints (0) has its plan saved
            if saved is not None and resume["world_size"] == self.num_shards \
                    and self.shard_id == 0:
                plan = {"epoch": self.epoch, "num_batches": num_batches,
                        "next_window": saved["next_window"], "planned": saved["planned"],
                        "rejected": [np.asarray(saved["rejected"], dtype=np.int64)],
                        "deferred": [np.asarray(saved["deferred"], dtype=np.int64)],
                        "pending": [np.asarray(b, dtype=np.int64) for b in saved["pending"]]}
                if self.pair_weight is not None and saved.get("weights") is not None:
                    ids = np.concatenate(plan["pending"] + plan["deferred"])
                    self.pair_weight[ids] = np.asarray(saved["weights"], dtype=np.float32)
                logger.info(f"resuming epoch {self.epoch} at batch {offset}/{num_batches}, "
                            f"window {saved['next_window']}, with the saved batch plan")
            else:
                # the plan of this rank was not saved: a fresh pass fills the remaining count
                plan.update(num_batches=num_batches - offset)
                logger.info(f"resuming epoch {self.epoch} at batch {offset}/{num_batches} "
                            "with a fresh batch plan for the remaining batches")
        self._plan = plan
        self._send_begin_epoch()
        self._cur_epoch_itr = CountingIterator(self._batches(plan, num_batches - offset),
                                               start=offset, total=num_batches)
        self.shuffle = shuffle
        return self._cur_epoch_itr

    def end_of_epoch(self) -> bool:
        return not self._cur_epoch_itr.has_next()

    @property
    def iterations_in_epoch(self) -> int:
        return self._cur_epoch_itr.n if self._cur_epoch_itr is not None else 0

    @property
    def first_batch(self):
        return "DUMMY"  # the trainer then takes the first real batch as its dummy batch

    # -- batches ------------------------------------------------------------------------
    def _batches(self, plan, count):
        yielded = 0
        while yielded < count:
            if not plan["pending"]:
                self._take_window(self._next_window(plan))
                continue
            batch = plan["pending"].pop(0)
            yielded += 1
            self.batches_done += 1
            sample = self.collate_fn([self.dataset[int(i)] for i in batch])
            if self.pair_weight is not None and sample:
                sample["autoassist_weight"] = torch.from_numpy(
                    self.pair_weight[sample["id"].numpy()])
            yield sample

    def _next_window(self, plan) -> WindowPlan:
        start = time.perf_counter()
        try:
            while True:
                if self.uniform:
                    window = self.generator.next_window(np.ones_like)
                else:
                    window = self.process.get()
                if window.epoch == plan["epoch"]:
                    return window
        except AssistantDied as err:
            if self.fallback != "uniform":
                raise AssistantDied(f"{err}\nTo keep training on uniform batches when the "
                                    "Assistant fails, rerun with --assistant-fallback uniform") \
                    from None
            logger.warning(f"{err}\n--assistant-fallback uniform: continuing this run on "
                           "uniform batches (no pair is skipped from now on)")
            self._fall_back_to_uniform()
            return self._next_window(plan)
        finally:
            self.totals["wait_seconds"] += time.perf_counter() - start

    def _take_window(self, window: WindowPlan) -> None:
        plan = self._plan
        plan["next_window"] = window.window + 1
        plan["planned"] += len(window.batches)
        plan["rejected"].append(window.rejected)
        plan["deferred"].append(window.deferred)
        plan["pending"].extend(window.batches)
        if self.pair_weight is not None:
            self.pair_weight[window.weight_ids] = window.weights
        for key in _COUNTERS:
            self.totals[key] += getattr(window, key)
        if window.window < self.generator.num_windows:
            self.rate = window.expected_token_rate
        if window.stats:
            self.assistant_stats = window.stats

    def _fall_back_to_uniform(self) -> None:
        self.uniform = True
        if self.process is not None:
            self.process.shutdown()
        state = self._generator_state()
        self.generator.load_state_dict(state)

    # -- Assistant process --------------------------------------------------------------
    def _ensure_process(self, resume) -> None:
        if self.process is not None or self.uniform:
            return
        self.process = self.start_process()
        if resume is not None and resume.get("ranks"):
            ranks = resume["ranks"]
            state = ranks[self.shard_id] if len(ranks) == self.num_shards else ranks[0]
            if len(ranks) != self.num_shards:
                logger.warning(f"checkpoint has Assistant states of {len(ranks)} workers, this run "
                               f"has {self.num_shards}: every worker starts from worker 0's")
            if state is not None:
                self.process.send(LoadState(state["assistant"]))
                self.rate = resume.get("rate", self.rate)
                s = self.process.request_state()["stats"]  # as the process now holds it
                logger.info(f"restored Assistant state: T_k={s['threshold']:.6f} "
                            f"lambda_k={s['lambda']:.6f} accuracy={s['accuracy']:.6f} "
                            f"after {s['updates']} updates")
        if resume is not None and resume.get("totals"):
            self.totals.update(resume["totals"])
            self._logged = dict(self.totals)
            self.batches_done = resume.get("batches_done", 0)

    def _agree_num_batches(self) -> int:
        """Batches in this epoch: the same on every rank, computed from every rank's view."""
        mine = {"full": self.generator.epoch_batch_count(self.epoch), "rate": self.rate,
                "batches": self.batches_done}
        if self.num_shards > 1:
            mine["state"] = self._assistant_state()
        views = self.all_gather(mine)
        self.rank_batches = [v["batches"] for v in views]
        if len(set(self.rank_batches)) > 1:  # cannot happen by construction; never hang on it
            raise RuntimeError(f"workers trained on different numbers of batches "
                               f"{self.rank_batches}: their collectives would hang; please "
                               "report this, and relaunch with --reset-dataloader")
        if self.num_shards > 1:
            self.rank_states = [v["state"] for v in views]
        return max(min(v["full"], max(1, math.ceil(v["full"] * v["rate"]))) for v in views)

    def _send_begin_epoch(self) -> None:
        state = self._generator_state()
        msg = BeginEpoch(self.epoch, self._plan["num_batches"], state)
        if self.uniform:
            self.generator.load_state_dict(state)
            return
        try:
            self.process.send(msg)
        except AssistantDied:
            if self.fallback != "uniform":
                raise
            self._fall_back_to_uniform()

    def _generator_state(self) -> dict:
        """The generator's state as of the batches the Boss has taken (the process itself
        may be windows ahead)."""
        plan = self._plan
        return {"version": BatchGenerator.VERSION, "epoch": plan["epoch"],
                "num_batches": plan["num_batches"], "next_window": plan["next_window"],
                "planned": plan["planned"], "rejected": concat_ids(plan["rejected"]),
                "deferred": concat_ids(plan["deferred"])}

    def _assistant_state(self) -> Optional[dict]:
        if self.uniform or self.process is None:
            return None
        try:
            return self.process.request_state()
        except AssistantDied:
            if self.fallback != "uniform":
                raise
            self._fall_back_to_uniform()
            return None

    # -- Boss -> Assistant ----------------------------------------------------------------
    def report_losses(self, ids: np.ndarray, losses: np.ndarray) -> None:
        """Per-sentence losses of a trained batch (never blocks)."""
        if not self.uniform and self.process is not None:
            self.process.send_losses(ids, losses)

    def pop_log_stats(self) -> dict:
        """Counters accumulated since the last call, plus the Assistant's latest state."""
        delta = {k: self.totals[k] - self._logged[k] for k in self.totals}
        self._logged = dict(self.totals)
        delta.update(self.assistant_stats)
        dropped = self.process.dropped_losses if self.process else self._dropped
        delta["dropped_losses"], self._dropped = dropped - self._dropped, dropped
        return delta

    # -- checkpoints ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """fairseq's ``EpochBatchIterator`` keys (so plain ``translation`` can resume from
        it), plus the Assistant's state under ``"autoassist"``."""
        finished = self._cur_epoch_itr is None or self.end_of_epoch()
        epoch = self.epoch + 1 if finished and self._cur_epoch_itr is not None else self.epoch
        offset = 0 if finished else self.iterations_in_epoch
        plan = None
        if not finished:
            plan = dict(self._generator_state(), pending=list(self._plan["pending"]))
            if self.pair_weight is not None:  # the weights of the pairs still to train
                plan["weights"] = self.pair_weight[np.concatenate(
                    plan["pending"] + [plan["deferred"]])]
        ranks = list(self.rank_states)
        own = self._assistant_state()
        if own is not None:
            ranks[self.shard_id] = own
        return {
            "version": 2, "epoch": epoch, "iterations_in_epoch": offset, "shuffle": self.shuffle,
            "autoassist": to_checkpoint({
                "version": 1, "world_size": self.num_shards, "epoch": epoch, "offset": offset,
                "num_batches": len(self._cur_epoch_itr) if not finished else None,
                "plan": plan, "ranks": ranks, "rate": self.rate, "totals": dict(self.totals),
                "batches_done": self.batches_done, "rank_batches": list(self.rank_batches),
            }),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self.epoch = state_dict["epoch"]
        saved = from_checkpoint(state_dict.get("autoassist"))
        offset = state_dict.get("iterations_in_epoch", 0)
        if saved is None:
            logger.info("the checkpoint has no Assistant state (plain translation run?): "
                        "starting a new Assistant")
            saved = {"epoch": self.epoch, "offset": offset, "num_batches": None,
                     "world_size": self.num_shards, "plan": None, "ranks": None}
        self._resume = saved
        self._cur_epoch_itr = None

    def shutdown(self) -> None:
        if self.process is not None:
            self.process.shutdown()


def to_checkpoint(obj):
    """numpy arrays -> torch tensors, numpy scalars -> Python numbers: fairseq checkpoints
    are read with torch's weights-only unpickler (torch >= 2.6), which refuses numpy."""
    if isinstance(obj, dict):
        return {k: to_checkpoint(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_checkpoint(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def from_checkpoint(obj):
    """The inverse of :func:`to_checkpoint`."""
    if isinstance(obj, dict):
        return {k: from_checkpoint(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_checkpoint(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    return obj
