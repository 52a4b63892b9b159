"""Every rank's stream and Assistant state, gathered for the checkpoint that rank 0 writes.

fairseq saves on rank 0 alone, so the other ranks' states must reach it beforehand, by a
collective that every rank enters at the same point: after an update that fairseq may save
after, and at the start of validation. The epoch iterator calls :meth:`RankStates.gather`
at those points; a state gathered at another point than the save's is older, and the save
says so.
"""

import logging
from typing import Callable, List, Optional, Tuple

logger = logging.getLogger(__name__)


class RankStates:
    """The states of *num_shards* ranks as last gathered with *all_gather* (``all_gather(obj)
    -> list`` over the ranks), and where: ``synced_at``, the (epoch, batches consumed in it)
    of the gather. ``due``: the update under way may be followed by a save, so its end
    gathers."""

    def __init__(self, num_shards: int, shard_id: int, all_gather: Callable):
        self.num_shards, self.shard_id = num_shards, shard_id
        self.all_gather = all_gather
        self.states: List[Optional[dict]] = [None] * num_shards
        self.synced_at: Optional[Tuple[int, int]] = None
        self.due = False

    def gather(self, at: Optional[Tuple[int, int]], own_state: Callable[[], dict]) -> None:
        """Gather every rank's *own_state()* at *at* (None: no epoch under way, nothing to
        gather). A second call at the same point (validation after the step that gathered)
        gathers nothing new: no step ran between, on any rank."""
        self.due = False
        if self.num_shards == 1 or at is None or self.synced_at == at:
            return
        self.states = self.all_gather(own_state())
        self.synced_at = at

    def for_checkpoint(self, at: Tuple[int, int],
                       own_state: Callable[[], Optional[dict]]) -> List[Optional[dict]]:
        """Every rank's state for a checkpoint saved at *at*, this rank's *own_state()*
        taken now; warns where the other ranks' were gathered at another point."""
        ranks = list(self.states)
        if self.num_shards > 1 and self.synced_at != at:
            logger.warning("this checkpoint holds the other workers' batch plans as of "
                           f"{self.synced_at}, not of now: their resume may repeat or skip "
                           "some pairs of this epoch")
        ranks[self.shard_id] = own_state()
        return ranks


def all_gather_data_parallel(obj):
    """Every data-parallel rank's *obj*, in rank order, over fairseq's data-parallel group:
    the ranks that hold shards of the training data (under model parallelism not every
    process of the default group is one)."""
    import torch.distributed as dist
    from fairseq.distributed import utils as distributed_utils

    group_of = getattr(distributed_utils, "get_data_parallel_group", None)
    group = group_of() if group_of is not None else None  # None: the default group
    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out
