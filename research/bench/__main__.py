"""``python -m research.bench``: the equal-compute benchmark (see research/bench/cli.py)."""

from .cli import entry

entry()
