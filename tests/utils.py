"""Shared helpers: tiny corpora, binarised with fairseq-preprocess, with features."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "autoassist_fairseq")
SHARED_DATA = REPO.parent / "shared" / "data"
BIN = Path(sys.executable).parent


def write_parallel(out_dir, split, n_pairs, seed=0, vocab=60, src="src", tgt="tgt"):
    """A learnable toy language pair: the target is the source reversed, each word mapped
    to another word; length 3..20. Words below ``vocab // 6`` are ambiguous (each
    occurrence translates to one of four words at random), so pairs that contain them stay
    hard for the Boss, and their features say so. Returns the source sentences."""
    rng = np.random.default_rng(seed)
    os.makedirs(out_dir, exist_ok=True)
    sources = []
    with open(f"{out_dir}/{split}.{src}", "w") as fs, open(f"{out_dir}/{split}.{tgt}", "w") as ft:
        for _ in range(n_pairs):
            words = rng.integers(0, vocab, size=rng.integers(3, 21))
            fs.write(" ".join(f"s{w}" for w in words) + "\n")
            out = [(w * 7) % vocab if w >= vocab // 6 else vocab + 4 * w + rng.integers(4)
                   for w in words[::-1]]
            ft.write(" ".join(f"t{w}" for w in out) + "\n")
            sources.append(words)
    return sources


def run(cmd, timeout=600, check=True, **kwargs):
    """Run a command of the venv; on failure show its output."""
    if cmd[0] in ("fairseq-train", "fairseq-preprocess", "fairseq-generate", "autoassist-features"):
        cmd = [str(BIN / cmd[0])] + list(cmd[1:])
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def make_binarized(root, n_train=600, n_valid=60, seed=0, features=True):
    """Raw text -> fairseq-preprocess -> autoassist-features; returns the data dir."""
    raw, data = Path(root) / "raw", Path(root) / "data-bin"
    write_parallel(raw, "train", n_train, seed=seed)
    write_parallel(raw, "valid", n_valid, seed=seed + 1)
    run(["fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt",
         "--trainpref", raw / "train", "--validpref", raw / "valid", "--destdir", data,
         "--joined-dictionary", "--workers", "1"])
    if features:
        run(["autoassist-features", data, "--source-lang", "src", "--target-lang", "tgt"])
    return data


TINY_TRANSFORMER = [
    "--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
    "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
    "--decoder-attention-heads", "2", "--share-all-embeddings",
]


def train_args(data, save_dir, arch_args=TINY_TRANSFORMER, extra=()):
    return ["fairseq-train", data, "--user-dir", USER_DIR, "--task", "autoassist_translation",
            *arch_args, "--optimizer", "adam", "--lr", "0.003", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "20", "--criterion", "label_smoothed_cross_entropy",
            "--label-smoothing", "0.1", "--max-tokens", "600", "--cpu", "--seed", "1",
            "--save-dir", save_dir, "--log-format", "simple", "--log-interval", "10",
            "--no-epoch-checkpoints", "--num-workers", "0", "--assistant-window", "256",
            *extra]
