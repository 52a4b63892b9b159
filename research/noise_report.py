"""The noise share of what the Assistant skips: ``autoassist-diagnose`` with labelled pairs.

    python -m research.noise_report --data DIR --checkpoint CKPT --noise-labels FILE \\
        [--out FILE.json] [--max-tokens N] [--sample-pairs N]

With a labels file of research/add_noise.py (one line per raw training pair: ``clean`` or
the noise kind) and DATA/train.kept-lines (scripts/prepare-corpus.sh: the raw line of each
binarised pair), it adds to the diagnosis the share of noise among the tokens the
Assistant would skip and would train, the same for an oracle skipping the lowest-loss
pairs, and per kind the share of its tokens skipped, its mean raw and reducible loss and
the share of its pairs the pair checks flag. Loss-based skipping keeps noisy pairs (their
loss stays high): the trained tokens then hold more noise than the corpus.
research.bench runs it on every Assistant arm.
"""

import argparse
import json
import logging
import os
import sys

import numpy as np

from autoassist_fairseq.diagnose import REFERENCE_SHARE, DiagnosisError, diagnose, \
    format_summary, reducible_losses

logger = logging.getLogger("research.noise_report")
CLEAN = "clean"


def noise_shares(noisy, boss_tokens, skip):
    """Share of noisy tokens among the expected skipped, the trained and all Boss tokens.

    Args:
        noisy (np.ndarray of bool): per-pair noise flag.
        boss_tokens (np.ndarray): per-pair source + target tokens.
        skip (np.ndarray): per-pair expected skips in one pass (1 - P(accept)).
    """
    def share(weights):
        total = (weights * boss_tokens).sum()
        return float((weights * boss_tokens * noisy).sum() / total) if total > 0 else None
    return {"corpus": share(np.ones_like(skip)), "skipped": share(skip), "trained": share(1 - skip)}


def noise_by_kind(labels, boss_tokens, skip, losses, flags=None, floor=0.0):
    """Per label (``clean`` and each noise kind): pairs, its share of the Boss tokens, the
    share of its own tokens that would be skipped, and its pairs' mean raw and reducible
    loss (above *floor*). Shows which kinds a rule finds: untranslated copies, say, can be
    learned by copying and then look easy. With *flags* (the pair checks' per-pair flags),
    also the share of its pairs flagged.
    """
    total = boss_tokens.sum()
    kinds = {}
    for kind in np.unique(labels):
        mask = labels == kind
        tokens = boss_tokens[mask].sum()
        kinds[str(kind)] = {
            "pairs": int(mask.sum()),
            "token_share": float(tokens / total) if total > 0 else None,
            "skipped_share": float((skip[mask] * boss_tokens[mask]).sum() / tokens)
            if tokens > 0 else None,
            "mean_loss": float(losses[mask].mean()),
            "mean_reducible_loss": float(reducible_losses(losses[mask], floor).mean())}
        if flags is not None:
            kinds[str(kind)]["pair_checks_flagged"] = float(flags[mask].mean())
    return kinds


def read_noise_labels(data, subset, labels_path, num_pairs):
    """Per binarised pair, its label in *labels_path*, mapped through DATA/SUBSET.kept-lines."""
    kept_path = os.path.join(data, f"{subset}.kept-lines")
    if not os.path.exists(labels_path):
        raise DiagnosisError(f"--noise-labels {labels_path} not found")
    if not os.path.exists(kept_path):
        raise DiagnosisError(f"{kept_path} not found: it maps the binarised pairs to the raw "
                             "lines the labels follow; rerun scripts/prepare-corpus.sh (it "
                             "writes train.kept-lines) on the noisy corpus")
    with open(labels_path, encoding="utf-8") as f:
        labels = np.array([line.strip() for line in f])
    kept = np.loadtxt(kept_path, dtype=np.int64, ndmin=1)
    if len(kept) != num_pairs:
        raise DiagnosisError(f"{kept_path} has {len(kept)} lines for {num_pairs} binarised "
                             "pairs: rerun scripts/prepare-corpus.sh")
    if len(kept) and kept.max() >= len(labels):
        raise DiagnosisError(f"{kept_path} refers to raw line {kept.max()} but {labels_path} has "
                             f"{len(labels)} lines: are they of the same corpus?")
    return labels[kept]


