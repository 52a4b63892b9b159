"""Shared helpers: tiny corpora, binarised with fairseq-preprocess, with features."""

import os
import sys
from pathlib import Path

import numpy as np

import warm
import warm_shims
from research.process_tree import children, descendants  # noqa: F401  (the tests' names)

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "autoassist_fairseq")
SHARED_DATA = REPO.parent / "shared" / "data"
BIN = Path(sys.executable).parent


def write_parallel(out_dir, split, n_pairs, seed=0, vocab=40, src="src", tgt="tgt",
                   noisy=0.3):
    """A learnable toy language pair: the target is the source, each word mapped
    to another word; length 3..15. A share *noisy* of the pairs carries the source word
    ``noise`` and a random target: those stay hard for the Boss however long it trains,
    and their features say so. Returns the source sentences."""
    rng = np.random.default_rng(seed)
    os.makedirs(out_dir, exist_ok=True)
    sources = []
    with open(f"{out_dir}/{split}.{src}", "w") as fs, open(f"{out_dir}/{split}.{tgt}", "w") as ft:
        for _ in range(n_pairs):
            words = rng.integers(0, vocab, size=rng.integers(3, 16))
            source = [f"s{w}" for w in words]
            if rng.random() < noisy:
                source.insert(int(rng.integers(len(source))), "noise")
                target = rng.integers(0, vocab, size=len(words))
            else:
                target = (words * 7) % vocab
            fs.write(" ".join(source) + "\n")
            ft.write(" ".join(f"t{w}" for w in target) + "\n")
            sources.append(words)
    return sources


def run(cmd, timeout=600, check=True, **kwargs):
    """Run a command of the venv (a console script or ``python [-m] ...``: forked warm,
    tests/warm.py; anything else with subprocess); on failure show its output."""
    cmd = [str(c) for c in cmd]
    proc = warm.run_command(cmd, timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def cpu_workers(args, workers=2, by_name=False):
    """scripts/launch_cpu_workers.py's command line for *workers* ranks of *args* (a
    fairseq-train command line, as :func:`train_args` gives): the venv's fairseq-train by its
    path, or by its name (found on PATH) when *by_name*."""
    fairseq_train, *rest = args
    return [sys.executable, REPO / "scripts" / "launch_cpu_workers.py", str(workers), "--",
            fairseq_train if by_name else BIN / fairseq_train, *rest]


def run_cpu_workers(args, workers=2, timeout=600, check=True):
    """:func:`run` of :func:`cpu_workers`, each rank's fairseq-train started warm: the
    launcher starts it by name, and a shim first on PATH forks it from a warm server
    (tests/warm_shims.py) instead of ~6 s of imports per rank. Each rank is still a process
    of its own with its own Assistant, output and exit code; but the launcher's children are
    the shims, so a test that reads or signals the workers' process tree starts them with
    ``subprocess`` and :func:`cpu_workers` instead."""
    return run(cpu_workers(args, workers, by_name=True), timeout=timeout, check=check,
               env=warm_shims.environment(dict(os.environ)))


def make_binarized(root, n_train=600, n_valid=60, seed=0, features=True, noisy=0.3):
    """Raw text -> fairseq-preprocess -> autoassist-features; returns the data dir. *noisy*:
    the share of training pairs with a random target (write_parallel)."""
    raw, data = Path(root) / "raw", Path(root) / "data-bin"
    write_parallel(raw, "train", n_train, seed=seed, noisy=noisy)
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


LABEL_SMOOTHED = ("--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1")


def train_args(data, save_dir, arch_args=TINY_TRANSFORMER, extra=(), criterion=LABEL_SMOOTHED):
    return ["fairseq-train", data, "--user-dir", USER_DIR, "--task", "autoassist_translation",
            *arch_args, "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "20", *criterion, "--max-tokens", "600", "--cpu", "--seed", "1",
            "--save-dir", save_dir, "--log-format", "simple", "--log-interval", "10",
            "--no-epoch-checkpoints", "--num-workers", "0", "--assistant-window", "256",
            *extra]


def log_records(output, kind="train_inner"):
    """The ``key=value`` fields of fairseq's simple-format log lines of one kind."""
    records = []
    for line in output.splitlines():
        if f"| {kind} |" not in line:
            continue
        fields = {}
        for part in line.split("|")[-1].replace(",", " ").split():
            if "=" in part:
                key, value = part.split("=", 1)
                try:
                    fields[key] = float(value)
                except ValueError:
                    fields[key] = value
        records.append(fields)
    return records


def running(pid):
    """True while *pid* runs (a zombie waiting for its reaper has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_trace(trace_dir, rank=0):
    """``(epoch, update, ids)`` of every batch a run trained (``--assistant-trace-dir``)."""
    rows = []
    with open(Path(trace_dir) / f"trained.rank{rank}.tsv") as f:
        for line in f:
            epoch, update, ids = line.rstrip("\n").split("\t")
            rows.append((int(epoch), int(update), [int(i) for i in ids.split(",")]))
    return rows


# acceptance that does not depend on the Assistant's state: the batch plan is reproducible
RANDOM_SKIP = ["--assistant-rule", "random", "--assistant-random-rates", "1.0,0.6"]


class FixedAssistant:
    """Stands in for the Assistant with a fixed acceptance rule: learns nothing, holds no
    state. Subclasses give ``accept_probability(ids)``."""

    stats = {"threshold": 0.0, "lambda": 0.0, "accuracy": 0.0, "loss_batches": 0}

    def accept_probability(self, ids):
        raise NotImplementedError

    def begin_pass(self, data_pass):
        pass

    def learn(self, ids, losses):
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def unshared_words(text: str, other: str) -> str:
    """The words of *text* that *other* lacks (``checks.words.unshared_bags`` of one
    pair), joined."""
    from autoassist_fairseq.checks.words import unshared_bags

    vocabulary, ((_, ids), _) = unshared_bags([text], [other])
    words = list(vocabulary)
    return " ".join(words[i] for i in ids)
