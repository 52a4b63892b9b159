"""Step 3 of the data flow, Boss side: fairseq's epoch iterator over the Assistant's batches.

``AutoAssistEpochBatchIterator`` honours fairseq's ``EpochBatchIterating`` contract
(``CountingIterator`` epochs, ``state_dict``/``load_state_dict``, ``end_of_epoch``), so
``GroupedIterator``, ``--update-freq``, progress bars and checkpoints work unchanged. Its
batches are collated as fairseq's own iterator does (``data.collate``).

Each epoch is a fixed number of batches taken from this rank's stream (``data.batch_stream``),
equal on every rank, so distributed collectives never hang. Every collective this iterator
starts runs on the training thread at a point every rank reaches in the same order: the
start of an epoch (the batch count), the end of an update after which fairseq may save (the
task's ``reduce_metrics``) and the start of validation (the ranks' states,
:mod:`.rank_states`).

What the iterator saves in a checkpoint, restores from it and carries to the next data
shard is in :mod:`.checkpointed_iterator`; what a resume restores, refuses and says, in
:mod:`.resume`; the counts each step's log carries and the run's totals, in :mod:`.counters`.
"""

import logging
from typing import Callable, Optional, Tuple

from fairseq.data.iterators import CountingIterator, EpochBatchIterating

from ..data.batch_generator import BatchGenerator
from ..data.batch_stream import BatchStream, agree_num_batches
from ..data.collate import collated_batches
from ..data.run_points import RunPoints
from ..losses import BossLosses
from ..transport.client import AssistantClient
from .checkpointed_iterator import CheckpointedIterator
from .counters import Counters
from .rank_states import RankStates
from .resume import warn_plan_accepts_all

logger = logging.getLogger(__name__)


