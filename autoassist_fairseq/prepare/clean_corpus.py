"""Copy one split of a parallel corpus (plain or .gz) to plain text, optionally filtered.

With ``--filter`` (training data) a pair is dropped when a side is empty, has more than
``--max-chars`` characters, fewer than ``--min-len`` or more than ``--max-len`` tokens
(whitespace-separated; on sentencepiece output these are the subword pieces), or when
its length ratio is out of line (the rules of Moses' ``clean-corpus-n.perl``). Pairs
stay aligned. Without ``--filter`` (valid/test sets) every line is kept, byte for byte.

The length ratio: by default a pair is dropped when ``src/tgt`` differs from the corpus's
median ``src/tgt`` by more than a factor of ``--ratio``. With ``--absolute-ratio`` the
median is taken as 1 (Moses' rule: the longer side has more than ``--ratio`` times the
tokens of the shorter one). A short pair may differ from the ratio by ``--ratio-slack``
tokens more (default 2 for the median rule, 0 for ``--absolute-ratio``): one or two words
more or fewer move the ratio of a 3-word sentence by a factor of 1.5 and more, which is
normal for a translation, not a sign of misalignment. The median matters for language pairs that are segmented
differently (e.g. pre-segmented Japanese against English has systematically more
tokens on one side): Moses' rule drops a large share of such a clean corpus, while its
median-relative form drops only the pairs whose ratio is unusual for the corpus. For
en-de on subword pieces the median is about 1 and both rules agree.

When more than ``--warn-above`` of the pairs are dropped, a warning names each rule,
how many pairs it dropped, and the flag that changes it.

In both modes the two sides must have the same number of lines; otherwise the script
stops with a message naming both files and their counts (exit status 2). A missing
input stops with the file named (exit status 2).

Lines are split on ``\\n`` only, so a stray carriage return inside a sentence (common
in crawled data) does not shift the alignment. With ``--filter`` the kept text is also
whitespace-normalised (runs of spaces, tabs and other separators become one space).
"""

import argparse
import os
import sys
from typing import Optional

import numpy as np

from .text_files import count_lines, lengths, normalise, open_text, read_line_ids

EPILOG = """example (the pre-BPE and the subword filters of scripts/prepare-corpus.sh):
  python scripts/clean_corpus.py --in-src raw/train.ja.gz --in-tgt raw/train.en.gz \\
      --out-src out/raw/train.ja --out-tgt out/raw/train.en --filter \\
      --max-len 0 --no-ratio-filter --line-ids-out out/raw/train.kept-lines
  python scripts/clean_corpus.py --in-src out/spm/train.unfiltered.ja \\
      --in-tgt out/spm/train.unfiltered.en --out-src out/spm/train.ja \\
      --out-tgt out/spm/train.en --filter --max-len 250 --ratio 1.5 \\
      --line-ids-in out/raw/train.kept-lines --line-ids-out out/train.kept-lines"""

# Each filter rule: (what it drops, the flags that change it).
RULES = {
    "empty": ("with an empty side", "always dropped: an empty side cannot be trained on"),
    "chars": ("with a side over {max_chars} characters", "change with --max-chars N"),
    "length": ("with a side under {min_len} or over {max_len} tokens",
               "change with --min-len N / --max-len N"),
    "ratio": ("with a src/tgt token ratio off {center_text} by more than a factor {ratio}"
              "{slack_text}",
              "change with --ratio R, --absolute-ratio or --no-ratio-filter (or --ratio-slack N)"),
}


def pair_rule(src_tokens: int, tgt_tokens: int, src_chars: int, tgt_chars: int,
              min_len: int, max_len: int, max_chars: int, ratio: float,
              center: float, slack: float = 0.0) -> Optional[str]:
    """The first rule of :data:`RULES` that drops a pair, or None to keep it."""
    if src_tokens == 0 or tgt_tokens == 0:
        return "empty"
    if max_chars and (src_chars > max_chars or tgt_chars > max_chars):
        return "chars"
    if src_tokens < min_len or tgt_tokens < min_len or \
            (max_len and (src_tokens > max_len or tgt_tokens > max_len)):
        return "length"
    if ratio and (src_tokens > ratio * center * tgt_tokens + slack or
                  center * tgt_tokens > ratio * src_tokens + slack):
        return "ratio"
    return None


