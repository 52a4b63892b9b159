"""``autoassist-diagnose``: can skipping pay on this corpus? (the command, its output and the
figures' meaning: :mod:`.cli`'s docstring, the command's ``--help``).

    scoring.py   a checkpoint's Boss losses and Assistant P(accept) over the training pairs
    figures.py   the figures from per-pair losses (numpy and scipy, no fairseq): oracle and
                 Assistant shares, densities, the verdict, the oracle curve's rows
    cli.py       the command: options, one checkpoint's summary or several as a curve

The names below are what research/ and the tests use.
"""

from .cli import cli_main, format_summary, losses_paths  # noqa: F401
from .figures import (CURVE_KEYS, MAX_DENSITY, MIN_SKIP_SHARE, REFERENCE_SHARE,  # noqa: F401
                      curve_row, data_pass, density, oracle_figures, oracle_skipped_loss,
                      reducible_losses, skip_figures, verdict)
from .scoring import (DiagnosisError, ScoredPairs, boss_losses,  # noqa: F401
                      checkpoint_position, diagnose, loss_floor)
