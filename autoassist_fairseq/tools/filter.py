"""``autoassist-filter``: a prepared corpus without the training pairs its pair checks flag.

On a noisy corpus, dropping the pairs that the pair checks flag and training plain fairseq
on the rest did at least as well as training AutoAssist on the whole corpus, where flagged
pairs are kept at the acceptance floor (docs/results/converged). This command writes that
corpus from a data directory of ``scripts/prepare-corpus.sh`` (any fairseq-preprocess
directory whose feature file holds pair checks):

* ``OUT/train.SRC-TGT.{SRC,TGT}.{bin,idx}``: the training pairs no check flags, copied token
  for token (the same dictionaries, so validation losses of the two corpora compare directly);
* ``OUT/train.kept-lines``: their raw line numbers, when DATA has that file;
* the dictionaries, the valid and test splits, ``raw/`` and ``spm/`` linked to DATA's;
* the features of the kept pairs (``autoassist-features``), unless ``--no-features``, so that
  both ``--task translation`` and ``--task autoassist_translation`` train on OUT;
* ``OUT/autoassist-filter.json``: what OUT was filtered from; it marks OUT as this command's
  output, which a later run may replace.

OUT must be new, empty, or an earlier output of this command (it holds
``autoassist-filter.json``); anything else, another corpus above all, is refused before
anything is written. OUT is built in a temporary folder beside it and renamed into place
when complete, so a failure (a full disk, an interrupt) leaves an earlier OUT as it was.

The checks run at the settings that the feature file's header records, as the task reads
them. ``--drop-share S`` drops more than the flagged pairs: the share S of the training
pairs that rank as most noise-like under the checks' combined evidence
(:func:`..checks.flags.union_score`: the flagged pairs first, then the sum of the checks'
standardised scores), for crawled corpora noisier than the checks' bars assume; every
flagged pair goes even where they are more than S. Nothing in DATA changes; a dropped pair
stays there.

The scores must rank the share asked for: where more pairs tie at the score at which the
share ends than it still takes (checks that give most pairs no evidence, such as
``--pair-checks digits`` on a corpus mostly without digits, tie them), the pairs taken from
the tie would be picked by their place in the corpus alone; when those are more than 1% of
the pairs dropped beyond the flagged ones (and more than one), ``--drop-share`` is refused,
with the largest share the scores do rank. A feature file built with ``--pair-checks none``
is refused, with or without ``--drop-share``: there is nothing to filter by.

Example::

    autoassist-filter data-bin/crawl --out data-bin/crawl-filtered
    fairseq-train data-bin/crawl-filtered --task translation ...
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..console import configure_logging
from ..features.prepared import check_evidence, kept_lines, language_pair, open_training_sides
from .drop_share import ranked_drop
from .filter_output import MARKER, check_out, check_scores_out, move_into_place, write_error


def write_corpus(data: Path, out: Path, keep: np.ndarray, features: bool = True,
                 settings=None) -> None:
    """OUT: DATA's training pairs *keep* (indices into the binarised training set, in
    order), with DATA's dictionaries, valid and test splits, raw/ and spm/ linked; its
    features are built with the pair checks' *settings* (default: the defaults).

    OUT is built in a temporary folder beside it and renamed into place when complete: an
    earlier output stays whole until then, and nothing is left of a failed build.

    Raises:
        ValueError: OUT is a file, or a folder that holds something other than an earlier
            output of this command (:func:`check_out`).
        OSError: writing failed (e.g. a full disk); OUT is as it was.
    """
    data, out = Path(data), Path(out)
    check_out(out)
    src, tgt = language_pair(data)
    sides = open_training_sides(data, src, tgt)
    kept = kept_lines(data, len(sides[src]))
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".building", dir=out.parent))
    try:
        _write_into(data, building, src, tgt, sides, kept, keep, features, settings)
        (building / MARKER).write_text(json.dumps(
            {"data": str(data.resolve()), "pairs": len(sides[src]), "kept": len(keep),
             "features": features}, indent=1) + "\n")
        move_into_place(building, out)
    except BaseException as err:
        shutil.rmtree(building, ignore_errors=True)
        if isinstance(err, OSError) and str(err.filename or "").startswith(str(building)):
            err.filename = str(out) + str(err.filename)[len(str(building)):]  # the file's name
        raise


def _write_into(data: Path, out: Path, src: str, tgt: str, sides, kept, keep, features,
                settings) -> None:
    """The files of the filtered corpus, into the empty folder *out*."""
    import torch
    from fairseq.data import Dictionary, indexed_dataset

    for path in data.iterdir():
        if path.name.startswith(("valid.", "test.", "dict.")) or path.name in ("raw", "spm"):
            (out / path.name).symlink_to(path.resolve())
    for lang, side in sides.items():
        prefix = str(out / f"train.{src}-{tgt}.{lang}")
        builder = indexed_dataset.make_builder(
            indexed_dataset.data_file_path(prefix), "mmap",
            vocab_size=len(Dictionary.load(str(data / f"dict.{lang}.txt"))))
        for i in keep:
            builder.add_item(torch.as_tensor(side[int(i)]))
        builder.finalize(indexed_dataset.index_file_path(prefix))
    if kept is not None:
        np.savetxt(out / "train.kept-lines", kept[keep], fmt="%d")
    if features:
        from ..features import build

        build.build_features(str(out), src, tgt, settings=settings)



def filter_flagged(data, out, features: bool = True, drop_share: float = 0.0,
                   dynamics: Optional[Sequence[str]] = None, scores_out: Optional[str] = None,
                   dynamics_checkpoint: Optional[str] = None):
    """Write OUT without the training pairs of DATA that the pair checks flag (with
    *dynamics*, the losses files of two checkpoints, also those whose training dynamics
    flag them: :mod:`..diagnose.dynamics`; with *dynamics_checkpoint*, from the losses of the
    training passes that the checkpoint's Assistant recorded), and with *drop_share* > 0 without the next most
    noise-like pairs up to that share of all (:func:`ranked_drop`); with *scores_out*, also
    every pair's scores as a TSV (:mod:`.pair_scores`); OUT may then be None (the
    scores alone). Return (flags, dropped), one bool per binarised training pair of DATA."""
    from ..checks.settings import DEFAULT_CHECKS
    from ..features.store import build_command

    data = Path(data)
    out = None if out is None else Path(out)
    if not data.is_dir():
        raise FileNotFoundError(
            f"DATA {data} {'is a file, not a folder' if data.exists() else 'does not exist'}: "
            "give the data directory that scripts/prepare-corpus.sh (or fairseq-preprocess) "
            "wrote, with the feature file of autoassist-features")
    if out is None and not scores_out:
        raise ValueError("give --out (the filtered corpus) or --scores-out (the scores alone)")
    if out is not None and data.resolve() == out.resolve():
        raise ValueError("--out must differ from DATA: the filtered corpus is written beside it")
    if not 0.0 <= drop_share < 1.0:
        raise ValueError(f"--drop-share {drop_share} is out of range: give a share of the "
                         "training pairs in [0, 1), e.g. 0.2")
    if out is not None:
        check_out(out)
    if scores_out:
        check_scores_out(Path(scores_out))
    src, tgt = language_pair(data)
    # a file built with --pair-checks none: FeatureStore.suspect_pairs refuses it
    flags, per_check, score, settings = check_evidence(data, src, tgt)
    num_pairs = len(flags)  # the file was checked to describe every binarised training pair
    lines = kept_lines(data, num_pairs)  # checked before anything is written
    dyn = None
    if dynamics and dynamics_checkpoint:
        raise ValueError("give --dynamics (the losses of two checkpoints) or "
                         "--dynamics-checkpoint (the training passes' own losses), not both")
    if dynamics:
        from ..diagnose.dynamics import pair_dynamics

        dyn = pair_dynamics(dynamics[0], dynamics[1], num_pairs)
    elif dynamics_checkpoint:
        from ..diagnose.dynamics import visits_dynamics

        sides = open_training_sides(data, src, tgt)
        # a copy while the side is open: its sizes are a view of the index file's mmap
        ntok = np.array(sides[tgt].sizes, dtype=np.int64)
        del sides
        dyn = visits_dynamics(dynamics_checkpoint, ntok)
    flagged = flags | dyn[1] if dyn is not None else flags
    more = [c for c in DEFAULT_CHECKS if c not in settings.checks]
    fix = (f"; or rebuild the features with more checks than {', '.join(settings.checks)}, "
           f"which score more of the pairs: {build_command(str(data), 'train', src, tgt)} "
           f"--pair-checks {','.join(list(settings.checks) + more)}") if more else ""
    dropped = ranked_drop(flagged, score, drop_share, fix)
    keep = np.flatnonzero(~dropped)
    if not len(keep):
        raise ValueError(f"the pair checks flag every pair of {data}: nothing to train on")
    if scores_out:
        from .pair_scores import write_pair_scores

        write_pair_scores(scores_out, per_check, score, flags, dropped, lines, dyn)
    if out is not None:
        write_corpus(data, out, keep, features, settings)
    return flagged, dropped


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="autoassist-filter", description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        epilog="example: autoassist-filter data-bin/crawl --out data-bin/crawl-filtered")
    p.add_argument("data", type=Path, help="data directory of scripts/prepare-corpus.sh, with "
                                           "the feature file of autoassist-features")
    p.add_argument("--out", type=Path,
                   help="the filtered data directory to write: a new or empty folder, or an "
                        "earlier output of autoassist-filter (replaced once the new one is "
                        "complete); may be left out with --scores-out")
    p.add_argument("--no-features", action="store_true",
                   help="do not build features for OUT (enough for --task translation)")
    p.add_argument("--drop-share", type=float, default=0.0, metavar="S",
                   help="drop the share S of the training pairs that rank as most noise-like "
                        "(the flagged pairs first, then by the checks' combined scores; all "
                        "flagged pairs even beyond S); default 0: the flagged pairs only")
    p.add_argument("--dynamics", nargs=2, metavar=("FIRST", "LAST"),
                   help="also drop the pairs whose training dynamics flag them: the "
                        "autoassist-diagnose --losses-out files of an early and a late "
                        "checkpoint of a run on DATA (a high loss that does not fall, relative "
                        "to pairs of the same length; the bar is set from the corpus)")
    p.add_argument("--dynamics-checkpoint", metavar="CKPT",
                   help="as --dynamics, from the losses of the training passes themselves: "
                        "each pair's first and latest visit, which the Assistant of an "
                        "autoassist_translation run on DATA records in its checkpoints (no "
                        "extra forward pass; pairs visited once are not scored)")
    p.add_argument("--scores-out", metavar="TSV",
                   help="also write every training pair's line, check scores, union flag, "
                        "dynamics score and inputs (with --dynamics) and whether it is dropped "
                        "(gzip for .gz)")
    return p


def cli_main(argv: Optional[Sequence[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    configure_logging()
    try:
        flags, dropped = filter_flagged(args.data, args.out, features=not args.no_features,
                                        drop_share=args.drop_share, dynamics=args.dynamics,
                                        scores_out=args.scores_out,
                                        dynamics_checkpoint=args.dynamics_checkpoint)
    except (FileNotFoundError, ValueError) as err:
        print(f"autoassist-filter: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # writing OUT failed; write_corpus left it as it was
        print(f"autoassist-filter: error: {write_error(err, args.out or Path(args.scores_out))}",
              file=sys.stderr)
        return 1
    more = int(dropped.sum() - flags.sum())
    by = "the pair checks and the training dynamics" if args.dynamics or \
        args.dynamics_checkpoint else "the pair checks"
    where = " -> ".join(str(p) for p in (args.out, args.scores_out) if p)
    print(f"autoassist-filter: {'kept' if args.out else 'would keep'} {int((~dropped).sum())} "
          f"of {len(flags)} training pairs ({int(flags.sum())} flagged by {by} dropped"
          f"{f', and {more} more of the highest noise scores' if more else ''}) -> {where}")
    return 0


if __name__ == "__main__":
    sys.exit(cli_main())
