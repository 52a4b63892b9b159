#!/usr/bin/env python3
"""Detokenised sacreBLEU of a ``fairseq-generate`` output against raw references.

Takes the ``D-<id>`` lines of the generate output (the hypotheses after
``--remove-bpe sentencepiece`` and any ``--tokenizer``/``--bpe`` decoding; ``H-`` lines
where there are none), the best of each id's ``--nbest``, puts them back in input order, writes them one per line to ``--hyp-out`` and scores them against the
raw reference file (the untokenised text kept by ``prepare-corpus.sh``)::

    python scripts/sacrebleu_score.py --generate-output gen.txt --ref data/raw/test.de \\
        --hyp-out checkpoints/hyp.test.de

prints ``BLEU = ...`` and the sacreBLEU signature line. ``--check-tokenize NAME`` only
checks that sacreBLEU has the tokenizer NAME and can use it (``evaluate.sh`` asks before
it translates), and names the valid tokenizers when it has not.
"""

import argparse
import difflib
import sys

import sacrebleu


def read_hypotheses(path: str):
    """{id: the first (best) detokenised hypothesis}: fairseq-generate prints an id's
    ``--nbest`` hypotheses best first; ``D-`` is the text after every decoding step, ``H-``
    before ``--tokenizer``/``--bpe`` decoding (the same text without them)."""
    found = {"D-": {}, "H-": {}}
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            kind = line[:2]
            if kind in found:
                fields = line.rstrip("\n").split("\t")
                found[kind].setdefault(int(fields[0][2:]), fields[2] if len(fields) > 2 else "")
    return found["D-"] or found["H-"]


def tokenizer_names():
    """The tokenizers sacreBLEU's BLEU accepts (its ``--tokenize`` choices)."""
    names = getattr(sacrebleu.metrics.BLEU, "TOKENIZERS", None)
    if names is None:  # older sacreBLEU 2.x: only the registry itself
        from sacrebleu.metrics.bleu import _TOKENIZERS as names
    return list(names)


def tokenizer_problem(name: str):
    """None when sacreBLEU can score with the tokenizer *name*, else why not (an unknown
    name, with the valid ones; a tokenizer whose extra packages are missing, with sacreBLEU's
    advice)."""
    names = tokenizer_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1) or \
            [n for n in names if n.lower() == name.lower()]
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return (f"unknown sacreBLEU tokenizer '{name}'{hint}; valid names: "
                f"{', '.join(names)} (names are case-sensitive)")
    try:
        sacrebleu.metrics.BLEU(tokenize=name)
    except Exception as e:  # e.g. ja-mecab without pip install sacrebleu[ja]
        reason = " ".join(str(e).split()) or type(e).__name__
        return f"sacreBLEU cannot use the tokenizer '{name}': {reason}"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python scripts/sacrebleu_score.py --generate-output gen.txt "
               "--ref data/raw/test.de --hyp-out checkpoints/hyp.test.de")
    parser.add_argument("--generate-output",
                        help="stdout of fairseq-generate (run with --remove-bpe sentencepiece)")
    parser.add_argument("--ref", help="raw reference text, one line per sentence")
    parser.add_argument("--hyp-out", help="where to write the sorted hypotheses")
    parser.add_argument("--tokenize", default=None, help="sacreBLEU tokenizer, e.g. 13a, intl, zh, ja-mecab (default: 13a)")
    parser.add_argument("--check-tokenize", metavar="NAME",
                        help="only check that sacreBLEU can use the tokenizer NAME (exit 0) or "
                             "say why not, with the valid names (exit 2); scores nothing")
    args = parser.parse_args(argv)

    if args.check_tokenize is not None:
        problem = tokenizer_problem(args.check_tokenize)
        if problem:
            print(f"ERROR: {problem}", file=sys.stderr)
            return 2
        return 0
    missing_args = [flag for flag, value in (("--generate-output", args.generate_output),
                                             ("--ref", args.ref), ("--hyp-out", args.hyp_out))
                    if value is None]
    if missing_args:
        parser.error(f"the following arguments are required: {', '.join(missing_args)}")
    problem = tokenizer_problem(args.tokenize) if args.tokenize else None
    if problem:
        print(f"ERROR: --tokenize: {problem}", file=sys.stderr)
        return 2

    with open(args.ref, encoding="utf-8", errors="replace", newline="\n") as f:
        refs = [line.rstrip("\n") for line in f]
    hyp_by_id = read_hypotheses(args.generate_output)
    missing = [i for i in range(len(refs)) if i not in hyp_by_id]
    if not hyp_by_id:
        print(f"ERROR: no hypotheses (H- lines) in {args.generate_output}", file=sys.stderr)
        return 1
    if missing:
        print(f"WARNING: {len(missing)} of {len(refs)} sentences have no hypothesis in "
              f"{args.generate_output}; scored as empty", file=sys.stderr)
    extra = sorted(set(hyp_by_id) - set(range(len(refs))))
    if extra:
        print(f"ERROR: {args.generate_output} has hypotheses for ids beyond the {len(refs)} "
              f"references of {args.ref} (e.g. {extra[0]}): wrong reference file?", file=sys.stderr)
        return 1
    hyps = [hyp_by_id.get(i, "") for i in range(len(refs))]
    with open(args.hyp_out, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(h + "\n" for h in hyps)

    kwargs = {"tokenize": args.tokenize} if args.tokenize else {}
    bleu = sacrebleu.metrics.BLEU(**kwargs)
    score = bleu.corpus_score(hyps, [refs])
    print(score)
    print(f"sacreBLEU signature: {bleu.get_signature()}")
    print(f"hypotheses ({len(hyps)} lines, input order): {args.hyp_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
