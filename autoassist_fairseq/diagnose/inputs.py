"""``autoassist-diagnose``'s inputs, checked before the slow part: the data directory, the
checkpoint file (whole, and a fairseq checkpoint), the output paths and the ``--dynamics``
files. Each check raises :class:`DiagnosisError`, whose message names the input and the fix;
the command prints it without a traceback.
"""

import os

from ..checkpoint_file import CheckpointFileError, check_checkpoint_file


class DiagnosisError(RuntimeError):
    """A failure the user can act on; the command prints it without a traceback."""


def check_data(data) -> None:
    """Raise DiagnosisError unless *data* is a directory (the run's data directory)."""
    if not os.path.exists(data):
        raise DiagnosisError(f"--data {data} does not exist: give the data directory the run "
                             "trained on (the --destdir of fairseq-preprocess or "
                             "scripts/prepare-corpus.sh)")
    if not os.path.isdir(data):
        raise DiagnosisError(f"--data {data} is a file: give the data directory the run "
                             "trained on (the --destdir of fairseq-preprocess or "
                             "scripts/prepare-corpus.sh)")


def check_checkpoint(checkpoint) -> None:
    """Raise DiagnosisError unless *checkpoint* is a file that torch.save wrote whole (a zip
    archive whose parts match their checksums, or a pickle), and, for the zip archives of
    torch >= 1.6, a fairseq checkpoint (a dict with ``model`` and ``cfg`` or ``args``)."""
    hint = ("give a checkpoint file that fairseq-train saved, e.g. "
            "SAVE_DIR/checkpoint_last.pt")
    if not os.path.exists(checkpoint):
        raise DiagnosisError(f"--checkpoint {checkpoint} does not exist: {hint}")
    if os.path.isdir(checkpoint):
        raise DiagnosisError(f"--checkpoint {checkpoint} is a directory: {hint}")
    try:
        with open(checkpoint, "rb") as f:
            head = f.read(4)
        check_checkpoint_file(checkpoint, hint)  # empty, not torch's, or damaged
    except OSError as err:
        raise DiagnosisError(f"cannot read --checkpoint {checkpoint}: {err.strerror}") from None
    except CheckpointFileError as err:
        raise DiagnosisError(f"--checkpoint {err}") from None
    if head == b"PK\x03\x04":  # torch's zip format
        import torch

        try:
            state = torch.load(checkpoint, map_location="cpu", mmap=True, weights_only=False)
        except Exception as err:  # noqa: BLE001  (whatever unpickling raises: named below)
            raise DiagnosisError(f"--checkpoint {checkpoint} is not a readable torch file "
                                 f"({type(err).__name__}: {err}): {hint}") from None
        if not (isinstance(state, dict) and "model" in state
                and ("cfg" in state or "args" in state)):
            what = f"a dict with the keys {', '.join(map(str, list(state)[:5]))}" \
                if isinstance(state, dict) else f"a {type(state).__name__}"
            raise DiagnosisError(f"--checkpoint {checkpoint} is not a fairseq checkpoint (it "
                                 f"holds {what}, without 'model' and 'cfg'): {hint}")


def other_dictionary(checkpoint, data, state) -> str:
    """The message for a checkpoint whose embeddings do not fit *data*'s dictionaries."""
    sizes = {name.split(".")[0]: tuple(value.shape)[0] for name, value in state["model"].items()
             if name.endswith("embed_tokens.weight")}
    found = ", ".join(f"{side} {n}" for side, n in sorted(sizes.items()))
    from fairseq.data import Dictionary

    dicts = [f"{name} {len(Dictionary.load(os.path.join(data, name)))}"
             for name in sorted(os.listdir(data)) if name.startswith("dict.")
             and name.endswith(".txt")]
    return (f"--checkpoint {checkpoint} was trained on another dictionary than --data {data}'s "
            f"(symbols of its embeddings: {found or 'unknown'}; {', '.join(dicts) or 'none'}): "
            "give --data the data directory the run trained on (its dict.*.txt), or a "
            "checkpoint of a run on this one")


def check_output(path, option: str) -> None:
    """Raise DiagnosisError unless a file can be written at *path* (its folder is made where
    missing): before the slow part, not after it."""
    if os.path.isdir(path):
        example = os.path.join(path, "diagnosis.json" if option == "--out" else "losses.npz")
        raise DiagnosisError(f"{option} {path} is a directory: give a file in it, e.g. {example}")
    existing = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise DiagnosisError(f"{option} {path} is under the file {existing}: give a path in a "
                             "folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DiagnosisError(f"{option} {path}: {existing} is not writable (permission denied)")



def check_dynamics(dynamics) -> None:
    """Raise DiagnosisError unless both ``--dynamics`` files exist (before the slow part)."""
    for path in dynamics or ():
        if not os.path.exists(path):
            raise DiagnosisError(f"--dynamics {path} not found: give the losses files that "
                                 "autoassist-diagnose --losses-out wrote for an early and a "
                                 "late checkpoint of a run on this corpus")
        if os.path.isdir(path):
            raise DiagnosisError(f"--dynamics {path} is a directory: give the .npz file that "
                                 "autoassist-diagnose --losses-out wrote")

