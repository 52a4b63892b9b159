"""``autoassist-score-pairs``: the pair checks of ``autoassist-features`` on raw tab-separated
sentence pairs, for any toolkit (no fairseq binarisation, no checkout).

Reads ``SOURCE<tab>TARGET`` lines (a file, plain or ``.gz``, or stdin) and writes each line
with its scores appended, tab-separated: one column per check that runs (its continuous
score, higher: more likely noise; the order of ``--pair-checks``' list of checks), the
union's score (it ranks pairs within a batch of ``--batch-size`` pairs) and the flag (1: some
check flags the pair). ``--header`` names the columns in a first line. ``--drop-flagged``
writes instead the kept pairs alone, as read (a stdin-to-stdout filter: OpusCleaner).

What the checks learn (the two-class language identifier, the cross-language LSI space and
its random pairings, the scripts each side uses) is fitted once on a sample of at most
``--fit-pairs`` pairs (uniform, seeded) of ``--fit`` (default: the input itself); then the
input is scored in batches, so that memory stays bounded on any input (stdin is spooled to
a temporary file when it is also the fit corpus). An input of at most ``--fit-pairs`` pairs
is its own fit sample, whole, as ``autoassist-features`` fits the checks on the training
set. The pieces come from ``--spm-model``, or from a joint sentencepiece BPE model of
``--bpe-size`` pieces trained on the fit sample as ``scripts/prepare-corpus.sh`` trains one.

``--weights-out FILE`` writes one number a line for Marian's ``--data-weighting FILE
--data-weighting-type sentence``: 0 for a flagged pair, 1 for the others (``1 - flag``).

Example::

    paste corpus.en corpus.de | autoassist-score-pairs --src en --tgt de - > scored.tsv
    autoassist-score-pairs --src en --tgt de corpus.tsv.gz --drop-flagged --out clean.tsv
"""

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time
from itertools import islice

import numpy as np

from ..console import configure_logging
from ..checks.settings import add_settings_arguments, settings_from_args
from ..prepare.text_files import open_text
from .pair_files import InputError, read_pairs, sample_pairs
from .pair_scorer import BATCH_PAIRS, BPE_SIZE, FIT_PAIRS, PairScorer

logger = logging.getLogger("autoassist_fairseq.score_pairs")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoassist-score-pairs",
        description="\n\n".join(__doc__.split("\n\n")[1:4]).replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="columns written after the pair: one score per check that runs ("
               "<check>_score), union_score, flag (0/1)\n\nexamples:\n"
               "  paste corpus.en corpus.de | autoassist-score-pairs --src en --tgt de - > "
               "scored.tsv\n"
               "  autoassist-score-pairs --src en --tgt de corpus.tsv.gz --drop-flagged "
               "--out clean.tsv --weights-out weights.txt")
    parser.add_argument("input", nargs="?", default="-",
                        help="tab-separated pairs, SOURCE<tab>TARGET a line (plain or .gz; "
                             "'-': stdin; default: -)")
    parser.add_argument("--src", required=True,
                        help="source language code, e.g. en (the langid check's)")
    parser.add_argument("--tgt", required=True, help="target language code, e.g. de")
    parser.add_argument("--out", default="-",
                        help="where to write the scored pairs (.gz: gzip; '-': stdout; "
                             "default: -)")
    parser.add_argument("--fit", default=None, metavar="TSV",
                        help="fit the checks (and the sentencepiece model) on a sample of this "
                             "corpus of tab-separated pairs (default: the input)")
    parser.add_argument("--fit-pairs", type=int, default=FIT_PAIRS, metavar="N",
                        help=f"pairs of the fit corpus sampled to fit on (default: {FIT_PAIRS})")
    parser.add_argument("--batch-size", type=int, default=BATCH_PAIRS, metavar="N",
                        help=f"pairs scored at once (default: {BATCH_PAIRS})")
    parser.add_argument("--spm-model", default=None, metavar="MODEL",
                        help="sentencepiece model to encode both sides with (default: a joint "
                             "BPE model trained on the fit sample)")
    parser.add_argument("--bpe-size", type=int, default=BPE_SIZE,
                        help="pieces of the trained sentencepiece model, as "
                             f"prepare-corpus.sh (default: {BPE_SIZE})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fit sample (default: 0)")
    parser.add_argument("--threads", type=int, default=1,
                        help="sentencepiece threads (default: 1)")
    parser.add_argument("--drop-flagged", action="store_true",
                        help="write only the pairs no check flags, as read (no score columns)")
    parser.add_argument("--header", action="store_true",
                        help="write a first line naming the columns (not with --drop-flagged)")
    parser.add_argument("--weights-out", default=None, metavar="FILE",
                        help="also write one weight a line, 1 - flag, for Marian's "
                             "--data-weighting FILE --data-weighting-type sentence")
    parser.add_argument("--quiet", action="store_true", help="log errors only")
    add_settings_arguments(parser)
    return parser


