"""``autoassist-check-report``: how well the pair checks find labelled noise.

The checks fit on the corpus they check, so labelled pairs alone would be a corpus made of
noise. The command mixes them into a clean corpus of the same language pair at a chosen
share, prepares the mix as ``scripts/prepare-corpus.sh`` does (the same cleaning step,
joint sentencepiece BPE, the same subword filters), counts the subwords of each side over one
joined vocabulary (what ``fairseq-preprocess --joined-dictionary`` binarises) and runs
:func:`..checks.columns.pair_check_columns`, the function ``autoassist-features`` runs. It
then scores every check on the labelled pairs:

- ``flag_rate[check][label]``: share of each label's pairs flagged by a check (of those that
  reached the checks; also for the groups ``A+L`` and ``V+F``); ``cleaning`` is the share
  the cleaning step dropped, ``union`` the share dropped or flagged by any check;
- ``flag_rate_by_kind[check][kind]``, ``counts_by_kind``: the same per value of the labelled
  file's optional ``kind`` column (e.g. the noise kinds of ``research/add_noise.py
  --labelled-out``), over the labelled pairs alone;
- ``precision`` / ``recall`` of the union for noise (``A``, ``L``, ``T``) against valid
  translations (``V``, ``F``);
- ``auc[name]``: area under the ROC curve of each score for ``V``+``F`` against ``A``+``L``
  (scikit-learn), for each check's continuous score, the union
  (:func:`..checks.flags.union_score`; ``union_max_margin``: the union's pairs ranked
  by their largest margin alone) and ``bicleaner``; pairs the cleaning dropped rank above all;
- ``noise_found_at_valid_share[score][s]``: the share of ``A``+``L`` pairs above the bar of
  that score which ``V``+``F`` pairs pass but for a share s (0.05, 0.1, 0.2, 0.3, 0.5);
- ``auc_halves``: those scores' AUCs on the even and on the odd rows of the labelled file,
  two samples of it;
- ``opusfilter``: OpusFilter's common heuristic filters on the same pairs, side by side
  (:func:`.opusfilter_figures.opusfilter_report`; where opusfilter is installed, unless
  ``--no-opusfilter``);
- ``intervals[figure]``: for the goals' figures (:func:`.check_figures.key_figures`), how far
  each would move on another labelled sample of the same size drawn the same way
  (:mod:`.bootstrap` over the labelled pairs, ``--bootstrap`` resamples), OpusFilter's
  heuristics' among them (``auc opusfilter union``, ...), each resample's figures on the same
  rows for all;
- with ``--dynamics-passes K``, the Boss's training dynamics beside the checks: ``dynamics``
  and ``union_dynamics`` under ``auc``, ``flag_rate`` and ``noise_found_at_valid_share``,
  with their intervals (:mod:`.check_dynamics`);
- ``pairs_per_cpu_second``: the ``pair_check_columns`` call, the preparation with it, and
  OpusFilter's heuristics (``cpu_seconds``: the preparation's and the checks').

The pipeline's parts: :mod:`.labelled_pairs` (read, mix), :mod:`.mix_preparation`
(prepare, count), :mod:`.check_figures` (the figures, ``intervals`` among them) and
:mod:`.opusfilter_figures` (the ``opusfilter`` block); this module runs them in order.

Example::

    autoassist-check-report labelled.tsv.gz --clean tatoeba/train wmt/newstest2012 \\
        --src en --tgt de --out report.json
"""

import argparse
import gzip
import importlib.util
import json
import logging
import os
import sys
import tempfile
import time

import numpy as np

from ..console import configure_logging
from ..checks.settings import check_available
from ..checks.columns import add_settings_arguments, check_scores, \
    pair_check_columns, settings_from_args, union_score
from .check_figures import flagged_union, report, report_intervals
from .labelled_pairs import mix, read_clean, read_labelled
from .mix_preparation import joined_counts, prepare
from .opusfilter_figures import opusfilter_report

logger = logging.getLogger("autoassist_fairseq.check_report")


def write_pairs(path, row, labels, dropped, flags, scores, union_flag, union, bicleaner,
                src_lines, tgt_lines, langs) -> None:
    """Every labelled pair, in the labelled file's order, as a TSV (gzip where *path* ends
    in ``.gz``): its row, label, whether the cleaning dropped it, each check's flag and score
    (empty where it did not reach the checks), the union's flag
    (:func:`.check_figures.flagged_union`) and score, Bicleaner's score and the two sides:
    what a check flags, to read."""
    names = sorted(flags)
    opener = gzip.open if path.endswith(".gz") else open
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def number(x):
        return "" if x is None or np.isnan(x) else f"{x:.4g}"

    with opener(path, "wt", encoding="utf-8") as f:
        f.write("\t".join(["row", "label", "dropped", *[f"{n}_flag" for n in names],
                           *[f"{n}_score" for n in names], "union_flag", "union_score",
                           "bicleaner", *langs]) + "\n")
        for i in np.flatnonzero(row >= 0)[np.argsort(row[row >= 0], kind="stable")]:
            reached = not dropped[i]
            f.write("\t".join([
                str(row[i]), labels[i], str(int(dropped[i])),
                *[str(int(flags[n][i])) if reached else "" for n in names],
                *[number(scores[n][i]) if reached else "" for n in names],
                str(int(union_flag[i])), number(union[i]) if reached else "",
                "" if bicleaner is None else number(bicleaner[i]),
                src_lines[i].replace("\t", " "), tgt_lines[i].replace("\t", " ")]) + "\n")


