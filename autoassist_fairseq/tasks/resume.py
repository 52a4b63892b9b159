"""What the epoch iterator resumes from its saved state, what it refuses, and what it says.

The state holds one entry per rank: its batch stream (the batches planned and the
generator's place in the data pass) and its Assistant (model, schedule and per-pair memory).
The plan and the per-pair memory name pairs by id, so they resume only on the data, and the
split of the data into ranks' shares, they were saved on; the Assistant's model and schedule
name no pair and go on anywhere (:func:`shard_independent`).
"""

import logging
from typing import Optional

from ..data.arrays import tensors_to_arrays
from ..data.schema import describe_seed_change, describe_window_change
from ..data.schema import load as load_schema

logger = logging.getLogger(__name__)


def read_saved(state_dict: dict, data_id: Optional[dict],
               data_shard_per_epoch: bool, num_shards: int) -> dict:
    """The iterator's saved state in *state_dict* (fairseq's iterator keys, ours under
    ``"autoassist"``), checked (``schema``); a plain ``translation``
    checkpoint gives its epoch and offset alone. A state this run cannot resume from raises
    :class:`~..data.schema.CheckpointSchemaError` or ValueError, before any training."""
    epoch = state_dict["epoch"]
    offset = state_dict.get("iterations_in_epoch", 0) or 0
    if state_dict.get("autoassist") is None:  # a plain translation checkpoint
        if offset:
            logger.warning(f"the checkpoint has no Assistant state (a plain translation "
                           f"run) and was saved at batch {offset} of epoch {epoch}: a "
                           "new Assistant starts, and the rest of the epoch comes from a "
                           "fresh data pass")
        else:
            logger.info("the checkpoint has no Assistant state (a plain translation "
                        "run): starting a new Assistant and batch plan")
        return {"epoch": epoch, "offset": offset, "num_batches": None, "ranks": None}
    saved = load_schema(tensors_to_arrays(state_dict["autoassist"]))
    check_same_data(saved, data_id, data_shard_per_epoch)
    check_same_world_size(saved, num_shards)
    return saved


def check_same_world_size(saved: dict, num_shards: int) -> None:
    """Refuse a state saved by another number of workers in the middle of a data pass:
    each rank's plan covers the rest of its own shard of that pass (every
    ``world_size``-th pair), and another split of the pass's remaining pairs cannot be
    drawn from them without training some pairs twice and others not at all. Saved
    between passes (or with no plan), the next pass is split afresh: every worker starts
    from worker 0's Assistant (:func:`own_entry`)."""
    ranks = saved.get("ranks") or []
    if not ranks or len(ranks) == num_shards:
        return
    passes = sorted({int(e["stream"]["generator"]["data_pass"]) for e in ranks
                     if e is not None and e.get("stream") is not None
                     and _mid_pass(e["stream"])})
    if not passes:
        return
    saved_by = f"{len(ranks)} worker" + ("s" if len(ranks) > 1 else "")
    raise ValueError(
        f"the checkpoint was saved by {saved_by} in the middle of data pass "
        f"{passes[0]}, and this run has {num_shards}: each worker's batch plan covers "
        f"the rest of its own share of that pass, and {num_shards} workers cannot "
        "go on from those plans without training some pairs twice and others not at "
        f"all. Resume with {saved_by} (--distributed-world-size "
        f"{len(ranks)}), or with --reset-dataloader to change the number of workers now "
        "(each worker starts a new Assistant and batch plan on its shard; the model and "
        "optimizer go on)")


