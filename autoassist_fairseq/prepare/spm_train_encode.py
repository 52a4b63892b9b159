"""Joint sentencepiece BPE: train one model on both sides, encode text with it.

    # train on the training text of both languages
    python scripts/spm_train_encode.py train --model-prefix DIR/spm --vocab-size 8000 \\
        DIR/raw/train.en DIR/raw/train.de
    # encode (one output file per input file, same line count)
    python scripts/spm_train_encode.py encode --model DIR/spm.model \\
        --inputs raw/valid.en raw/valid.de --outputs bpe/valid.en bpe/valid.de

The encoded text holds space-separated pieces (``▁`` marks a word start), which is what
``fairseq-preprocess`` binarises and what ``--remove-bpe sentencepiece`` undoes.
"""

import argparse
import os
import sys

import sentencepiece as spm

# Characters Python's universal-newline reader (used by fairseq-preprocess) would treat
# as line ends, and other separators: they become spaces so that every encoded line
# stays on one line.
LINE_BREAKS = str.maketrans({c: " " for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\t"})


def train(args) -> int:
    for path in args.inputs:
        if not os.path.isfile(path):
            print(f"ERROR: missing input file: {path}", file=sys.stderr)
            return 2
    os.makedirs(os.path.dirname(os.path.abspath(args.model_prefix)), exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=",".join(args.inputs),
        model_prefix=args.model_prefix,
        vocab_size=args.vocab_size,
        model_type="bpe",
        character_coverage=args.character_coverage,
        # a soft limit: a small corpus may not have vocab_size pieces to offer
        hard_vocab_limit=False,
        input_sentence_size=args.input_sentence_size,
        shuffle_input_sentence=True,
        num_threads=args.threads,
        # no BOS/EOS ids in the encoded text: fairseq adds its own </s>
        bos_id=-1, eos_id=-1, unk_id=0, pad_id=-1,
        minloglevel=1,
    )
    sp = spm.SentencePieceProcessor(model_file=args.model_prefix + ".model")
    print(f"trained joint BPE model {args.model_prefix}.model: {sp.get_piece_size()} pieces "
          f"(asked for {args.vocab_size}) on {', '.join(args.inputs)}")
    return 0


def encode(args) -> int:
    if len(args.inputs) != len(args.outputs):
        print("ERROR: --inputs and --outputs need the same number of files", file=sys.stderr)
        return 2
    for path in [args.model] + args.inputs:
        if not os.path.isfile(path):
            print(f"ERROR: missing input file: {path}", file=sys.stderr)
            return 2
    sp = spm.SentencePieceProcessor(model_file=args.model)
    for src, dst in zip(args.inputs, args.outputs):
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        n = 0
        with open(src, encoding="utf-8", errors="replace", newline="\n") as fin, \
                open(dst + ".tmp", "w", encoding="utf-8", newline="\n") as fout:
            batch = []

            def flush():
                for pieces in sp.encode(batch, out_type=str):
                    fout.write(" ".join(pieces).translate(LINE_BREAKS) + "\n")
                batch.clear()

            for line in fin:
                batch.append(line.rstrip("\n").translate(LINE_BREAKS))
                n += 1
                if len(batch) >= 10000:
                    flush()
            flush()
        os.replace(dst + ".tmp", dst)
        print(f"encoded {n} lines {src} -> {dst}")
    return 0


def main(argv=None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=raw,
        epilog="examples:\n"
               "  python scripts/spm_train_encode.py train --model-prefix out/spm/spm "
               "--vocab-size 8000 out/raw/train.en out/raw/train.de\n"
               "  python scripts/spm_train_encode.py encode --model out/spm/spm.model "
               "--inputs out/raw/valid.en --outputs out/spm/valid.en")
    sub = parser.add_subparsers(dest="command", required=True,
                                help="train a model, or encode text with one")
    p = sub.add_parser(
        "train", help="train a joint BPE model", formatter_class=raw,
        description="Train one sentencepiece BPE model on the text of both languages.",
        epilog="example:\n  python scripts/spm_train_encode.py train --model-prefix out/spm/spm "
               "--vocab-size 8000 out/raw/train.en out/raw/train.de")
    p.add_argument("inputs", nargs="+", help="training text, one file per language")
    p.add_argument("--model-prefix", required=True,
                   help="writes PREFIX.model and PREFIX.vocab")
    p.add_argument("--vocab-size", type=int, default=8000,
                   help="number of pieces; a soft limit on small corpora (default 8000)")
    p.add_argument("--character-coverage", type=float, default=0.9999,
                   help="share of the characters the model covers; rarer ones become <unk> "
                        "(default 0.9999, sentencepiece's advice for scripts with many "
                        "characters such as Japanese or Chinese)")
    p.add_argument("--input-sentence-size", type=int, default=2_000_000,
                   help="sample at most this many sentences for training (0 = all; "
                        "default 2000000)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="training threads (default: the number of CPUs)")
    p.set_defaults(func=train)
    p = sub.add_parser(
        "encode", help="encode text files with a trained model", formatter_class=raw,
        description="Encode text into space-separated pieces, one output line per input line.",
        epilog="example:\n  python scripts/spm_train_encode.py encode --model out/spm/spm.model "
               "--inputs out/raw/valid.en out/raw/valid.de --outputs out/spm/valid.en "
               "out/spm/valid.de")
    p.add_argument("--model", required=True, help="the PREFIX.model written by train")
    p.add_argument("--inputs", nargs="+", required=True, help="plain text files to encode")
    p.add_argument("--outputs", nargs="+", required=True,
                   help="one output file per input, in the same order")
    p.set_defaults(func=encode)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
