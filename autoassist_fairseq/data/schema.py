"""The checkpoint schema of the train iterator's AutoAssist state, with one version number.

fairseq saves the iterator's ``state_dict()``; its ``"autoassist"`` entry holds what a
resumed run needs to go on exactly where the saved one stood::

    {"version", "world_size", "epoch", "offset", "num_batches", "totals", "batches_done",
     "data", "ranks": [None | {"assistant": Assistant.state_dict() | None, "stats": dict | None,
                       "stream": None | {StreamState fields,
                                         "generator": BatchGenerator.state_dict()}}]}

:func:`load` checks a saved entry in the Boss, when the checkpoint loads, and migrates it
from every version that has shipped; anything else is refused with the reason, never
replaced by a fresh Assistant. Versions:

- 1: one epoch plan per run (``"plan"``, generator states 1-2); the Assistant and the
  counters migrate, the batch plan does not (the rest of a saved epoch comes from a fresh
  data pass, with a warning);
- 3: batch streams; fields were added inside it over time (``rate``; ``totals``,
  ``untold``, ``untold_batches``; ``pass_counts``), and its generator state had its own
  version: 3 (windows were slices of the length order; migrates at the start of a pass
  only) or 4 (windows of random pairs);
- 4: the generator state also holds ``next_pair`` and ``window_size``, so a pass resumed
  with another ``--assistant-window`` goes on with the same order, and ``batches_made``
  (added inside version 3 too), the run-wide number of the next batch. The Assistant's
  state of an ``--assistant-sync`` run also holds ``held_losses``, the losses it received
  but had not learned yet, which a resumed run learns first;
- 5: a rank's ``stats`` count the loss batches the Assistant learned from as
  ``loss_batches`` (``updates`` before; the stats are a record, not read to resume);
- 6: this layout: ``totals`` are the run's counts over every rank (``RUN_TOTALS``, kept by
  the iterator), saved once. Before, ``totals`` (with ``wait_seconds``) copied rank 0's
  window counts, each rank's stream held its own, and the run's sums over the ranks lived
  in the task's checkpoint dict: the copies are dropped, and the sums, ``None`` after
  :func:`load`, come from the task's dict (:func:`run_totals_from_task`), which fairseq hands
  over after the iterator's state. The generator state's ``seed`` (added inside version 6,
  absent before) is the ``--seed`` its data pass's order and draws came from; ``data``
  (also added inside version 6, absent before) is ``{"pairs", "fingerprint"}`` of the
  training data the state names pairs of. A stream's ``credits`` (added inside version 6,
  absent before: their counts were in ``untold``) are the counts already credited to its
  first pending batches, issued but not trained when it was saved.

The generator state's ``"epoch"`` is the data pass (its name in every version).
"""

import logging
from typing import Optional

from ..metrics import RUN_TOTALS

logger = logging.getLogger(__name__)

VERSION = 6

TOP_KEYS = {"version", "world_size", "epoch", "offset", "num_batches", "ranks", "totals",
            "batches_done", "data"}
RANK_KEYS = {"assistant", "stats", "stream"}
STREAM_KEYS = {"generator", "pending", "weights", "rate", "untold", "untold_batches",
               "credits", "pass_counts"}
GENERATOR_KEYS = {"epoch", "next_window", "next_pair", "window_size", "carried",
                  "carried_weights", "accept_all", "generation", "batches_made", "seed"}
_RESET = ("resume from another checkpoint, or relaunch with --reset-dataloader (a new "
          "Assistant and batch plan)")


class CheckpointSchemaError(ValueError):
    """A saved AutoAssist state this version cannot resume from; the message says why."""


def load(saved: dict, generator) -> dict:
    """*saved* (the iterator's ``"autoassist"`` entry, arrays as numpy) checked and migrated
    to :data:`VERSION`.

    Args:
        saved (dict): the saved entry.
        generator (BatchGenerator): this rank's generator (for the layout of its shard).

    Raises:
        CheckpointSchemaError: an unknown version, or a state that does not fit its version.
    """
    if not isinstance(saved, dict):
        raise CheckpointSchemaError(f"the checkpoint's AutoAssist state is a "
                                    f"{type(saved).__name__}, not a dict; {_RESET}")
    version = saved.get("version")
    if version == 1:
        saved = _from_v1(saved)
    elif version == 3:
        saved = _from_v3(saved, generator)
    elif version not in (4, 5, VERSION):
        newer = isinstance(version, int) and version > VERSION
        raise CheckpointSchemaError(
            f"the checkpoint's AutoAssist state has schema version {version!r}; this "
            f"autoassist-fairseq reads versions 1, 3, 4, 5 and {VERSION}"
            + (" (the checkpoint is from a newer release: upgrade autoassist-fairseq)"
               if newer else "") + f"; {_RESET}")
    if version != VERSION:
        saved = _from_v5(saved)
    _check(saved)
    if version in (1, 3, 4):
        saved["ranks"] = [_stats_from_v4(e) for e in saved["ranks"]] \
            if saved["ranks"] is not None else None
    return saved