def check_report(args) -> dict:
    labelled = read_labelled(args.labelled, args.src, args.tgt)
    clean_src, clean_tgt = read_clean(args.clean, args.src, args.tgt)
    src_lines, tgt_lines, labels, row = mix(labelled, clean_src, clean_tgt, args.share, args.seed)
    settings = settings_from_args(args)
    start = time.process_time()
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        kept, (src_pieces, tgt_pieces) = prepare(
            src_lines, tgt_lines, args.src, args.tgt, workdir, args.bpe_size,
            0.0 if args.no_ratio_filter else args.ratio, args.max_chars, args.max_len)
    counts, symbols, pieces = joined_counts(src_pieces, tgt_pieces)
    prepared = time.process_time()
    checks = pair_check_columns(*counts, symbols=symbols, settings=settings, texts=pieces,
                                langs=(args.src, args.tgt))
    checked = time.process_time()
    labels = np.asarray(labels)
    n = len(labels)
    dropped = np.ones(n, dtype=bool)
    dropped[kept] = False
    flags, scores = {}, {}
    # dropped pairs: above all (+inf)
    union_scores = {"union": np.full(n, np.inf), "union_max_margin": np.full(n, np.inf)}
    per_check, margin = check_scores(checks, settings)
    for name in per_check:
        f, s = np.zeros(n, dtype=bool), np.full(n, np.nan)
        f[kept], s[kept] = per_check[name][1], per_check[name][0]
        flags[name], scores[name] = f, s
    union_scores["union"][kept] = union_score(per_check, margin)
    union_scores["union_max_margin"][kept] = margin
    bicleaner = None
    if labelled["bicleaner"] is not None:
        bicleaner = np.full(n, np.nan)
        bicleaner[row >= 0] = labelled["bicleaner"][row[row >= 0]]
    kinds = None
    if labelled["kind"] is not None:
        kinds = np.array([labelled["kind"][r] if r >= 0 else None for r in row], dtype=object)
    out = report(labels, dropped, flags, scores, union_scores, bicleaner,
                 half=np.where(row >= 0, row % 2, -1), kinds=kinds)
    union = flagged_union(dropped, flags)
    # pairs a CPU second (process time: all threads of this process; one core under
    # OMP_NUM_THREADS=1): the pair_check_columns call on the pairs that reached it, and the
    # preparation (cleaning, sentencepiece training and encoding, counts) with it on the mix
    out["pairs_per_cpu_second"] = {
        "pair_checks": len(kept) / max(checked - prepared, 1e-9),
        "preparation and pair_checks": n / max(checked - start, 1e-9)}
    out["cpu_seconds"] = {"preparation": prepared - start, "pair_checks": checked - prepared}
    heuristics = None
    if not args.no_opusfilter and importlib.util.find_spec("opusfilter") is not None:
        out["opusfilter"], heuristics = opusfilter_report(labels, src_lines, tgt_lines,
                                                          args.src, args.tgt)
        out["pairs_per_cpu_second"]["opusfilter heuristics"] = \
            out["opusfilter"]["pairs_per_cpu_second"]
    if args.pairs_out:
        write_pairs(args.pairs_out, row, labels, dropped, flags, scores, union,
                    union_scores["union"], bicleaner, src_lines, tgt_lines, (args.src, args.tgt))
    drawn = np.flatnonzero(row >= 0)  # a new labelled sample; the clean pairs stay
    if args.bootstrap:
        out["intervals"] = report_intervals(labels, drawn, union, union_scores["union"],
                                            bicleaner, heuristics, args.bootstrap, args.seed)
    if args.dynamics_passes:
        from .check_dynamics import add_dynamics, dynamics_columns, train_dynamics

        with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
            score, dyn_flags = train_dynamics(workdir, args.src, args.tgt, src_pieces,
                                              tgt_pieces, args.dynamics_passes)
        columns = dynamics_columns(kept, n, dropped, union, union_scores["union"], score,
                                   dyn_flags)
        add_dynamics(out, labels, dropped, columns, args.dynamics_passes, drawn,
                     args.bootstrap, args.seed)
    out.update({
        "labelled": args.labelled, "clean_corpus": list(args.clean),
        "share": args.share, "pairs": {"labelled": int(np.count_nonzero(row >= 0)),
                                       "clean": int(np.count_nonzero(row < 0))},
        "preparation": {"bpe_size": args.bpe_size, "max_chars": args.max_chars,
                        "max_len": args.max_len,
                        "ratio": None if args.no_ratio_filter else args.ratio},
        "pair_checks": settings.to_dict(), "seed": args.seed,
    })
    return out


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoassist-check-report", description=__doc__.split("\n\n")[0] + " Mixes "
        "labelled pairs into a clean corpus, prepares and checks the mix as scripts/"
        "prepare-corpus.sh and autoassist-features do, and writes per-label flag rates, "
        "precision, recall and ROC AUCs as JSON.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  autoassist-check-report labelled.tsv.gz --clean tatoeba/train "
               "wmt/newstest2012 --src en --tgt de --out report.json")
    parser.add_argument("labelled", help="TSV (plain or .gz) with a header line and columns "
                        "named as --src and --tgt, 'label' (V, F, A, L, T, MT, E) and optional "
                        "'bicleaner' and 'kind' (flag rates per kind too, e.g. research/"
                        "add_noise.py --labelled-out)")
    parser.add_argument("--clean", nargs="+", required=True, metavar="PREFIX",
                        help="clean corpus PREFIX.SRC / PREFIX.TGT (plain or .gz); several are "
                             "pooled")
    parser.add_argument("--src", required=True, help="source language (column and file suffix)")
    parser.add_argument("--tgt", required=True, help="target language (column and file suffix)")
    parser.add_argument("--out", required=True, help="the JSON report to write")
    parser.add_argument("--share", type=float, default=0.1,
                        help="share of labelled pairs in the mix; clean pairs are sampled to "
                             "make it up (default: 0.1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default: 0)")
    parser.add_argument("--bpe-size", type=int, default=8000,
                        help="sentencepiece vocabulary, as prepare-corpus.sh (default: 8000)")
    parser.add_argument("--ratio", type=float, default=1.5,
                        help="the piece-ratio filter, as prepare-corpus.sh (default: 1.5)")
    parser.add_argument("--no-ratio-filter", action="store_true",
                        help="no piece-ratio filter, as prepare-corpus.sh")
    parser.add_argument("--max-len", type=int, default=250,
                        help="most pieces a side, as prepare-corpus.sh (default: 250)")
    parser.add_argument("--max-chars", type=int, default=2000,
                        help="most characters a side, as prepare-corpus.sh (default: 2000)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="resamples of the labelled pairs for 'intervals': how far each "
                             "goal's figure would move on another sample of the same size "
                             "(0: none; default: 1000)")
    parser.add_argument("--workdir", default=None,
                        help="folder for the temporary prepared text (default: the system's)")
    parser.add_argument("--pairs-out", default=None, metavar="TSV",
                        help="also write every labelled pair with each check's flag and score, "
                             "the union's, Bicleaner's and its two sides (gzip for .gz)")
    parser.add_argument("--no-opusfilter", action="store_true",
                        help="leave out the 'opusfilter' block: OpusFilter's heuristic filters "
                             "on the same pairs (run where opusfilter is installed)")
    parser.add_argument("--dynamics-passes", type=int, default=0, metavar="K",
                        help="also train the small Boss (CPU) with the plugin K passes over the "
                             "kept pairs and report the training dynamics between passes 1 "
                             "and K ('dynamics', and 'union_dynamics' with the checks; "
                             "K >= 2; default: 0, none)")
    add_settings_arguments(parser)
    return parser