class AutoAssistEpochBatchIterator(CheckpointedIterator, EpochBatchIterating):
    """A multi-epoch iterator whose batches come from this worker's Assistant.

    Args:
        dataset (~fairseq.data.FairseqDataset): the training dataset.
        collate_fn (callable): merges a list of samples into a mini-batch.
        generator (BatchGenerator): this shard's batch generator; the Assistant process
            runs a copy, this one serves batch counts, the uniform fallback and
            ``--assistant-sync``.
        start_source (callable): starts the source of windows (an
            :class:`~..transport.process.AssistantProcess` or a
            :class:`~..transport.local_source.LocalSource`).
        epoch (int, optional): the epoch to start from (default: 1).
        fallback (str, optional): on an Assistant failure, ``"error"`` stops the run (every
            rank at the same update), ``"uniform"`` continues on uniform batches
            (default: "error").
        num_shards, shard_id (int, optional): distributed world size and rank.
        all_gather (callable, optional): ``all_gather(obj) -> list`` over the ranks.
        reweight (bool, optional): give every batch a ``sample["autoassist_weight"]``
            tensor, each pair's 1 / P(accept) (default: False).
        num_workers (int, optional): ``DataLoader`` processes collating batches (default: 0).
        buffer_size (int, optional): batches a background thread prepares ahead (default: 0).
        points (RunPoints, optional): where annealing starts and fairseq saves (default:
            no annealing, no saves within an epoch).
        handover (dict, optional): state handed over from the iterator of the previous data
            shard (``--data a:b``): the Assistant's weights and the run's totals.
        pass_log (str, optional): a file to append each finished data pass's record to
            (``--assistant-pass-log``; default: none).
        data_shard_per_epoch (bool, optional): each epoch loads its own data shard
            (``--data a:b``), so a state saved at an epoch's end holds a batch plan of
            another shard's pairs (default: False).

    ``counters`` (:class:`~.counters.Counters`): what each step's log carries, and the run's
    totals over every rank (``run_totals``: ``aa_boss_tok``, ``aa_boss_padded_tok``,
    ``aa_skip_tok``), saved once in the checkpoint and handed to the next shard's iterator.
    """

    def __init__(self, dataset, collate_fn, generator: BatchGenerator,
                 start_source: Callable, epoch=1, fallback="error",
                 num_shards=1, shard_id=0, all_gather=None, reweight=False, num_workers=0,
                 buffer_size=0, points=None, handover=None, data_shard_per_epoch=False,
                 data_id: Optional[dict] = None, pass_log: Optional[str] = None):
        self.dataset = dataset
        # {"pairs", "fingerprint"} of the training data: the batch plan and the Assistant's
        # per-pair memory name its pairs by id, so a checkpoint resumes only on that data
        self.data_id = data_id
        self.collate_fn = collate_fn
        self.generator = generator
        self.epoch = max(epoch, 1)
        self.num_shards, self.shard_id = num_shards, shard_id
        self.all_gather = all_gather or (lambda obj: [obj])
        self.num_workers, self.buffer_size = num_workers, buffer_size
        self.points = points or RunPoints()
        self._last_update = None  # (update, epoch, consumed) at the first micro-batch
        self.shuffle = True  # fairseq's state key; shuffle=False is refused
        self.stream = BatchStream(generator, reweight=reweight, pass_log=pass_log)
        self.client = AssistantClient(start_source, generator, self.stream, fallback,
                                      num_shards)
        self.losses = BossLosses()  # the trained batches' losses on their way
        self._cur_epoch_itr = None
        self._num_batches = None
        self._resume: Optional[dict] = None  # checkpoint state, applied at next epoch start
        self._saved_accept_all: Optional[bool] = None  # the resumed plan's windows took all
        self._restored_assistant = False
        self._handover = handover
        self.data_shard_per_epoch = data_shard_per_epoch
        self.counters = Counters(handover["run_totals"] if handover else None)
        self.rank_states = RankStates(num_shards, shard_id, self.all_gather)
        self._batches_before = 0  # batches trained before the current epoch iterator's start

    # -- EpochBatchIterating ------------------------------------------------------------
    def __len__(self) -> int:
        return self._num_batches if self._cur_epoch_itr is not None \
            else self.generator.full_batch_count()

    @property
    def next_epoch_idx(self):
        if self._cur_epoch_itr is not None and self.end_of_epoch():
            return self.epoch + 1
        return self.epoch

    def next_epoch_itr(self, shuffle=True, fix_batches_to_gpus=False, set_dataset_epoch=True):
        """Agree on this epoch's batch count with every rank and return its iterator.

        ``fix_batches_to_gpus`` always holds: each rank draws from its own shard, fixed for
        the run. ``shuffle=False`` (fairseq's ``--curriculum``: epochs in length order) cannot
        be followed, and :func:`~.config.check_config` refuses the flag before any data.
        """
        assert shuffle, "--curriculum is refused by tasks.config.check_config"
        self._batches_before = self.batches_done
        self.epoch = self.next_epoch_idx
        self._cur_epoch_itr = None
        if set_dataset_epoch and hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(self.epoch)
        resume, self._resume = self._resume, None
        offset = self._start(resume)
        anneal_epoch = self.points.anneal_epoch
        if anneal_epoch is not None and self.epoch >= anneal_epoch:
            # before the count: an annealed epoch is a whole pass, not the skipping count
            self.client.start_annealing()
        if resume is not None and self._saved_accept_all \
                and not self.client.next_window_accepts_all:
            warn_plan_accepts_all(len(self.stream.pending), self._restored_assistant)
        if resume is not None and resume.get("epoch") == self.epoch and offset > 0:
            num_batches = resume.get("num_batches")
            if num_batches is None:  # saved without a batch count (plain translation)
                num_batches = max(self._agree_num_batches(), offset)
            num_batches = int(num_batches)
            logger.info(f"resuming epoch {self.epoch} at batch {offset}/{num_batches}")
        else:
            num_batches = self._agree_num_batches()
        self._num_batches = num_batches
        self.stream.begin_epoch(offset)
        itr = collated_batches(self, num_batches - offset, self.buffer_size)
        self._cur_epoch_itr = CountingIterator(itr, start=offset, total=num_batches)
        return self._cur_epoch_itr

    def end_of_epoch(self) -> bool:
        return not self._cur_epoch_itr.has_next()

    @property
    def iterations_in_epoch(self) -> int:
        return self._cur_epoch_itr.n if self._cur_epoch_itr is not None else 0

    @property
    def batches_done(self) -> int:
        """Batches this rank has trained on (or is training on), over the whole run."""
        return self._batches_before + self.iterations_in_epoch

    @property
    def first_batch(self):
        return "DUMMY"  # the trainer then takes the first real batch as its dummy batch

    # -- collectives ----------------------------------------------------------------------
    def _agree_num_batches(self) -> int:
        """Batches in this epoch: the same on every rank, computed from every rank's view."""
        client = self.client
        rate = 1.0 if client.accepts_every_pair else self.stream.rate.value
        mine = {"full": self.generator.pass_batch_count(self._data_pass()), "rate": rate,
                "batches": self.batches_done, "failure": client.failure}
        views = self.all_gather(mine)
        if any(v["failure"] for v in views):  # every rank stops together
            self.client.stop_on_failure([v["failure"] for v in views])
        batches = [v["batches"] for v in views]
        if len(set(batches)) > 1:  # cannot happen by construction; never hang on it
            raise RuntimeError(f"workers trained on different numbers of batches {batches}: "
                               "their collectives would hang; please report this, and "
                               "relaunch with --reset-dataloader")
        return agree_num_batches(views)

    def _data_pass(self) -> int:
        """The data pass the stream is in (an epoch may span two; a fresh run: 1)."""
        state = self.stream.gen_state
        return int(state["data_pass"]) if state is not None and state["data_pass"] >= 1 else self.epoch

    def stop_on_failure(self) -> None:
        """Raise on this rank, naming every failed rank's Assistant and its cause. Every rank
        calls this at the same update (the failure flag is summed over the ranks with the
        update's logs), so the causes are exchanged here, in a collective all ranks enter."""
        failures = self.all_gather(self.client.failure) if self.num_shards > 1 else None
        self.client.stop_on_failure(failures)

    def end_update(self, summed: dict) -> None:
        """Called on every rank once an update's logs are reduced (the task's
        ``reduce_metrics``), after its step, with its counts summed over the ranks (added to
        the run's totals): where fairseq may save next, every rank's state
        is gathered now, holding the losses of this last update. fairseq's validation
        gathers too (``begin_valid_epoch``), but a save without it (``--disable-validation``,
        an end-of-epoch save when ``--validate-interval`` is over 1) has only this. After an
        update fairseq skips (an ``--fp16`` overflow) no reduce follows: a save without
        validation then warns that the other ranks' states are older."""
        self.counters.update_reduced(summed)
        if self.rank_states.due:
            self.sync_checkpoint_state()

    # -- Boss -> Assistant ----------------------------------------------------------------
    def begin_update(self, update_num: int) -> None:
        """Called by every micro-batch of an update, before its step; acts at the first:
        hands over the previous update's losses (its step has ended), and marks an update
        after which fairseq may save, whose end gathers every rank's state (:meth:`end_update`).

        A micro-batch of the same update number starts another update where the batches
        consumed since the last first micro-batch are a whole update's: after fairseq skips
        an update (an ``--fp16`` overflow) the next one has the skipped one's number. An
        ``--amp`` retry consumes nothing, so it is the same update."""
        last = self._last_update
        if last is not None and last[:2] == (update_num, self.epoch) \
                and self.iterations_in_epoch - last[2] < self.points.update_freq:
            return
        self._last_update = (update_num, self.epoch, self.iterations_in_epoch)
        self.counters.update_begins()
        self.flush_losses()
        if self.points.saves_after(update_num) or self.end_of_epoch():
            self.rank_states.due = True

    def hold_losses(self, meta: dict, losses) -> bool:
        """A trained batch's per-sentence losses (a tensor, maybe on the device): handed to
        the Assistant one step later, so that the copy never waits for the device. Returns
        True (and keeps nothing) for a batch fairseq's ``--amp`` trains again."""
        retry = self.losses.hold(meta, losses)
        self._report(self.losses.ready())
        return retry

    def flush_losses(self) -> None:
        """Hand over every held loss (waits for the device copies): at an update's start,
        and before a state is saved."""
        self._report(self.losses.ready(keep_last=False, wait=True))

    def _report(self, ready) -> None:
        for ids, losses, seq in ready:
            self.client.send_losses(ids, losses, seq)

    @property
    def run_totals(self) -> dict:
        return self.counters.run_totals

    def log_step(self, seq: int, tokens: float, padded_tokens: float, retry: bool) -> dict:
        """The statistics (:mod:`..metrics`) of a training step on batch number *seq*, of
        *tokens* tokens (*padded_tokens* with padding), an ``--amp`` *retry* or not
        (:meth:`hold_losses`; :meth:`~.counters.Counters.step`)."""
        return self.counters.step(seq, tokens, padded_tokens, self._read_counters, retry)

    def _read_counters(self) -> Tuple[dict, dict]:
        """The cumulative counts of the stream, the client and the Assistant, and the
        Assistant's current statistics with whether it failed."""
        # what the batches trained so far hold, not those prefetched: a checkpoint saves
        # the same point, so a resumed run logs every window once
        cumulative = dict(self.stream.credited_at(self.iterations_in_epoch),
                          wait_seconds=self.client.wait_seconds,
                          dropped_losses=self.client.dropped_losses)
        current = {"failed": 1.0 if self.client.failure else 0.0}
        if self.client.assistant_learns:
            current.update(self.stream.assistant_stats)
            if "nonfinite" in current:  # cumulative in the Assistant
                cumulative["nonfinite"] = current.pop("nonfinite")
        return cumulative, current

    def shutdown(self) -> None:
        self.client.shutdown()
