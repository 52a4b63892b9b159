"""``autoassist-diagnose``: what to train on this corpus at a fixed budget (the command,
its output and the figures' meaning: :mod:`.cli`'s docstring, the command's ``--help``).

    scoring.py   a checkpoint's Boss losses and Assistant P(accept) over the training pairs,
                 assembled with the figures and noise shares into one result
    inputs.py    the command's inputs checked before the slow part (``DiagnosisError``)
    noise_shares.py  the corpus's noise shares (pair checks, training dynamics)
    figures.py   the figures from per-pair losses (numpy and scipy, no fairseq): oracle and
                 Assistant shares, densities, the oracle curve's rows; the verdict from
                 the noise shares
    dynamics.py  training dynamics of each pair from two checkpoints' losses
    cli.py       the command: options, one checkpoint's summary or several as a curve

The names below are what research/ and the tests use.
"""

from .cli import cli_main, format_summary, losses_paths  # noqa: F401
from .figures import (CLEAN_SHARE, CURVE_KEYS, MAX_DENSITY, NOISE_BAR,  # noqa: F401
                      REFERENCE_SHARE, curve_row, data_pass, density, oracle_figures,
                      oracle_skipped_loss, plan_commands, reducible_losses, skip_figures,
                      verdict)
from .inputs import DiagnosisError  # noqa: F401
from .noise_shares import noise_estimates  # noqa: F401
from .scoring import (ScoredPairs, boss_losses, checkpoint_position, diagnose,  # noqa: F401
                      loss_floor)
