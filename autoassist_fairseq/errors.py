"""The plugin's errors under ``fairseq-train``: one clear line, not a traceback.

fairseq-train calls the task (its setup, dataset load, model build, batch iterator, step
logs), and an error the plugin raises there for the user (a stale feature file, a checkpoint
it cannot resume, a dead Assistant) would reach the user as fairseq's traceback, its message
on the last of dozens of lines. :func:`install` adds a ``sys.excepthook`` (as
torch.distributed adds its own, which wraps this one) that prints such an error as
``fairseq-train: error: MESSAGE``; every other exception goes on to the hook before it, with
its traceback. ``AUTOASSIST_TRACEBACK=1`` prints the traceback of the plugin's errors too.
fairseq's own check that a batch has a bound (``--max-tokens`` or ``--batch-size``), an
``assert`` in fairseq-train, is printed the same way (:data:`FAIRSEQ_ASSERTS`).

An error is the plugin's for the user when it is raised by a ``raise`` statement of the
plugin's own code (the innermost frame of its traceback is in this package) and is a
ValueError or OSError (the plugin's checks raise these, or their subclasses, with messages
naming the file or flag and the fix), or an :class:`~.transport.process.AssistantDied`
(whose message gives the cause and ``--assistant-fallback``). A bug shows as another type
(KeyError, TypeError, AttributeError, ...) or is raised inside a library, and keeps its
traceback.
"""

import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# fairseq-train's own checks of its flags that fairseq words as an ``assert`` (in
# fairseq_cli/train.py's main, after the plugin is imported): the assert's exact message ->
# the error printed in its place. Another wording (another fairseq) keeps its traceback.
FAIRSEQ_ASSERTS = {
    "Must specify batch size either with --max-tokens or --batch-size":
        "give --max-tokens N (the tokens a batch may hold, e.g. --max-tokens 4096) or "
        "--batch-size N (the sentences a batch may hold): fairseq-train needs a bound on each "
        "batch",
}
_installed = False


def raised_by_plugin(exc: BaseException) -> bool:
    """Whether *exc* is one of the plugin's errors for the user (see the module's doc)."""
    from .transport.process import AssistantDied

    if not isinstance(exc, (ValueError, OSError, AssistantDied)) or not str(exc):
        return False
    return _innermost_file(exc).startswith(PACKAGE_DIR + os.sep)


def message_for(exc: BaseException):
    """The one-line message for *exc*, or None where it keeps its traceback."""
    if raised_by_plugin(exc):
        return str(exc)
    if isinstance(exc, AssertionError) and str(exc) in FAIRSEQ_ASSERTS \
            and _innermost_file(exc).endswith(os.path.join("fairseq_cli", "train.py")):
        return FAIRSEQ_ASSERTS[str(exc)]
    return None


def _innermost_file(exc: BaseException) -> str:
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename)


def _program() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "fairseq"


def install() -> None:
    """Print the plugin's errors without a traceback (once; chains to the hook before)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def excepthook(kind, exc, tb):
        message = message_for(exc) if exc is not None else None
        if message is not None and os.environ.get("AUTOASSIST_TRACEBACK", "") in ("", "0"):
            sys.stderr.write(f"{_program()}: error: {message}\n")
            sys.stderr.flush()
            return
        previous(kind, exc, tb)

    sys.excepthook = excepthook