def median_ratio(src_tokens: np.ndarray, tgt_tokens: np.ndarray) -> float:
    """The median ``src/tgt`` token ratio of the non-empty pairs (1.0 when there are none).

    Computed on logarithms, so that swapping the sides gives the reciprocal.
    """
    ok = (src_tokens > 0) & (tgt_tokens > 0)
    if not ok.any():
        return 1.0
    return float(np.exp(np.median(np.log(src_tokens[ok] / tgt_tokens[ok]))))


def report(counts: dict, n: int, kept: int, args, center: float) -> None:
    """Print how many pairs each rule dropped; warn when too many were dropped."""
    dropped = n - kept
    center_text = ("1 (--absolute-ratio)" if args.absolute_ratio
                   else f"the corpus median {center:.3f}")
    names = dict(max_chars=args.max_chars, min_len=args.min_len,
                 max_len=args.max_len or "no limit", ratio=args.ratio, center_text=center_text,
                 slack_text=f" (and {args.ratio_slack:g} tokens)" if args.ratio_slack else "")
    parts = [f"{counts[r]} {RULES[r][0].format(**names)}" for r in RULES if counts[r]]
    print(f"kept {kept} of {n} pairs ({dropped} dropped{': ' if parts else ''}"
          f"{'; '.join(parts)}) -> {args.out_src}, {args.out_tgt}")
    if n and dropped > args.warn_above * n:
        lines = [f"WARNING: {dropped} of {n} pairs ({dropped / n:.1%}) were dropped, more than "
                 f"{args.warn_above:.0%}. Check that the filters suit this language pair:"]
        for r in RULES:
            if counts[r]:
                lines.append(f"  {counts[r]} pairs ({counts[r] / n:.1%}): "
                             f"{RULES[r][0].format(**names)}; {RULES[r][1]}")
        print("\n".join(lines), file=sys.stderr)


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-src", required=True,
                        help="source-side input, plain text or .gz, one sentence per line")
    parser.add_argument("--in-tgt", required=True,
                        help="target-side input, line N translating line N of --in-src")
    parser.add_argument("--out-src", required=True, help="where to write the kept source lines")
    parser.add_argument("--out-tgt", required=True, help="where to write the kept target lines")
    parser.add_argument("--filter", action="store_true",
                        help="apply the filters below (training data); without it every line "
                             "is copied unchanged (valid/test references)")
    parser.add_argument("--min-len", type=int, default=1,
                        help="drop a pair with a side of fewer tokens (default: 1)")
    parser.add_argument("--max-len", type=int, default=250,
                        help="drop a pair with a side of more tokens; 0 for no limit "
                             "(default: 250)")
    parser.add_argument("--max-chars", type=int, default=0,
                        help="drop a pair with a side of more characters; 0 for no limit "
                             "(default: 0)")
    parser.add_argument("--ratio", type=float, default=1.5,
                        help="drop a pair whose src/tgt token ratio differs from the corpus "
                             "median (or from 1 with --absolute-ratio) by more than this "
                             "factor (default: 1.5)")
    parser.add_argument("--no-ratio-filter", action="store_true",
                        help="keep pairs whatever their length ratio")
    parser.add_argument("--absolute-ratio", action="store_true",
                        help="compare the ratio with 1 instead of the corpus median "
                             "(Moses' clean-corpus-n rule; right only for pairs of similar "
                             "segmentation)")
    parser.add_argument("--ratio-slack", type=float, default=None,
                        help="tokens a side may have beyond the ratio rule, so that a word more "
                             "or less does not drop a short pair (default: 2; 0 with "
                             "--absolute-ratio, Moses' rule)")
    parser.add_argument("--line-ids-in", default=None,
                        help="file of one id per input line (the --line-ids-out of an earlier "
                             "filter); default: the 0-based input line numbers")
    parser.add_argument("--line-ids-out", default=None,
                        help="write the id of every kept pair here, one per line, in order")
    parser.add_argument("--warn-above", type=float, default=0.10,
                        help="warn when more than this share of the pairs is dropped "
                             "(default: 0.1)")
    return parser


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    if args.ratio_slack is None:
        args.ratio_slack = 0.0 if args.absolute_ratio else 2.0
    if args.no_ratio_filter:
        args.ratio = 0.0
    elif args.ratio < 1.0:
        print(f"ERROR: --ratio must be at least 1 (got {args.ratio}); use --no-ratio-filter "
              "to turn the ratio rule off", file=sys.stderr)
        return 2

    for path in (args.in_src, args.in_tgt) + ((args.line_ids_in,) if args.line_ids_in else ()):
        if not os.path.isfile(path):
            print(f"ERROR: missing input file: {path}", file=sys.stderr)
            return 2
    n_src, n_tgt = count_lines(args.in_src), count_lines(args.in_tgt)
    if n_src != n_tgt:
        print(f"ERROR: line-count mismatch: {args.in_src} has {n_src} lines but "
              f"{args.in_tgt} has {n_tgt}", file=sys.stderr)
        return 2
    try:
        ids = read_line_ids(args.line_ids_in, n_src) if args.line_ids_in else range(n_src)
    except ValueError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2

    keep = np.ones(n_src, dtype=bool)
    counts = dict.fromkeys(RULES, 0)
    center = 1.0
    if args.filter:
        src_tok, src_chars = lengths(args.in_src)
        tgt_tok, tgt_chars = lengths(args.in_tgt)
        # the median ratio of the pairs that the other rules keep
        rule = [pair_rule(*row, args.min_len, args.max_len, args.max_chars, 0.0, 1.0)
                for row in zip(src_tok, tgt_tok, src_chars, tgt_chars)]
        ok = np.array([r is None for r in rule], dtype=bool)
        if args.ratio and not args.absolute_ratio:
            center = median_ratio(src_tok[ok], tgt_tok[ok])
        for i in range(n_src):
            if rule[i] is None and args.ratio:
                rule[i] = pair_rule(src_tok[i], tgt_tok[i], 0, 0, 0, 0, 0, args.ratio, center,
                                    args.ratio_slack)
            if rule[i] is not None:
                keep[i] = False
                counts[rule[i]] += 1

    for path in (args.out_src, args.out_tgt) + ((args.line_ids_out,) if args.line_ids_out else ()):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp_src, tmp_tgt = args.out_src + ".tmp", args.out_tgt + ".tmp"
    kept_ids = []
    undecodable = {args.in_src: [], args.in_tgt: []}  # line numbers with bytes not UTF-8
    with open_text(args.in_src) as fs, open_text(args.in_tgt) as ft, \
            open(tmp_src, "w", encoding="utf-8", newline="\n") as gs, \
            open(tmp_tgt, "w", encoding="utf-8", newline="\n") as gt:
        for i, line_id, src, tgt in zip(range(n_src), ids, fs, ft):
            for path, line in ((args.in_src, src), (args.in_tgt, tgt)):
                if "\ufffd" in line:  # what open_text put for bytes that are not UTF-8
                    undecodable[path].append(i + 1)
            if not keep[i]:
                continue
            if args.filter:
                src, tgt = normalise(src) + "\n", normalise(tgt) + "\n"
            else:
                src = src if src.endswith("\n") else src + "\n"
                tgt = tgt if tgt.endswith("\n") else tgt + "\n"
            gs.write(src)
            gt.write(tgt)
            kept_ids.append(line_id)
    bad = {path: lines for path, lines in undecodable.items() if lines}
    for path, lines in bad.items():
        print(f"{'ERROR' if not args.filter else 'WARNING'}: {len(lines)} lines of {path} are "
              f"not valid UTF-8 (first: line {lines[0]}); their bad bytes "
              f"{'would become' if not args.filter else 'became'} U+FFFD; convert the file to "
              "UTF-8, e.g. iconv -f latin1 -t utf-8", file=sys.stderr)
    if bad and not args.filter:  # valid/test: BLEU would compare against damaged references
        os.remove(tmp_src)
        os.remove(tmp_tgt)
        return 2
    if args.line_ids_out:
        with open(args.line_ids_out + ".tmp", "w", encoding="utf-8") as f:
            f.writelines(f"{i}\n" for i in kept_ids)
        os.replace(args.line_ids_out + ".tmp", args.line_ids_out)
    os.replace(tmp_src, args.out_src)
    os.replace(tmp_tgt, args.out_tgt)
    if args.filter:
        report(counts, n_src, len(kept_ids), args, center)
    else:
        print(f"copied {len(kept_ids)} pairs -> {args.out_src}, {args.out_tgt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
