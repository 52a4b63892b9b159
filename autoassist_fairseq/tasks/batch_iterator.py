"""Step 3 of the data flow, Boss side: fairseq's epoch iterator over the Assistant's batches.

``AutoAssistEpochBatchIterator`` honours fairseq's ``EpochBatchIterating`` contract
(``CountingIterator`` epochs, ``state_dict``/``load_state_dict``, ``end_of_epoch``), so
``GroupedIterator``, ``--update-freq``, progress bars and checkpoints work unchanged. Its
batches are collated as fairseq's own iterator does (``data.collate``).

Each epoch is a fixed number of batches taken from this rank's stream (``data.batch_stream``),
equal on every rank, so distributed collectives never hang. Every collective here runs on
the training thread at a point every rank reaches in the same order: the start of an
epoch, the end of an update after which fairseq may save (the task's ``reduce_metrics``),
and the start of validation.

Over 300 lines for a reason: fairseq's trainer holds one ``EpochBatchIterating`` object, so
its epochs, its checkpoint state and the losses it hands back to the Assistant live on one
class, whose collectives keep the same order on every rank only while they stay together.
"""

import logging
from typing import Callable, List, Optional

from fairseq.data.iterators import CountingIterator, EpochBatchIterating

from ..data.arrays import arrays_to_tensors, tensors_to_arrays
from ..data.batch_generator import BatchGenerator
from ..data.batch_stream import BatchStream, StreamState, agree_num_batches
from ..data.collate import collated_batches
from ..data.run_points import RunPoints
from ..data.schema import VERSION, describe_seed_change, describe_window_change
from ..data.schema import load as load_schema
from ..losses import BossLosses
from ..metrics import COUNTED, RUN_TOTALS, SUMMED
from ..transport.client import AssistantClient

logger = logging.getLogger(__name__)

# the step statistics that count (tokens, pairs, seconds, losses dropped): those of an update
# whose logs fairseq never reduced are added to the next update's
CARRIED = SUMMED + tuple(COUNTED)