def run_totals_from_task(task_state: dict) -> Optional[dict]:
    """The run's totals where schema versions 1 to 5 kept them: the task's checkpoint dict
    ``{"totals": {key: value}}`` (``None`` when it holds none)."""
    totals = task_state.get("totals")
    return None if totals is None else {k: float(totals.get(k, 0.0)) for k in RUN_TOTALS}


def _check(saved: dict) -> None:
    _keys("the AutoAssist state", saved, TOP_KEYS, required=TOP_KEYS - {"data"})
    if saved["totals"] is not None:
        _keys("the run's totals", saved["totals"], set(RUN_TOTALS), required=set(RUN_TOTALS))
    ranks = saved["ranks"]
    if ranks is not None and not isinstance(ranks, list):
        raise CheckpointSchemaError(f"the AutoAssist state's ranks is a "
                                    f"{type(ranks).__name__}, not a list; {_RESET}")
    for r, entry in enumerate(ranks or []):
        if entry is None:
            continue
        _keys(f"rank {r}'s entry", entry, RANK_KEYS, required={"assistant"})
        stream = entry.get("stream")
        if stream is not None:
            _keys(f"rank {r}'s stream", stream, STREAM_KEYS, required={"generator", "pending"})
            _keys(f"rank {r}'s generator state", stream["generator"], GENERATOR_KEYS,
                  required=GENERATOR_KEYS - {"seed"})


def _keys(what: str, obj, allowed: set, required: set) -> None:
    if not isinstance(obj, dict):
        raise CheckpointSchemaError(f"{what} is a {type(obj).__name__}, not a dict; {_RESET}")
    unknown, missing = set(obj) - allowed, required - set(obj)
    if unknown or missing:
        parts = ([f"unknown fields {sorted(unknown)}"] if unknown else []) + \
                ([f"missing fields {sorted(missing)}"] if missing else [])
        raise CheckpointSchemaError(
            f"{what} in the checkpoint has {' and '.join(parts)} for schema version "
            f"{VERSION}: it was written by another autoassist-fairseq; {_RESET}")


# -- migrations ------------------------------------------------------------------------
def _from_v5(saved: dict) -> dict:
    """Versions 1 to 5 (each migrated to the layout of 5 first) copied rank 0's window
    counts to ``totals`` and ``wait_seconds``, and each rank's stream held its own: the run's
    totals are in the task's checkpoint dict instead (``None`` until it is read)."""
    saved = {k: v for k, v in saved.items() if k != "wait_seconds"}
    saved.update(version=VERSION, totals=None)
    if saved.get("ranks") is not None:
        saved["ranks"] = [
            entry if not isinstance(entry, dict) or not isinstance(entry.get("stream"), dict)
            else dict(entry, stream={k: v for k, v in entry["stream"].items() if k != "totals"})
            for entry in saved["ranks"]]
    return saved


def _from_v1(saved: dict) -> dict:
    """Version 1 held one plan per epoch; its Assistants carry over."""
    _keys("the AutoAssist state (version 1)", saved,
          {"version", "world_size", "epoch", "offset", "num_batches", "plan", "ranks", "rate",
           "totals", "batches_done", "rank_batches"}, required={"version", "epoch", "ranks"})
    if saved.get("offset"):
        logger.warning(f"the checkpoint's batch plan (AutoAssist state version 1) cannot be "
                       f"continued by this version: the rest of epoch {saved['epoch']} comes "
                       f"from a fresh data pass (the Assistant's state is kept)")
    ranks = [None if e is None else {"assistant": e.get("assistant"), "stats": e.get("stats"),
                                     "stream": None}
             for e in (saved.get("ranks") or [])]
    return {"version": VERSION, "world_size": saved.get("world_size", len(ranks)),
            "epoch": saved["epoch"], "offset": saved.get("offset") or 0,
            "num_batches": saved.get("num_batches"), "ranks": ranks or None,
            "batches_done": saved.get("batches_done", 0)}


