"""The checkpoint schema of the train iterator's AutoAssist state, with one version number.

fairseq saves the iterator's ``state_dict()``; its ``"autoassist"`` entry holds what a
resumed run needs to go on exactly where the saved one stood::

    {"schema", "world_size", "epoch", "offset", "num_batches", "totals", "batches_done",
     "data", "ranks": [None | {"assistant": Assistant.state_dict() | None,
                       "stream": None | {StreamState fields,
                                         "generator": BatchGenerator.state_dict()}}]}

``totals`` are the run's counts over every rank (``RUN_TOTALS``, kept by the iterator);
``data`` is ``{"pairs", "fingerprint"}`` of the training data the state names pairs of; a
stream's ``credits`` are the counts already credited to its first pending batches, issued but
not trained when it was saved; the generator state's ``seed`` is the ``--seed`` its data
pass's order and draws came from, and its ``"data_pass"`` is the data pass (fairseq's
``"epoch"`` at the top counts its epochs).

:func:`load` checks a saved entry in the Boss, when the checkpoint loads. Anything but this
layout is refused with the reason, never replaced by a fresh Assistant: a state of a
development version before 0.2.0 (its ``"version"`` key, 1 to 6) as such, with the fix.
"""

from typing import Optional

from ..metrics import RUN_TOTALS

VERSION = 1  # the "schema" of 0.2.0 and later

TOP_KEYS = {"schema", "world_size", "epoch", "offset", "num_batches", "ranks", "totals",
            "batches_done", "data"}
# "stats": the Assistant's counters, which 0.2.0 saved beside its state; a resume reads
# them from the state itself, so they are accepted and not read
RANK_KEYS = {"assistant", "stream", "stats"}
STREAM_KEYS = {"generator", "pending", "weights", "rate", "untold", "untold_batches",
               "credits", "pass_counts"}
GENERATOR_KEYS = {"data_pass", "next_window", "next_pair", "window_size", "carried",
                  "carried_weights", "accept_all", "generation", "batches_made", "seed"}
_RESET = ("resume from another checkpoint, or relaunch with --reset-dataloader (a new "
          "Assistant and batch plan)")


class CheckpointSchemaError(ValueError):
    """A saved AutoAssist state this version cannot resume from: the message says why
    (``reason``, for tools that read checkpoints without resuming) and the fix."""

    def __init__(self, reason: str, fix: str = _RESET, joiner: str = "; "):
        super().__init__(f"{reason}{joiner}{fix}")
        self.reason = reason


def load(saved: dict) -> dict:
    """*saved* (the iterator's ``"autoassist"`` entry, arrays as numpy), checked.

    Raises:
        CheckpointSchemaError: a state of a development version, an unknown schema, or a
            state that does not fit the schema.
    """
    if not isinstance(saved, dict):
        raise CheckpointSchemaError(f"the checkpoint's AutoAssist state is a "
                                    f"{type(saved).__name__}, not a dict")
    if "version" in saved and "schema" not in saved:
        raise CheckpointSchemaError(
            f"the checkpoint's AutoAssist state was written by a development version of "
            f"autoassist-fairseq before 0.2.0 (its schema version {saved['version']!r}), "
            f"whose layouts this release does not read",
            f"finish that run with the version that started it, or {_RESET}", joiner=": ")
    schema = saved.get("schema")
    if schema != VERSION:
        newer = isinstance(schema, int) and schema > VERSION
        raise CheckpointSchemaError(
            f"the checkpoint's AutoAssist state has schema {schema!r}; this "
            f"autoassist-fairseq reads schema {VERSION}"
            + (" (the checkpoint is from a newer release: upgrade autoassist-fairseq)"
               if newer else ""))
    _check(saved)
    return saved


def _check(saved: dict) -> None:
    _keys("the AutoAssist state", saved, TOP_KEYS, required=TOP_KEYS - {"data"})
    if saved["totals"] is not None:
        _keys("the run's totals", saved["totals"], set(RUN_TOTALS), required=set(RUN_TOTALS))
    ranks = saved["ranks"]
    if ranks is not None and not isinstance(ranks, list):
        raise CheckpointSchemaError(f"the AutoAssist state's ranks is a "
                                    f"{type(ranks).__name__}, not a list")
    for r, entry in enumerate(ranks or []):
        if entry is None:
            continue
        _keys(f"rank {r}'s entry", entry, RANK_KEYS, required={"assistant"})
        stream = entry.get("stream")
        if stream is not None:
            _keys(f"rank {r}'s stream", stream, STREAM_KEYS, required={"generator", "pending"})
            _keys(f"rank {r}'s generator state", stream["generator"], GENERATOR_KEYS,
                  required=GENERATOR_KEYS)


def _keys(what: str, obj, allowed: set, required: set) -> None:
    if not isinstance(obj, dict):
        raise CheckpointSchemaError(f"{what} is a {type(obj).__name__}, not a dict")
    unknown, missing = set(obj) - allowed, required - set(obj)
    if unknown or missing:
        parts = ([f"unknown fields {sorted(unknown)}"] if unknown else []) + \
                ([f"missing fields {sorted(missing)}"] if missing else [])
        raise CheckpointSchemaError(
            f"{what} in the checkpoint has {' and '.join(parts)} for schema {VERSION}: it "
            f"was written by another autoassist-fairseq")


def describe_seed_change(gen_state: Optional[dict], seed: int) -> Optional[str]:
    """A warning when a pass resumes under another ``--seed`` than it was drawn with."""
    if gen_state is None or int(gen_state["seed"]) == seed:
        return None
    saved, data_pass = int(gen_state["seed"]), int(gen_state["data_pass"])
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
            f"{window_size} in the middle of data pass {gen_state['data_pass']}: the pass goes on "
            f"in the same order from its pair {int(gen_state['next_pair'])}, in windows of "
            f"the new size")
