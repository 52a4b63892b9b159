"""autoassist-fairseq: AutoAssist (Zhang, Yu & Dhillon, NeurIPS 2019) for fairseq.

The data flow follows the folders: ``features`` -> ``assistant`` -> ``data`` (batches) ->
``tasks`` (the Boss's training step) -> ``losses`` -> back to ``assistant``.
Importing the package registers the ``autoassist_translation`` task and the ``rex``
learning-rate schedule (``optim``); ``compat`` lets fairseq load its checkpoints on
torch >= 2.6.
"""

from . import compat  # noqa: F401
from . import optim  # noqa: F401
from . import tasks  # noqa: F401
