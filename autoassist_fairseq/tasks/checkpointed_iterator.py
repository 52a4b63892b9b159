"""The epoch iterator's state in fairseq's checkpoints and across data shards.

Every rank's stream and Assistant are gathered where fairseq may save (:mod:`.rank_states`)
and saved by rank 0 under ``"autoassist"`` beside fairseq's own iterator keys; a loaded
state is checked (:mod:`.resume`) at once, and restored into the stream and the Assistant
when the next epoch starts; the iterator of the next data shard (``--data a:b``) takes over
the Assistant's model and the run's totals. :class:`CheckpointedIterator` holds this part of
:class:`~.batch_iterator.AutoAssistEpochBatchIterator`.
"""

import logging
from typing import Optional, Tuple

from ..data.arrays import arrays_to_tensors
from ..data.batch_stream import StreamState
from ..data.schema import VERSION
from .resume import log_restored_stream, own_entry, read_saved, shard_independent

# the iterator's own logger: these lines are the epoch iterator's
logger = logging.getLogger("autoassist_fairseq.tasks.batch_iterator")


class CheckpointedIterator:
    """The checkpoint side of :class:`~.batch_iterator.AutoAssistEpochBatchIterator`: what
    it saves, restores at the next epoch's start, and carries to the next data shard.

    It works on the iterator's attributes: its position (``epoch``, ``_cur_epoch_itr``,
    ``_num_batches``, ``_batches_before``), its parts (``generator``, ``stream``, ``client``,
    ``points``, ``rank_states``, ``counters``) and its settings. What a
    load or the previous data shard hands over waits in ``_resume`` or ``_handover`` until the
    next epoch starts (:meth:`_start`).
    """

    # -- the stream at an epoch's start ---------------------------------------------------
    def _start(self, resume: Optional[dict]) -> int:
        """Start the Assistant (once) and position the stream; returns the epoch offset."""
        own, offset = None, 0
        self._saved_accept_all = None
        if resume is not None:
            offset = int(resume.get("offset") or 0) if resume.get("epoch") == self.epoch else 0
            own = own_entry(resume, self.num_shards, self.shard_id, self.epoch,
                            other_shard=self.data_shard_per_epoch and offset == 0)
            if resume.get("batches_done"):
                self._batches_before = int(resume["batches_done"]) - offset
        if self._handover is not None:
            self._batches_before = self._handover["batches_done"]
        if own is not None and own.get("stream") is not None:
            self.stream.restore(StreamState(**own["stream"]))
            self._saved_accept_all = bool(self.stream.gen_state.get("accept_all"))
            log_restored_stream(self.stream, self.generator)
        elif resume is not None and offset > 0 and resume.get("ranks") is not None:
            logger.warning(f"this rank's batch plan is not in the checkpoint: the rest of "
                           f"epoch {self.epoch} comes from a fresh data pass")
        if not self.client.started:
            assistant = (own or {}).get("assistant") or (self._handover or {}).get("assistant")
            self.counters.start(assistant)
            self._restored_assistant = assistant is not None
            self.client.start(self.epoch, assistant, "the checkpoint" if own is not None
                              else "the previous data shard",
                              accept_all_from=self._anneal_seq(self._batches_before + offset))
        self._handover = None
        return offset

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

    # -- checkpoints ----------------------------------------------------------------------
    def sync_checkpoint_state(self) -> None:
        """Gather every rank's stream and Assistant state, so that the checkpoint that rank
        0 writes next resumes every rank exactly. Every rank calls this at the same point.
        A second call at the same consumed count (validation after the step that gathered)
        gathers nothing new: no step ran between, on any rank."""
        self.rank_states.gather(self._position(), self._rank_state)

    def _position(self) -> Optional[Tuple[int, int]]:
        """(epoch, batches consumed in it) while an epoch is under way, else None."""
        return (self.epoch, self.iterations_in_epoch) if self._cur_epoch_itr is not None else None

    def _rank_state(self) -> dict:
        # the losses of every batch trained so far reach the Assistant before its state is
        # taken: a resumed run must not miss the last update's
        self.flush_losses()
        stream = self.stream.state(self.iterations_in_epoch)
        return {"assistant": self.client.state()["assistant"], "stream": vars(stream)}

    def state_dict(self) -> dict:
        """fairseq's ``EpochBatchIterator`` keys (so plain ``translation`` can resume from
        it), plus every rank's stream and Assistant under ``"autoassist"``."""
        finished = self._cur_epoch_itr is None or self.end_of_epoch()
        epoch = self.epoch + 1 if finished and self._cur_epoch_itr is not None else self.epoch
        offset = 0 if finished else self.iterations_in_epoch
        ranks = self.rank_states.for_checkpoint(
            (self.epoch, self.iterations_in_epoch),
            lambda: self._rank_state() if self._cur_epoch_itr is not None else None)
        return {
            "version": 2, "epoch": epoch, "iterations_in_epoch": offset, "shuffle": self.shuffle,
            "autoassist": arrays_to_tensors({
                "schema": VERSION, "world_size": self.num_shards, "epoch": epoch, "offset": offset,
                "num_batches": None if finished else self._num_batches, "ranks": ranks,
                "totals": self.counters.state_dict(), "batches_done": self.batches_done,
                "data": self.data_id,
            }),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Check the saved state (``schema``) and restore the run's totals; the
        stream and the Assistant are restored when the next epoch starts. A state this
        version cannot resume from raises :class:`~.schema.CheckpointSchemaError` here,
        before any training."""
        self.epoch = state_dict["epoch"]
        saved = read_saved(state_dict, self.data_id, self.data_shard_per_epoch, self.num_shards)
        if saved.get("totals") is not None:  # else: a plain translation checkpoint
            self.counters.load_state_dict(saved["totals"])
        self._resume = saved
        self._cur_epoch_itr = None

    def export_handover(self, dim: int) -> dict:
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