def _check_args(args) -> None:
    for name in ("fit_pairs", "batch_size", "bpe_size", "threads"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1 (got "
                             f"{getattr(args, name)})")
    if args.drop_flagged and args.header:
        raise ValueError("--header names score columns, which --drop-flagged does not write; "
                         "give one of them")
    for name, path in (("INPUT", args.input), ("--fit", args.fit)):
        if path not in (None, "-") and not os.path.isfile(path):
            what = "is a folder, not a file" if os.path.isdir(path) else "not found"
            raise FileNotFoundError(f"no such file: {path} ({name} {what}); give a file of "
                                    "tab-separated pairs, SOURCE<tab>TARGET a line (plain or "
                                    ".gz), or - for stdin")
    if args.spm_model and not os.path.isfile(args.spm_model):
        raise FileNotFoundError(f"sentencepiece model not found: {args.spm_model}; give "
                                "--spm-model the .model file of spm_train, or leave it out to "
                                "train one on the fit sample")
    for path in (args.out, args.weights_out):
        if path not in (None, "-"):
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise FileNotFoundError(f"no such folder for {path}: {folder}; create it "
                                        "first (mkdir -p), or give a path in a folder that "
                                        "exists")


def score_pairs(args, settings) -> dict:
    """Fit, then score the input batch by batch; returns counts for the log."""
    start = time.perf_counter()
    spool = None
    # the input line of each fit sample pair, where the sample is drawn from the input: those
    # pairs are scored from the pieces the fit encoded (each line is encoded once)
    lines: list = []
    try:
        if args.fit is None and args.input == "-":
            # stdin is read once: spooled to disk while sampled, then scored from there
            spool = tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="\n",
                                                suffix=".tsv", delete=False)
            with open_text("-") as f:
                sample, n_fit = sample_pairs(
                    read_pairs(f, "stdin"), args.fit_pairs, args.seed,
                    keep=lambda pair: spool.write(f"{pair[0]}\t{pair[1]}\n"), lines=lines)
            spool.close()
            source, name = spool.name, "stdin"
        else:
            fit = args.fit or args.input
            with open_text(fit) as f:
                sample, n_fit = sample_pairs(read_pairs(f, fit), args.fit_pairs, args.seed,
                                             lines=lines if args.fit is None else None)
            source, name = args.input, args.input
        if n_fit == 0:
            raise InputError(f"{args.fit or name}: no pairs (empty input); give tab-separated "
                             "pairs, SOURCE<tab>TARGET a line")
        scorer = PairScorer(sample, args.src, args.tgt, settings, args.spm_model,
                            args.bpe_size, args.threads, keep_pieces=bool(lines))
        # the sample is the whole input, in input order: scored from it, not read again
        whole = bool(lines) and n_fit <= args.fit_pairs
        if not whole:
            del sample
        # the sample's input lines, sorted, and their rows in the sample
        order = np.argsort(np.asarray(lines, dtype=np.int64), kind="stable")
        sample_lines, sample_rows = np.asarray(lines, dtype=np.int64)[order], order
        del lines, order
        fitted = time.perf_counter()
        n = flagged = 0
        out = open_text(args.out, "w")
        weights = open(args.weights_out, "w") if args.weights_out else None
        try:
            if args.header:
                out.write("\t".join([args.src, args.tgt] +
                                    [f"{c}_score" for c in scorer.names] +
                                    ["union_score", "flag"]) + "\n")
            with (contextlib.nullcontext() if whole else open_text(source)) as f:
                pairs = iter(sample) if whole else read_pairs(f, name)
                while True:
                    batch = list(islice(pairs, args.batch_size))
                    if not batch:
                        break
                    first, last = np.searchsorted(sample_lines, [n, n + len(batch)])
                    fit_rows = None
                    if last > first:
                        fit_rows = np.full(len(batch), -1, dtype=np.int64)
                        fit_rows[sample_lines[first:last] - n] = sample_rows[first:last]
                    sources, targets = [s for s, _ in batch], [t for _, t in batch]
                    scored = scorer.score(sources, targets, fit_rows)
                    if args.drop_flagged:
                        out.writelines(f"{s}\t{t}\n" for (s, t), f in
                                       zip(batch, scored.flags.tolist()) if not f)
                    else:
                        # a score is written as f"{x:.6g}" (which "%.6g" % x is), a line per pair
                        columns = [scored.scores[c].tolist() for c in scorer.names] + \
                            [scored.union.astype(np.float64).tolist(),
                             scored.flags.astype(int).tolist()]
                        line = "%s\t%s" + "\t%.6g" * (len(columns) - 1) + "\t%d\n"
                        out.writelines(line % row for row in zip(sources, targets, *columns))
                    if weights is not None:
                        weights.writelines("0\n" if x else "1\n" for x in scored.flags)
                    n += len(batch)
                    flagged += int(scored.flags.sum())
            if n == 0:
                raise InputError(f"{name}: no pairs (empty input)")
        finally:
            if args.out == "-":
                out.flush()
            else:
                out.close()
            if weights is not None:
                weights.close()
    finally:
        if spool is not None:
            spool.close()
            os.unlink(spool.name)
    end = time.perf_counter()
    return {"pairs": n, "flagged": flagged, "fit_pairs": min(n_fit, args.fit_pairs),
            "fit_seconds": fitted - start, "score_seconds": end - fitted,
            "seconds": end - start}


def cli_main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    configure_logging(logging.ERROR if args.quiet else logging.INFO, sys.stderr, force=True)
    prog = "autoassist-score-pairs"
    try:
        settings = settings_from_args(args)
        _check_args(args)
        if "lexical" in settings.checks:
            raise ValueError("the lexical check is fitted and scored in one call on a prepared "
                             "corpus (autoassist-features); leave it out of --pair-checks")
        stats = score_pairs(args, settings)
    except BrokenPipeError:  # the reader stopped early (| head): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (InputError, FileNotFoundError, ValueError, OSError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    logger.info(f"{stats['pairs']} pairs, {stats['flagged']} flagged "
                f"({stats['flagged'] / max(stats['pairs'], 1):.2%}); fitted on "
                f"{stats['fit_pairs']} pairs in {stats['fit_seconds']:.1f} s, scored in "
                f"{stats['score_seconds']:.1f} s; {stats['pairs'] / stats['seconds']:.0f} "
                "pairs/s in all")
    return 0


if __name__ == "__main__":
    sys.exit(cli_main())
