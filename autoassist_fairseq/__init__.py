"""autoassist-fairseq: AutoAssist (Zhang, Yu & Dhillon, NeurIPS 2019) for fairseq.

The data flow follows the folders: ``features`` -> ``assistant`` -> ``data`` (batches) ->
``tasks`` (the Boss's training step) -> ``losses`` -> back to ``assistant``.

Registering with fairseq (:func:`register`) adds the ``autoassist_translation`` task and the
``rex`` learning-rate schedule (``optim``) to fairseq's registries, ``compat`` lets fairseq
load its checkpoints on torch >= 2.6, and ``errors`` prints the plugin's errors for the user
under ``fairseq-train`` as one line, not a traceback. Importing the package registers it when fairseq is
imported already, as it always is under ``--user-dir autoassist_fairseq`` (fairseq's
``utils.import_user_module`` imports the package after fairseq) and in any script that
imports fairseq first. Otherwise importing the package imports neither torch nor fairseq,
so that the raw-text tools (``autoassist-score-pairs``, ``autoassist-check-report``) do not
pay seconds of a core for them; the package's commands that load a checkpoint call
:func:`register` themselves.

A script that imports the package (any of its modules) before fairseq and then runs fairseq
in the same process calls :func:`register` (or imports fairseq first): ``--user-dir`` imports
no module that is already imported, so it cannot register a package imported before it.
"""

import sys


def register() -> None:
    """Register with fairseq: the ``autoassist_translation`` task, the ``rex`` schedule and
    ``compat``'s fixes (imports torch and fairseq; once: a second call does nothing)."""
    from . import compat  # noqa: F401
    from . import errors
    from . import optim  # noqa: F401
    from . import tasks  # noqa: F401

    errors.install()


if "fairseq" in sys.modules:
    register()