def pair_check_flags(pairs):
    """The pair checks' per-pair flags of the scored pairs (None without an Assistant, or
    when the feature file cannot give them), whether or not the run used them."""
    if not pairs.has_assistant:
        return None
    from autoassist_fairseq.checks.columns import flagged

    features = pairs.task.features
    try:
        checks = features.pair_check_columns()
    except ValueError as err:  # e.g. two columns, from an older autoassist-features
        logger.warning(f"pair checks not reported: {err}")
        return None
    return flagged(checks, features.pair_check_settings())[pairs.ids]


class NoiseReport:
    """The ``pair_report`` of autoassist_fairseq.diagnose.diagnose for noise labels."""

    def __init__(self, labels_path, reference_share=REFERENCE_SHARE):
        self.labels_path = labels_path
        self.reference_share = reference_share
        self.labels = None

    def check(self, data, subset, num_pairs):
        self.labels = read_noise_labels(data, subset, self.labels_path, num_pairs)

    def report(self, result, pairs):
        noise = self.labels[pairs.ids]
        noisy = noise != CLEAN
        result["noise"] = {
            "labels": os.path.abspath(self.labels_path),
            "assistant": noise_shares(noisy, pairs.boss_tokens, pairs.skip),
            "by_kind_pairs": {str(k): int((noise == k).sum()) for k in np.unique(noise)},
            "by_kind": noise_by_kind(noise, pairs.boss_tokens, pairs.skip, pairs.losses,
                                     pair_check_flags(pairs), pairs.floor)}
        oracle_skip = np.zeros(len(pairs.losses))
        order = np.argsort(pairs.losses)
        budget = self.reference_share * pairs.ntok.sum()
        oracle_skip[order[np.cumsum(pairs.ntok[order]) <= budget]] = 1
        result["noise"]["oracle_at_reference"] = noise_shares(noisy, pairs.boss_tokens,
                                                              oracle_skip)


def format_noise(r):
    """The plain-text lines of the noise figures."""
    fmt = lambda v: "n/a" if v is None else f"{v:.1%}"  # noqa: E731
    n = r["noise"]["assistant"]
    lines = [f"noise share of tokens: skipped {fmt(n['skipped'])}, trained "
             f"{fmt(n['trained'])}, corpus {fmt(n['corpus'])}"]
    kinds = r["noise"].get("by_kind") or {}
    lines.append("share of each kind's tokens skipped: " + ", ".join(
        f"{k} {fmt(v['skipped_share'])} (loss {v['mean_loss']:.2f}, reducible "
        f"{v['mean_reducible_loss']:.2f})" for k, v in kinds.items()))
    if any("pair_checks_flagged" in v for v in kinds.values()):
        lines.append("share of each kind's pairs the pair checks flag: " + ", ".join(
            f"{k} {fmt(v.get('pair_checks_flagged'))}" for k, v in kinds.items()))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m research.noise_report", description=__doc__.split("\n\n")[0],
        epilog="example:\n  python -m research.noise_report --data work/multi30k-noisy "
               "--checkpoint OUT/autoassist-s1/checkpoints/checkpoint_last.pt "
               "--noise-labels work/multi30k-noisy/train.noise-labels --out diagnosis.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="the data directory the run trained on")
    p.add_argument("--checkpoint", required=True,
                   help="a checkpoint of an --task autoassist_translation run")
    p.add_argument("--noise-labels", required=True,
                   help="labels of the raw training pairs (research/add_noise.py); needs "
                        "DATA/train.kept-lines")
    p.add_argument("--out", default=None, help="also write the figures to this JSON file")
    p.add_argument("--max-tokens", type=int, default=8000,
                   help="tokens per scoring batch (default: 8000)")
    p.add_argument("--sample-pairs", type=int, default=None,
                   help="score only this many training pairs, drawn at random (seed 0) "
                        "(default: every pair)")
    a = p.parse_args(argv)
    try:
        if not os.path.exists(a.checkpoint):
            raise DiagnosisError(f"{a.checkpoint} not found")
        result = diagnose(a.data, a.checkpoint, a.max_tokens, sample_pairs=a.sample_pairs,
                          pair_report=NoiseReport(a.noise_labels))
    except DiagnosisError as err:
        sys.exit(f"research.noise_report: error: {err}")
    print(json.dumps(result, indent=1))
    print(format_noise(result))
    print(format_summary(result))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