def check_same_data(saved: dict, data_id: Optional[dict], data_shard_per_epoch: bool) -> None:
    """Refuse a state saved on other training data than *data_id* (``{"pairs",
    "fingerprint"}``): its planned batches and the Assistant's per-pair memory name pairs by
    id, and on other data those ids are other pairs (or none). With ``--data a:b``
    (*data_shard_per_epoch*), a state saved at an epoch's end goes on to the next shard,
    whose data differs by design: only what names no pair goes on there."""
    data = saved.get("data")
    if data is None or data_id is None or data == data_id:
        return
    if data_shard_per_epoch and not saved.get("offset"):
        return
    raise ValueError(
        f"the checkpoint was saved on other training data ({int(data['pairs'])} pairs, "
        f"fingerprint {str(data['fingerprint'])[:12]}) than this run's "
        f"({int(data_id['pairs'])} pairs, fingerprint "
        f"{str(data_id['fingerprint'])[:12]}): its batch plan and Assistant name "
        "that data's pairs by id, so a resume here would train other pairs than planned. "
        "To train this model on the new data, resume with --reset-dataloader (a new "
        "Assistant and batch plan; the model and optimizer go on), or give --data the "
        "data the checkpoint was saved on")


def own_entry(resume: dict, num_shards: int, shard_id: int, epoch: int,
              other_shard: bool) -> Optional[dict]:
    """This rank's entry of the saved state *resume*, which the iterator resumes from at
    the start of *epoch*: its own where the saved run had as many workers, else worker 0's
    Assistant alone; where *other_shard* (the epoch loads its own ``--data`` shard and
    starts from the top), only what names no pair."""
    ranks = resume.get("ranks") or []
    if len(ranks) == num_shards:
        own = ranks[shard_id]
    elif ranks:
        logger.warning(f"the checkpoint holds the Assistants of {len(ranks)} workers, this run "
                       f"has {num_shards}: every worker starts from worker 0's "
                       "Assistant and a fresh batch plan")
        own = {"assistant": (ranks[0] or {}).get("assistant")}
    else:
        own = None
    if own is not None and other_shard:
        # saved at the end of the previous epoch, whose data shard this is not: as
        # at a change of shard, only what does not name pairs goes on
        own = {"assistant": shard_independent(own.get("assistant"))}
        logger.info(f"epoch {epoch} starts on its own data shard: the saved "
                    "Assistant's weights go on, its batch plan and per-pair memory "
                    "stay with the previous shard")
    return own


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


def log_restored_stream(stream, generator) -> None:
    """Say where the restored *stream* resumes, and what of this run's *generator* differs
    from the saved run's: the window size, the seed, batch bounds the planned batches
    exceed."""
    logger.info(f"resuming the batch stream at pass {stream.gen_state['data_pass']}, "
                f"window {stream.gen_state['next_window']}, with "
                f"{len(stream.pending)} batches planned")
    changed = describe_window_change(stream.gen_state, generator.window_size)
    if changed:
        logger.info(changed)
    changed = describe_seed_change(stream.gen_state, generator.seed)
    if changed:
        logger.warning(changed)
    _warn_planned_over_limits(generator, [b.ids for b in stream.pending])


def _warn_planned_over_limits(gen, planned) -> None:
    """A resume trains the batches already planned as they are (that keeps a mid-epoch
    resume exact); a lower --max-tokens or --batch-size than they were cut under applies
    from the first window after them: say so, and how to apply it at once."""
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


def warn_plan_accepts_all(planned: int, restored_assistant: bool) -> None:
    """A resumed batch plan whose windows accepted every pair (the saved run fell back
    to uniform batches, or annealed) while this run's next windows do not: say so, and
    from where this run's Assistant decides."""
    start = ("from the Assistant state restored above" if restored_assistant
             else "from a new Assistant (the checkpoint holds no Assistant state)")
    logger.warning(
        "the checkpoint's batch plan accepts every pair: the saved run went on with "
        "uniform batches after its Assistant failed (--assistant-fallback uniform), or "
        f"it was annealing. The {planned} batches already planned are "
        "trained as planned; the windows after them are scored by this run's Assistant "
        f"again, {start}, and skip pairs (to go on training on every pair, resume with "
        "--task translation)")
