"""``autoassist-check-report --dynamics-passes K``: the Boss's own losses beside the checks.

The small Boss (:data:`SMALL_BOSS`, the flags of ``configs/multi30k/transformer_small``)
trains with the plugin (``--assistant-sync``, no validation) for K passes over the pairs of
the mix that the preparation kept, on their subword pieces; every pair's mean token loss at
the checkpoints of passes 1 and K (``autoassist-diagnose --losses-out``'s scoring, eval
mode) gives its training-dynamics score and flag (:mod:`..diagnose.dynamics`, whose bar is
set from the corpus). The report then gains, beside each check's:

* ``dynamics``: that score (NaN for the pairs the preparation dropped, which never trained);
* ``union_dynamics``: the checks' union or the dynamics; ranked by the flag first, then the
  larger of the two scores' percentiles (the preparation's dropped pairs above all).
"""

import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np

# configs/multi30k/transformer_small.args without its per-run flags (task, data, seed, budget,
# checkpoints, logging): tests/test_check_dynamics.py keeps the two equal
SMALL_BOSS = (
    "--cpu", "--arch", "transformer", "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "128", "--decoder-embed-dim", "128",
    "--encoder-ffn-embed-dim", "512", "--decoder-ffn-embed-dim", "512",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--share-all-embeddings", "--dropout", "0.2", "--criterion", "label_smoothed_cross_entropy",
    "--label-smoothing", "0.1", "--optimizer", "adam", "--adam-betas", "(0.9,0.98)",
    "--weight-decay", "0.0", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "500",
    "--warmup-init-lr", "1e-07", "--lr", "0.002", "--clip-norm", "0.0", "--max-tokens", "4096",
    "--num-workers", "0")


def _run(cmd: Sequence[str], log: Path, what: str) -> None:
    with open(log, "a") as out:
        rc = subprocess.call([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT)
    if rc:
        tail = "".join(log.read_text(errors="replace").splitlines(True)[-15:])
        raise RuntimeError(f"--dynamics-passes: {what} failed (exit {rc}); the end of {log}:\n"
                           f"{tail}")


def train_dynamics(workdir: str, src: str, tgt: str, src_pieces, tgt_pieces, passes: int,
                   seed: int = 1, boss_args: Optional[Sequence[str]] = None):
    """Binarise the pieces, build their features, train the Boss *passes* passes and score
    the dynamics between the checkpoints of passes 1 and *passes* (*boss_args*: the Boss's
    fairseq-train flags, default :data:`SMALL_BOSS`); returns
    (:func:`..diagnose.dynamics.pair_dynamics`'s scores and flags), one per pair given.

    Raises:
        ValueError: *passes* < 2.
        RuntimeError: a step failed (the message ends with its log).
    """
    from ..diagnose.dynamics import pair_dynamics
    from ..diagnose.scoring import diagnose
    from ..features.build import build_features

    if passes < 2:
        raise ValueError(f"--dynamics-passes {passes}: the dynamics compare the losses of "
                         "pass 1 with a later pass; give 2 or more (e.g. 4)")
    work = Path(workdir)
    text, data, save = work / "text", work / "data", work / "checkpoints"
    text.mkdir(parents=True, exist_ok=True)
    log = work / "dynamics.log"
    for lang, side in ((src, src_pieces), (tgt, tgt_pieces)):
        with open(text / f"train.{lang}", "w", encoding="utf-8", newline="\n") as f:
            f.writelines(" ".join(pieces) + "\n" for pieces in side)
    _run([sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", src,
          "--target-lang", tgt, "--trainpref", text / "train", "--destdir", data,
          "--joined-dictionary", "--workers", "1"], log, "fairseq-preprocess")
    build_features(str(data), src, tgt)
    plugin = Path(__file__).resolve().parents[1]
    _run([sys.executable, "-m", "fairseq_cli.train", data, "--user-dir", plugin,
          "--task", "autoassist_translation", *(boss_args or SMALL_BOSS), "--seed", seed,
          "--max-epoch", passes, "--keep-last-epochs", passes, "--assistant-sync",
          "--disable-validation", "--log-format", "simple", "--save-dir", save],
         log, f"training the Boss for {passes} passes")
    losses = []
    for p in (1, passes):
        losses.append(str(work / f"losses.pass{p}.npz"))
        diagnose(str(data), str(save / f"checkpoint{p}.pt"), losses_out=losses[-1])
    scores, flags, _ = pair_dynamics(losses[0], losses[1], len(src_pieces))
    return scores["dynamics"], flags


def percentile(values: np.ndarray) -> np.ndarray:
    """Each value's rank as a share of the others (0: the lowest; ties by position)."""
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    return ranks / max(len(values) - 1, 1)


def dynamics_columns(kept: np.ndarray, n: int, dropped: np.ndarray, union: np.ndarray,
                     union_score: np.ndarray, score: np.ndarray,
                     flags: np.ndarray) -> Dict[str, Dict[str, np.ndarray]]:
    """The ``dynamics`` and ``union_dynamics`` columns over all *n* pairs of the mix from
    the scores and flags of the *kept* pairs: ``{"flag": {...}, "score": {...}}``.
    *union* / *union_score*: the checks' union flag and score (+inf where *dropped*)."""
    dyn_score, dyn_flag = np.full(n, np.nan), np.zeros(n, dtype=bool)
    dyn_score[kept], dyn_flag[kept] = score, flags
    either = union | dyn_flag
    ranked = np.full(n, np.inf)
    ranked[kept] = either[kept] + np.maximum(percentile(union_score[kept]), percentile(score))
    return {"flag": {"dynamics": dyn_flag, "union_dynamics": either},
            "score": {"dynamics": dyn_score, "union_dynamics": ranked}}


def add_dynamics(out: dict, labels: np.ndarray, dropped: np.ndarray, columns: dict,
                 passes: int, drawn: Optional[np.ndarray] = None, replicates: int = 0,
                 seed: int = 0) -> None:
    """Put the two columns into the report *out*: under ``auc``, ``flag_rate`` and
    ``noise_found_at_valid_share``, with bootstrap ``intervals`` over the rows *drawn*
    (``auc NAME``, ``NAME A+L``, ``NAME V+F``, ``NAME A+L found at V+F 5%``)."""
    from .bootstrap import bootstrap
    from .check_figures import VALID_SHARES, flag_rates, noise_auc, noise_found_at
    from .labelled_pairs import AUC_NOISE, VALID

    rates = flag_rates(labels, np.zeros_like(dropped), columns["flag"], (AUC_NOISE, VALID))
    for name in columns["flag"]:
        out["auc"][name] = noise_auc(labels, columns["score"][name])
        out["flag_rate"][name] = rates[name]
        out["noise_found_at_valid_share"][name] = {
            str(v): noise_found_at(labels, columns["score"][name], v)
            for v in VALID_SHARES}
    out["dynamics_passes"] = passes
    if drawn is None or not replicates:
        return

    def figures(index):
        pick = drawn[index]
        fig = {}
        for name in columns["flag"]:
            score, flag = columns["score"][name][pick], columns["flag"][name][pick]
            fig[f"auc {name}"] = noise_auc(labels[pick], score)
            fig[f"{name} A+L found at V+F 5%"] = noise_found_at(labels[pick], score, 0.05)
            for group in (AUC_NOISE, VALID):
                g = np.isin(labels[pick], group)
                fig[f"{name} {'+'.join(group)}"] = float(flag[g].mean()) if g.any() \
                    else float("nan")
        return fig

    out.setdefault("intervals", {}).update(bootstrap(figures, len(drawn), replicates, seed))