class AutoAssistEpochBatchIterator(EpochBatchIterating):
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
        carry (dict, optional): state carried over from the iterator of the previous data
            shard (``--data a:b``): the Assistant's weights and the run's totals.
        data_shard_per_epoch (bool, optional): each epoch loads its own data shard
            (``--data a:b``), so a state saved at an epoch's end holds a batch plan of
            another shard's pairs (default: False).

    ``run_totals``: the run's counts over every rank (``aa_boss_tok``, ``aa_boss_padded_tok``,
    ``aa_skip_tok``), summed from every step's logs by :func:`~..metrics.reduce` on every
    rank, saved once in the checkpoint; one dict for the whole run (restored in place, handed
    to the next shard's iterator): fairseq's derived meters keep the first dict they read.
    """

    def __init__(self, dataset, collate_fn, generator: BatchGenerator,
                 start_source: Callable, epoch=1, fallback="error",
                 num_shards=1, shard_id=0, all_gather=None, reweight=False, num_workers=0,
                 buffer_size=0, points=None, carry=None, data_shard_per_epoch=False,
                 data_id: Optional[dict] = None):
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
        self.stream = BatchStream(generator, reweight=reweight)
        self.client = AssistantClient(start_source, generator, self.stream, fallback,
                                      num_shards)
        self.losses = BossLosses()  # the trained batches' losses on their way
        self._cur_epoch_itr = None
        self._num_batches = None
        self._resume: Optional[dict] = None  # checkpoint state, applied at next epoch start
        self._saved_accept_all: Optional[bool] = None  # the resumed plan's windows took all
        self._restored_assistant = False
        self._carry = carry
        self.data_shard_per_epoch = data_shard_per_epoch
        self.run_totals = carry["run_totals"] if carry else dict.fromkeys(RUN_TOTALS, 0.0)
        self.rank_states: List[Optional[dict]] = [None] * num_shards
        self._synced_at = None  # (epoch, consumed) of the rank states gathered last
        self._gather_due = False  # the update under way may be followed by a save
        # the stats of the update under way's steps, until its logs are reduced; those of an
        # update never reduced go with the next update's first step (_carried)
        self._unreduced: List[dict] = []
        self._carried: dict = {}
        self._batches_before = 0  # batches trained before the current epoch iterator's start
        self._logged = {}
        self._logged_nonfinite = 0
        self._dropped = 0

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
        the run. ``shuffle=False`` (fairseq's ``--curriculum``: epochs in length order) is
        refused: the Assistant's batches come from windows of random pairs.
        """
        if not shuffle:
            raise ValueError("--curriculum asks for the first epochs in fairseq's length "
                             "order, which AutoAssist batches (cut from windows of random "
                             "pairs) cannot follow: drop --curriculum with --task "
                             "autoassist_translation")
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
        if resume is not None:
            self._log_saved_acceptance()
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

    # -- the stream -----------------------------------------------------------------------
    def _start(self, resume: Optional[dict]) -> int:
        """Start the Assistant (once) and position the stream; returns the epoch offset."""
        own, offset = None, 0
        self._saved_accept_all = None
        if resume is not None:
            offset = int(resume.get("offset") or 0) if resume.get("epoch") == self.epoch else 0
            own = self._own_entry(resume)
            if own is not None and self.data_shard_per_epoch and offset == 0:
                # saved at the end of the previous epoch, whose data shard this is not: as
                # at a change of shard, only what does not name pairs goes on
                own = {"assistant": shard_independent(own.get("assistant"))}
                logger.info(f"epoch {self.epoch} starts on its own data shard: the saved "
                            "Assistant's weights go on, its batch plan and per-pair memory "
                            "stay with the previous shard")
            if resume.get("batches_done"):
                self._batches_before = int(resume["batches_done"]) - offset
        if self._carry is not None:
            self._batches_before = self._carry["batches_done"]
        if own is not None and own.get("stream") is not None:
            self.stream.restore(StreamState(**own["stream"]))
            self._saved_accept_all = bool(self.stream.gen_state.get("accept_all"))
            logger.info(f"resuming the batch stream at pass {self.stream.gen_state['data_pass']}, "
                        f"window {self.stream.gen_state['next_window']}, with "
                        f"{len(self.stream.pending)} batches planned")
            changed = describe_window_change(self.stream.gen_state, self.generator.window_size)
            if changed:
                logger.info(changed)
            changed = describe_seed_change(self.stream.gen_state, self.generator.seed)
            if changed:
                logger.warning(changed)
            self._warn_planned_over_limits()
        elif resume is not None and offset > 0 and resume.get("ranks") is not None:
            logger.warning(f"this rank's batch plan is not in the checkpoint: the rest of "
                           f"epoch {self.epoch} comes from a fresh data pass")
        if not self.client.started:
            assistant = (own or {}).get("assistant") or (self._carry or {}).get("assistant")
            # the restored count was logged by the saved run
            self._logged_nonfinite = int((assistant or {}).get("nonfinite", 0))
            self._restored_assistant = assistant is not None
            self.client.start(self.epoch, assistant, "the checkpoint" if own is not None
                              else "the previous data shard",
                              accept_all_from=self._anneal_seq(self._batches_before + offset))
        self._carry = None
        return offset

    def _warn_planned_over_limits(self) -> None:
        """A resume trains the batches already planned as they are (that keeps a mid-epoch
        resume exact); a lower --max-tokens or --batch-size than they were cut under applies
        from the first window after them: say so, and how to apply it at once."""
        gen, planned = self.generator, [b.ids for b in self.stream.pending]
        over = [ids for ids in planned if gen.exceeds_bounds(ids)]
        if not over:
            return
        bounds = gen.bound_flags()
        logger.warning(
            f"{len(over)} of the {len(planned)} batches already planned exceed this run's "
            f"{bounds} (up to {max(map(gen.batch_cost, over))} tokens a batch, padding "
            "included): they were cut under the saved run's values, and a resume trains the "
            f"planned batches as they are, exactly as saved; {bounds} applies from the first "
            f"window after them, {len(planned)} batches from here. To apply it at once (e.g. "
            "after running out of memory), resume with --reset-dataloader, which starts a new "
            "Assistant and batch plan")

    def _log_saved_acceptance(self) -> None:
        """A resumed batch plan whose windows accepted every pair (the saved run fell back
        to uniform batches, or annealed) while this run's next windows do not: say so, and
        from where this run's Assistant decides."""
        client = self.client
        if not self._saved_accept_all or client.next_window_accepts_all:
            return
        start = ("from the Assistant state restored above" if self._restored_assistant
                 else "from a new Assistant (the checkpoint holds no Assistant state)")
        logger.warning(
            "the checkpoint's batch plan accepts every pair: the saved run went on with "
            "uniform batches after its Assistant failed (--assistant-fallback uniform), or "
            f"it was annealing. The {len(self.stream.pending)} batches already planned are "
            "trained as planned; the windows after them are scored by this run's Assistant "
            f"again, {start}, and skip pairs (to go on training on every pair, resume with "
            "--task translation)")

    def _anneal_seq(self, trained: int) -> Optional[int]:
        """The stream's number of the batch at which annealing by updates starts, when
        *trained* batches of the run are done and the stream's next batch is the next one
        to train (the numbers of the stream and of the run's batches may differ by a
        constant: a fresh batch plan after a resume, or the next ``--data`` shard)."""
        start = self.points.anneal_batch
        if start is None:
            return None
        seq = self.stream.next_seq + max(0, start - trained)
        logger.info(f"AutoAssist annealing: every pair is accepted from batch {start} of the "
                    f"run (update {self.points.anneal_update}) to the end")
        return seq

    def _own_entry(self, resume: dict) -> Optional[dict]:
        ranks = resume.get("ranks") or []
        if len(ranks) == self.num_shards:
            return ranks[self.shard_id]
        if ranks:
            logger.warning(f"the checkpoint holds the Assistants of {len(ranks)} workers, this run "
                           f"has {self.num_shards}: every worker starts from worker 0's "
                           "Assistant and a fresh batch plan")
            return {"assistant": (ranks[0] or {}).get("assistant")}
        return None

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
        self.client.stop_on_failure()

    def sync_checkpoint_state(self) -> None:
        """Gather every rank's stream and Assistant state, so that the checkpoint that rank
        0 writes next resumes every rank exactly. Every rank calls this at the same point.
        A second call at the same consumed count (validation after the step that gathered)
        gathers nothing new: no step ran between, on any rank."""
        self._gather_due = False
        if self.num_shards == 1 or self._cur_epoch_itr is None \
                or self._synced_at == (self.epoch, self.iterations_in_epoch):
            return
        self.rank_states = self.all_gather(self._rank_state())
        self._synced_at = (self.epoch, self.iterations_in_epoch)

    def end_update(self) -> None:
        """Called on every rank once an update's logs are reduced (the task's
        ``reduce_metrics``), after its step: where fairseq may save next, every rank's state
        is gathered now, holding the losses of this last update. fairseq's validation
        gathers too (``begin_valid_epoch``), but a save without it (``--disable-validation``,
        an end-of-epoch save when ``--validate-interval`` is over 1) has only this. After an
        update fairseq skips (an ``--fp16`` overflow) no reduce follows: a save without
        validation then warns that the other ranks' states are older."""
        self._unreduced = []
        if self._gather_due:
            self.sync_checkpoint_state()

    def log_step(self, stats: dict) -> dict:
        """A training step's *stats* (:mod:`..metrics`) as its logging output carries them.
        The first step of an update also carries the summed counts of the steps whose logs
        fairseq never reduced (it skips the reduce after an ``--fp16`` overflow), so that
        ``aa_boss_tok`` and the other run totals lose none of them."""
        if self._carried:
            stats = dict(stats)
            for key, value in self._carried.items():
                stats[key] = stats.get(key, 0.0) + value
            self._carried = {}
        self._unreduced.append(stats)
        return stats

    def _rank_state(self) -> dict:
        # the losses of every batch trained so far reach the Assistant before its state is
        # taken: a resumed run must not miss the last update's
        self.flush_losses()
        stream = self.stream.state(self.iterations_in_epoch)
        return dict(self.client.state(), stream=vars(stream))

    def export_carry(self, dim: int) -> dict:
        """What the iterator of the next data shard takes over (``--data a:b``), whose
        features have *dim* columns: the Assistant's model and schedule when the columns
        are the same (the same dictionaries), never its per-pair memory."""
        self.flush_losses()
        assistant = self.client.state()["assistant"]
        if assistant is not None:
            saved_dim = len(assistant["model"]["theta"])
            if saved_dim != dim:
                logger.warning(f"the features of this data shard have dimension {dim}, the "
                               f"previous shard's {saved_dim}: starting a new Assistant")
                assistant = None
            else:
                assistant = shard_independent(assistant)
        return {"assistant": assistant, "run_totals": self.run_totals,
                "batches_done": self.batches_done}

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
        if self._unreduced:  # the previous update's logs were never reduced
            self._carried = {key: sum(float(s.get(key, 0.0)) for s in self._unreduced)
                             for key in CARRIED}
            self._unreduced = []
        self.flush_losses()
        if self.points.saves_after(update_num) or self.end_of_epoch():
            self._gather_due = True

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

    def pop_log_stats(self) -> dict:
        """Counters accumulated since the last call, plus the Assistant's latest state."""
        # what the batches trained so far hold, not those prefetched: a checkpoint saves
        # the same point, so a resumed run logs every window once
        now = dict(self.stream.credited_at(self.iterations_in_epoch),
                   wait_seconds=self.client.wait_seconds)
        delta = {k: v - self._logged.get(k, 0) for k, v in now.items()}
        self._logged = now
        if self.client.assistant_learns:
            stats = dict(self.stream.assistant_stats)
            # cumulative in the Assistant: logged as what happened since the last call
            nonfinite = stats.pop("nonfinite", self._logged_nonfinite)
            delta.update(stats, nonfinite=nonfinite - self._logged_nonfinite)
            self._logged_nonfinite = nonfinite
        dropped = max(self.client.dropped_losses, self._dropped)
        delta["dropped_losses"], self._dropped = dropped - self._dropped, dropped
        delta["failed"] = 1.0 if self.client.failure else 0.0
        return delta

    # -- checkpoints ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """fairseq's ``EpochBatchIterator`` keys (so plain ``translation`` can resume from
        it), plus every rank's stream and Assistant under ``"autoassist"``."""
        finished = self._cur_epoch_itr is None or self.end_of_epoch()
        epoch = self.epoch + 1 if finished and self._cur_epoch_itr is not None else self.epoch
        offset = 0 if finished else self.iterations_in_epoch
        ranks = list(self.rank_states)
        if self.num_shards > 1 and self._synced_at != (self.epoch, self.iterations_in_epoch):
            logger.warning("this checkpoint holds the other workers' batch plans as of "
                           f"{self._synced_at}, not of now: their resume may repeat or skip "
                           "some pairs of this epoch")
        ranks[self.shard_id] = self._rank_state() if self._cur_epoch_itr is not None else None
        return {
            "version": 2, "epoch": epoch, "iterations_in_epoch": offset, "shuffle": self.shuffle,
            "autoassist": arrays_to_tensors({
                "schema": VERSION, "world_size": self.num_shards, "epoch": epoch, "offset": offset,
                "num_batches": None if finished else self._num_batches, "ranks": ranks,
                "totals": dict(self.run_totals), "batches_done": self.batches_done,
                "data": self.data_id,
            }),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Check the saved state (``schema``) and restore the run's totals; the
        stream and the Assistant are restored when the next epoch starts. A state this
        version cannot resume from raises :class:`~.schema.CheckpointSchemaError` here,
        before any training."""
        self.epoch = state_dict["epoch"]
        offset = state_dict.get("iterations_in_epoch", 0) or 0
        if state_dict.get("autoassist") is None:  # a plain translation checkpoint
            if offset:
                logger.warning(f"the checkpoint has no Assistant state (a plain translation "
                               f"run) and was saved at batch {offset} of epoch {self.epoch}: a "
                               "new Assistant starts, and the rest of the epoch comes from a "
                               "fresh data pass")
            else:
                logger.info("the checkpoint has no Assistant state (a plain translation "
                            "run): starting a new Assistant and batch plan")
            saved = {"epoch": self.epoch, "offset": offset, "num_batches": None, "ranks": None}
        else:
            saved = load_schema(tensors_to_arrays(state_dict["autoassist"]))
            self._check_same_data(saved)
            self._check_same_world_size(saved)
        if saved.get("totals") is not None:  # else: a plain translation checkpoint
            self.run_totals.update({k: float(saved["totals"][k]) for k in RUN_TOTALS})
        self._resume = saved
        self._cur_epoch_itr = None

    def _check_same_world_size(self, saved: dict) -> None:
        """Refuse a state saved by another number of workers in the middle of a data pass:
        each rank's plan covers the rest of its own shard of that pass (every
        ``world_size``-th pair), and another split of the pass's remaining pairs cannot be
        drawn from them without training some pairs twice and others not at all. Saved
        between passes (or with no plan), the next pass is split afresh: every worker starts
        from worker 0's Assistant (``_own_entry``)."""
        ranks = saved.get("ranks") or []
        if not ranks or len(ranks) == self.num_shards:
            return
        passes = sorted({int(e["stream"]["generator"]["data_pass"]) for e in ranks
                         if e is not None and e.get("stream") is not None
                         and _mid_pass(e["stream"])})
        if not passes:
            return
        saved_by = f"{len(ranks)} worker" + ("s" if len(ranks) > 1 else "")
        raise ValueError(
            f"the checkpoint was saved by {saved_by} in the middle of data pass "
            f"{passes[0]}, and this run has {self.num_shards}: each worker's batch plan covers "
            f"the rest of its own share of that pass, and {self.num_shards} workers cannot "
            "go on from those plans without training some pairs twice and others not at "
            f"all. Resume with {saved_by} (--distributed-world-size "
            f"{len(ranks)}), or with --reset-dataloader to change the number of workers now "
            "(each worker starts a new Assistant and batch plan on its shard; the model and "
            "optimizer go on)")

    def _check_same_data(self, saved: dict) -> None:
        """Refuse a state saved on other training data: its planned batches and the
        Assistant's per-pair memory name pairs by id, and on other data those ids are other
        pairs (or none). With ``--data a:b``, a state saved at an epoch's end goes on to the
        next shard, whose data differs by design: only what names no pair goes on there."""
        data = saved.get("data")
        if data is None or self.data_id is None or data == self.data_id:
            return
        if self.data_shard_per_epoch and not saved.get("offset"):
            return
        raise ValueError(
            f"the checkpoint was saved on other training data ({int(data['pairs'])} pairs, "
            f"fingerprint {str(data['fingerprint'])[:12]}) than this run's "
            f"({int(self.data_id['pairs'])} pairs, fingerprint "
            f"{str(self.data_id['fingerprint'])[:12]}): its batch plan and Assistant name "
            "that data's pairs by id, so a resume here would train other pairs than planned. "
            "To train this model on the new data, resume with --reset-dataloader (a new "
            "Assistant and batch plan; the model and optimizer go on), or give --data the "
            "data the checkpoint was saved on")

    def shutdown(self) -> None:
        self.client.shutdown()


def _mid_pass(stream: dict) -> bool:
    """Whether a rank's saved stream stands inside a data pass: batches planned, pairs
    carried, or pairs of the pass's order already visited."""
    gen = stream["generator"]
    return bool(len(stream["pending"]) or len(gen["carried"]) or int(gen["next_pair"]) > 0)


def shard_independent(assistant: Optional[dict]) -> Optional[dict]:
    """The part of an Assistant state that names no pair (its model and schedule), which
    goes on to another data shard; the per-pair memory of the ``learnable`` and ``noise``
    rules does not."""
    if assistant is None:
        return None
    return {k: v for k, v in assistant.items() if k in ("model", "schedule")}