def cli_main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    configure_logging()
    if not 0.0 < args.share < 1.0:
        logger.error(f"--share must be between 0 and 1 (got {args.share}): give the share of "
                     "labelled pairs in the mix, e.g. --share 0.1")
        return 2
    if args.bootstrap < 0 or args.bootstrap == 1:
        logger.error(f"--bootstrap needs 0 (no intervals) or at least 2 resamples (got "
                     f"{args.bootstrap})")
        return 2
    if args.dynamics_passes and args.dynamics_passes < 2:
        logger.error(f"--dynamics-passes {args.dynamics_passes}: the dynamics compare the "
                     "losses of pass 1 with a later pass; give 2 or more (e.g. 4), or 0 for none")
        return 2
    if args.bpe_size < 1:
        logger.error(f"--bpe-size must be at least 1 sentencepiece piece (got {args.bpe_size}; "
                     "prepare-corpus.sh's default: 8000)")
        return 2
    try:
        check_available(settings_from_args(args))  # names, bars and py3langid, before the work
    except ValueError as err:
        logger.error(str(err))
        return 2
    try:
        out = check_report(args)
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        logger.error(str(err))
        return 1
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    u = out["flag_rate"]["union"]
    logger.info(f"wrote {args.out}: union flags " + ", ".join(f"{k} {v:.1%}" for k, v in u.items())
                + f"; precision {out['precision']:.3f}, recall {out['recall']:.3f}; AUC "
                + ", ".join(f"{k} {v:.3f}" for k, v in out["auc"].items())
                + (f"; OpusFilter's heuristics: union AUC {out['opusfilter']['auc']['union']:.3f}"
                   if "opusfilter" in out else ""))
    if "flag_rate_by_kind" in out:
        logger.info("union flags per kind: " + ", ".join(
            f"{k} {v:.1%}" for k, v in out["flag_rate_by_kind"]["union"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(cli_main())
