"""Baseline, AutoAssist and a random-skip control at equal compute (``python -m
research.bench``; see its --help). One job per module:

* ``flags``: the fairseq-train command line of each arm (configs, flags, languages);
* ``budgets``: the baseline's batches, tokens and updates (fairseq's own batching);
* ``runs``: launching fairseq-train and evaluate.sh, reusing finished runs;
* ``logs``: parsing fairseq's train.log into records and curves;
* ``metrics``: pure figures of the curves (crossings, values at equal compute, means);
* ``report``: results.md and curves.png;
* ``equal_compute``: every arm of every seed, into results.json;
* ``cli``: the command line.
"""

import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
USER_DIR = REPO / "autoassist_fairseq"
CONFIGS = REPO / "configs"


class BenchmarkError(RuntimeError):
    """A failure the user can act on; the command line prints it without a traceback."""


def doc_parser(doc: str, example: int = 2) -> argparse.ArgumentParser:
    """A research script's parser from its module docstring: the first paragraph describes
    it, paragraph *example* (a command) is the --help's example."""
    paragraphs = doc.split("\n\n")
    return argparse.ArgumentParser(description=paragraphs[0],
                                   epilog="example:\n" + paragraphs[example],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