def _stats_from_v4(entry: Optional[dict]) -> Optional[dict]:
    """Versions 1 to 4 named the Assistant's count of loss batches ``updates``."""
    stats = (entry or {}).get("stats")
    if stats is None or "updates" not in stats:
        return entry
    stats = dict(stats)
    stats["loss_batches"] = stats.pop("updates")
    return dict(entry, stats=stats)


def _from_v3(saved: dict, generator) -> dict:
    """Version 3, with or without the fields added inside it, generator state 3 or 4."""
    saved = dict(saved, version=VERSION)
    ranks = []
    for r, entry in enumerate(saved.get("ranks") or []):
        if entry is not None and entry.get("stream") is not None:
            stream = dict(entry["stream"])
            # before these fields: estimated afresh / counted from the resume on
            for key, default in (("weights", None), ("rate", None), ("untold", None),
                                 ("untold_batches", 0), ("pass_counts", None)):
                stream.setdefault(key, default)
            stream["generator"] = _generator_from_v3(stream["generator"], generator, r)
            # before run-wide batch numbers: the batches trained come first, then the
            # pending ones, which the generator made last
            stream["generator"].setdefault(
                "batches_made", int(saved.get("batches_done") or 0) + len(stream["pending"]))
            entry = dict(entry, stream=stream)
        ranks.append(entry)
    saved["ranks"] = ranks if saved.get("ranks") is not None else None
    saved.setdefault("batches_done", 0)
    return saved


def _generator_from_v3(state: dict, generator, rank: int) -> dict:
    state = dict(state)
    version = state.pop("version", None)
    if "deferred" in state:  # accepted pairs not batched yet; named "carried" since 3ab4c61
        state["carried"] = state.pop("deferred")
        state["carried_weights"] = state.pop("deferred_weights")
    if version == 3:
        if int(state.get("next_window", 0)) != 0 or len(state.get("carried", ())):
            raise CheckpointSchemaError(
                f"rank {rank}'s batch plan was saved in the middle of data pass "
                f"{state.get('epoch')} by a version whose windows were slices of the length "
                "order (generator state 3): this version visits a pass in another order and "
                f"cannot finish that one without repeating or skipping pairs; {_RESET}")
    elif version != 4:
        raise CheckpointSchemaError(f"rank {rank}'s batch generator state has version "
                                    f"{version!r} inside AutoAssist state version 3, which "
                                    f"shipped with 3 and 4 only; {_RESET}")
    # saved without its window size: the pass went on with windows of today's size
    state.setdefault("window_size", generator.window_size)
    state.setdefault("next_pair", int(state.get("next_window", 0)) * int(state["window_size"]))
    return state


def describe_seed_change(gen_state: Optional[dict], seed: int) -> Optional[str]:
    """A warning when a pass resumes under another ``--seed`` than it was drawn with."""
    if gen_state is None or "seed" not in gen_state or int(gen_state["seed"]) == seed:
        return None
    saved, data_pass = int(gen_state["seed"]), int(gen_state["epoch"])
    return (f"--seed changed from {saved} to {seed} at a resume in the middle of data pass "
            f"{data_pass}: the pass goes on in its saved order and acceptance draws (of seed "
            f"{saved}) from its pair {int(gen_state['next_pair'])}, so that each of its pairs "
            f"is a candidate once; --seed {seed} draws the order and acceptance from data pass "
            f"{data_pass + 1} on (fairseq's own draws, e.g. dropout, take it at once). To "
            f"apply it to the batches at once, resume with --reset-dataloader, which starts a "
            f"new Assistant and batch plan")


def describe_window_change(gen_state: Optional[dict], window_size: int) -> Optional[str]:
    """A line for the log when a pass resumes with another ``--assistant-window``."""
    if gen_state is None or int(gen_state["window_size"]) == window_size:
        return None
    return (f"--assistant-window changed from {int(gen_state['window_size'])} to "
            f"{window_size} in the middle of data pass {gen_state['epoch']}: the pass goes on "
            f"in the same order from its pair {int(gen_state['next_pair'])}, in windows of "
            f"the new size")
