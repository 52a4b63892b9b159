#!/usr/bin/env python3
"""Baseline vs AutoAssist: train both on the same data, model, schedule, seed and budget.

    python scripts/benchmark.py --data DIR --config NAME --out DIR
        [--max-epoch N | --max-update N] [--seed S ...] [--extra-args "..."]
        [--autoassist-args "..."] [--variant NAME] [--skip-bleu]

For each seed, one after the other on this machine: ``baseline-s<seed>`` (``--task
translation``, fairseq's uniform batches) and ``autoassist-s<seed>`` (``--task
autoassist_translation --user-dir <repo>/autoassist_fairseq`` plus --autoassist-args).
``--config`` is a name of a ``configs/**/NAME.args`` file or a path to an .args file.
Each run logs to OUT/<run>/train.log and saves to OUT/<run>/checkpoints; a finished run
(log says "done training", checkpoint present, same command) is reused, an interrupted
one resumes from its checkpoint_last.pt. ``--variant NAME`` names the AutoAssist runs
``autoassist-NAME-s<seed>`` and the outputs results-NAME.*, curves-NAME.png, so settings
tried one at a time (``--autoassist-args``) share the baseline runs of one OUT directory.

Measured at each validation: the validation loss (base 2), fairseq's ``wall`` (seconds
since training started, validations and checkpoint saves included; taken from the train
line of the same epoch, which fairseq prints after that epoch's validation, rounded to
whole seconds), and the Boss tokens trained so far (non-padding source + target tokens,
EOS included). AutoAssist's come from its log (``aa_boss_tok``); the baseline's are
recomputed from the binarised train set with fairseq's own batching, padded tokens too.
Target = the baseline's best validation loss; the first validation of a run at or below it
gives tokens-to-target and time-to-target. Writes results.json, results.md and curves.png.
"""

import argparse
import json
import math
import os
import platform
import re
import resource
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
USER_DIR = REPO / "autoassist_fairseq"
CONFIGS = REPO / "configs"
FORCED = [("--log-format", "simple"), ("--log-interval", "50"), ("--cpu", None)]
HEADER = "==== benchmark.py run: "
# fairseq-train, with the plugin's checkpoint-loading fix (torch >= 2.6 refuses fairseq's
# argparse.Namespace) applied first, so that a baseline run (--task translation, no
# --user-dir) can resume from its checkpoint too; nothing else of the plugin is used
# (imported after fairseq_cli.train, whose import sets up fairseq's log format)
LAUNCH = ("import sys; from fairseq_cli.train import cli_main; import autoassist_fairseq.compat; "
          "sys.argv[0] = 'fairseq-train'; cli_main()")


class BenchmarkError(RuntimeError):
    """A failure the user can act on; main() prints it without a traceback."""


# -- command lines -------------------------------------------------------------------------
def is_flag(token):
    """True for ``--name``/``-s`` tokens, False for values (negative numbers included)."""
    return token.startswith("-") and not re.fullmatch(r"-[\d.]+(e-?\d+)?", token)


def read_args_file(path):
    """The fairseq-train tokens of an .args file (one flag per line, ``#`` comments)."""
    tokens = []
    for line in Path(path).read_text().splitlines():
        tokens += shlex.split(line, comments=True)
    return tokens


def drop_flags(tokens, names=(), prefixes=()):
    """*tokens* without the flags in *names* or starting with *prefixes*, values included."""
    out, skipping = [], False
    for tok in tokens:
        if is_flag(tok):
            name = tok.split("=", 1)[0]
            skipping = name in names or name.startswith(tuple(prefixes))
        if not skipping:
            out.append(tok)
    return out


def get_flag(tokens, *names, default=None):
    """The value of the last occurrence of a flag (True for a flag without a value)."""
    value = default
    for i, tok in enumerate(tokens):
        name, _, inline = tok.partition("=")
        if is_flag(tok) and name in names:
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            value = inline or (nxt if nxt is not None and not is_flag(nxt) else True)
    return value


def find_config(name):
    """Path of the .args config *name* (a path, or a name under configs/**)."""
    if Path(name).is_file():
        return Path(name)
    stem = name[:-5] if name.endswith(".args") else name
    found = sorted(p for p in CONFIGS.rglob("*.args")
                   if p.stem == stem or str(p.relative_to(CONFIGS))[:-5] == stem)
    available = sorted(str(p.relative_to(CONFIGS))[:-5] for p in CONFIGS.rglob("*.args"))
    if len(found) != 1:
        what = "is ambiguous" if found else "was not found"
        raise BenchmarkError(f"config '{name}' {what}; available in {CONFIGS}: "
                             + (", ".join(available) or "none"))
    return found[0]


def build_run_args(config_tokens, kind, seed, save_dir, budget, extra, autoassist_extra):
    """The fairseq-train arguments (without DATA) of one run; kind is baseline/autoassist."""
    drop = {"--task", "--user-dir", "--save-dir", "--seed", "--log-format"}
    if budget:
        drop |= {"--max-epoch", "--max-update"}
    tokens = drop_flags(config_tokens, drop, prefixes=("--assistant-",))
    if kind == "autoassist":
        tokens = ["--task", "autoassist_translation", "--user-dir", str(USER_DIR)] + tokens
    else:
        tokens = ["--task", "translation"] + tokens
    tokens += budget + extra + (autoassist_extra if kind == "autoassist" else [])
    for flag, value in FORCED:
        if get_flag(tokens, flag) is None or flag == "--log-format":
            tokens += [flag] + ([value] if value else [])
    return tokens + ["--seed", str(seed), "--save-dir", str(save_dir)]


def infer_langs(data, tokens):
    """(source, target) languages: from the flags, else from DATA's train file names."""
    src = get_flag(tokens, "--source-lang", "-s")
    tgt = get_flag(tokens, "--target-lang", "-t")
    if src and tgt:
        return src, tgt
    subset = get_flag(tokens, "--train-subset", default="train")
    pairs = sorted({m.group(1, 2) for p in Path(data).glob(f"{subset}.*.idx")
                    if (m := re.fullmatch(rf"{subset}\.([^.-]+)-([^.]+)\.[^.]+\.idx", p.name))})
    if len(pairs) != 1:
        raise BenchmarkError(f"cannot infer the language pair from {data} (found {pairs}); "
                             "give --source-lang/--target-lang in --extra-args")
    return pairs[0]


# -- the baseline's Boss tokens ------------------------------------------------------------
def baseline_batches(data, tokens, seed):
    """Per-batch (non-padding, padded) src+tgt tokens of fairseq's translation batching
    for this run, in fairseq's (unshuffled) batch order; also the update frequency."""
    import numpy as np
    from fairseq.data import Dictionary, LanguagePairDataset, data_utils

    src, tgt = infer_langs(data, tokens)
    prefix = f"{data}/{get_flag(tokens, '--train-subset', default='train')}.{src}-{tgt}."
    dicts = [Dictionary.load(f"{data}/dict.{lang}.txt") for lang in (src, tgt)]
    s = data_utils.load_indexed_dataset(prefix + src, dicts[0])
    t = data_utils.load_indexed_dataset(prefix + tgt, dicts[1])
    if s is None or t is None:
        raise BenchmarkError(f"no binarised train set {prefix}{{{src},{tgt}}} in {data}")
    dataset = LanguagePairDataset(s, s.sizes, dicts[0], t, t.sizes, dicts[1])
    max_tokens = get_flag(tokens, "--max-tokens")
    batch_size = get_flag(tokens, "--batch-size", "--max-sentences")
    # as the trainer's resolve_max_positions(task, model, max_tokens), model limits assumed >=
    limit = int(max_tokens) if max_tokens else math.inf
    max_pos = (min(int(get_flag(tokens, "--max-source-positions", default=1024)), limit),
               min(int(get_flag(tokens, "--max-target-positions", default=1024)), limit))
    with data_utils.numpy_seed(seed):
        indices = dataset.ordered_indices()
    indices, _ = dataset.filter_indices_by_size(indices, max_pos)
    batches = dataset.batch_by_size(
        indices, max_tokens=int(max_tokens) if max_tokens else None,
        max_sentences=int(batch_size) if batch_size else None,
        required_batch_size_multiple=int(get_flag(tokens, "--required-batch-size-multiple",
                                                  default=8)))
    counts = np.array([(s.sizes[b].sum() + t.sizes[b].sum(),
                        len(b) * (s.sizes[b].max() + t.sizes[b].max())) for b in batches])
    update_freq = [int(x) for x in str(get_flag(tokens, "--update-freq", default=1)).split(",")]
    return counts, update_freq


def baseline_tokens_at(counts, update_freq, seed, epoch, updates):
    """(non-padding, padded) Boss tokens of the baseline after *updates* updates, epoch
    *epoch*: full earlier epochs plus the first batches of this epoch in fairseq's
    shuffled order (EpochBatchIterator shuffles the fixed batches with seed + epoch)."""
    import numpy as np
    from fairseq.data import data_utils

    done = sum(math.ceil(len(counts) / update_freq[min(e, len(update_freq)) - 1])
               for e in range(1, epoch))
    n = min(len(counts), max(0, updates - done) * update_freq[min(epoch, len(update_freq)) - 1])
    order = list(range(len(counts)))
    with data_utils.numpy_seed(seed + epoch):
        np.random.shuffle(order)
    partial = counts[order[:n]].sum(axis=0) if n else np.zeros(2)
    total = counts.sum(axis=0) * (epoch - 1) + partial
    return int(total[0]), int(total[1])


# -- logs ----------------------------------------------------------------------------------
def parse_line(line):
    """(tag, epoch, fields) of a fairseq simple-format log line, or None."""
    m = re.search(r"\| (train|valid|train_inner) \| epoch (\d+)(.*)$", line)
    if not m:
        return None
    rest, fields = m.group(3), {}
    if progress := re.match(r":\s*\d+ / (\d+) ", rest):  # train_inner: "epoch 002:  3 / 47"
        fields["epoch_updates"] = float(progress.group(1))
    pairs = re.findall(r"(\w+)=([^,\s]+)", rest) or [
        tuple(seg.split(" ", 1)) for seg in rest.split(" | ") if " " in seg.strip()]
    for key, value in pairs:
        try:
            fields[key.strip()] = float(value)
        except ValueError:
            pass
    return m.group(1), int(m.group(2)), fields


def parse_log(text):
    """Records {tag, epoch, **fields} of a train.log. A resumed run restarts fairseq's wall
    clock: its walls are continued from the wall of the checkpoint it resumed from (the
    interrupted partial epoch's time is not counted). Later duplicates win."""
    records = {}
    for segment in text.split(HEADER):
        parsed = [p for p in map(parse_line, segment.splitlines()) if p and "num_updates" in p[2]]
        if not parsed:
            continue
        start = min(f["num_updates"] for _, _, f in parsed)
        earlier = [r for r in records.values() if r["tag"] == "train" and r["num_updates"] < start]
        offset = max(earlier, key=lambda r: r["num_updates"]).get("wall", 0.0) if earlier else 0.0
        for tag, epoch, fields in parsed:
            if "wall" in fields:
                fields["wall"] += offset
            records[(tag, epoch, fields["num_updates"])] = dict(fields, tag=tag, epoch=epoch)
    return list(records.values())


def build_curve(records, tokens_fn):
    """One point per validation: epoch, updates, valid_loss, wall, boss_tokens and
    boss_padded_tokens; tokens_fn(epoch, updates, train_record) -> (tokens, padded)."""
    curve = []
    for v in sorted((r for r in records if r["tag"] == "valid"), key=lambda r: r["num_updates"]):
        same_epoch = [r for r in records if r["tag"] in ("train", "train_inner")
                      and r["epoch"] == v["epoch"] and r["num_updates"] <= v["num_updates"]]
        train = max(same_epoch, key=lambda r: (r["num_updates"], r["tag"] == "train"),
                    default={})
        tokens, padded = tokens_fn(v["epoch"], int(v["num_updates"]), train)
        curve.append({"epoch": v["epoch"], "updates": int(v["num_updates"]),
                      "valid_loss": v["loss"], "wall": train.get("wall"),
                      "boss_tokens": tokens, "boss_padded_tokens": padded})
    return curve


# -- training ------------------------------------------------------------------------------
def machine_busy_seconds():
    """CPU seconds all processes of this machine have used since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def report_progress(name, line, state):
    """Print one line per epoch of the training log line *line*."""
    parsed = parse_line(line)
    if parsed and parsed[0] == "valid":
        state["valid_loss"] = parsed[2].get("loss")
    elif parsed and parsed[0] == "train":
        f = parsed[2]
        extra = (f" | boss tok {int(f['aa_boss_tok'])} | accept tok "
                 f"{f.get('aa_accept_tok')}" if "aa_boss_tok" in f else "")
        print(f"[{name}] epoch {parsed[1]} | updates {int(f.get('num_updates', 0))} | "
              f"valid loss {state['valid_loss']} | wall {f.get('wall')}s{extra}", flush=True)


def run_training(name, data, args, out):
    """Train one run (or reuse a finished one); returns the text of its train.log."""
    run_dir = out / name
    log_path, ckpt_dir = run_dir / "train.log", run_dir / "checkpoints"
    cmd = [sys.executable, "-m", "fairseq_cli.train", str(data)] + args
    header = HEADER + shlex.join(cmd) + "\n"
    old = log_path.read_text() if log_path.exists() else ""
    last = old[old.rfind(HEADER):] if HEADER in old else ""
    finished = last.startswith(header) and "done training" in last
    if finished and (ckpt_dir / "checkpoint_last.pt").exists():
        print(f"[{name}] finished before: reusing {run_dir}")
        return old
    resume = (ckpt_dir / "checkpoint_last.pt").exists()
    print(f"[{name}] {'resuming' if resume else 'training'}; log: {log_path}", flush=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    state = {"valid_loss": None}
    # CPU used by the run (Boss and Assistant) and by the whole machine: the difference is
    # other work that slowed the run down (its wall times are then not comparable)
    start = (time.monotonic(), machine_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN))
    with open(log_path, "a" if resume else "w") as log:
        log.write(header)
        log.flush()
        launch = [sys.executable, "-c", LAUNCH] + cmd[3:]  # cmd without "python -m module"
        proc = subprocess.Popen(launch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, env=env, cwd=REPO)
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                report_progress(name, line, state)
        finally:  # Ctrl-C or SIGTERM: the training (and its Assistant) ends with us
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        rc = proc.wait()
    end = (time.monotonic(), machine_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN))
    run_cpu = sum(getattr(end[2], k) - getattr(start[2], k) for k in ("ru_utime", "ru_stime"))
    (run_dir / "cpu.json").write_text(json.dumps({
        "wall_s": end[0] - start[0], "run_cpu_s": run_cpu, "machine_cpu_s": end[1] - start[1],
        "cores": os.cpu_count(), "resumed": resume}) + "\n")
    text = log_path.read_text()
    if rc != 0:
        tail = "\n".join(line[:400] for line in text.splitlines()[-30:])
        raise BenchmarkError(f"fairseq-train failed for {name} (exit {rc}); last lines of "
                             f"{log_path}:\n{tail}")
    return text


def run_bleu(data, ckpt_dir, subset="test"):
    """Test BLEU of ckpt_dir/checkpoint_best.pt via scripts/evaluate.sh (None on failure,
    with the error shown); the output is kept next to the checkpoints (bleu.log)."""
    script, log = REPO / "scripts" / "evaluate.sh", ckpt_dir / "bleu.log"
    best = ckpt_dir / "checkpoint_best.pt"
    if log.exists() and best.exists() and log.stat().st_mtime > best.stat().st_mtime:
        if m := re.search(r"^BLEU = ([\d.]+)", log.read_text(), re.M):
            print(f"[{ckpt_dir.parent.name}] {m.group(0)} (from {log})")
            return float(m.group(1))
    if not script.exists():
        print(f"WARNING: {script} not found: no BLEU", file=sys.stderr)
        return None
    proc = subprocess.run(["bash", str(script), str(data), str(ckpt_dir), "--subset", subset,
                           "--user-dir", str(USER_DIR)], capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr)
    m = re.search(r"^BLEU = ([\d.]+)", proc.stdout, re.M)
    if proc.returncode != 0 or not m:
        print(f"WARNING: evaluate.sh failed for {ckpt_dir} (log: {log}):\n"
              + "\n".join((proc.stdout + proc.stderr).splitlines()[-15:]), file=sys.stderr)
        return None
    print(f"[{ckpt_dir.parent.name}] {m.group(0)}")
    return float(m.group(1))


# -- comparison ----------------------------------------------------------------------------
def first_reaching(curve, target):
    """The first validation point with valid_loss <= target, or None."""
    return next((p for p in curve if p["valid_loss"] <= target), None)


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    return a / b if a is not None and b else None


def compare(base_curve, aa_curve):
    """Target (the baseline's best loss) and AutoAssist's tokens/time ratios to reach it."""
    target = min(p["valid_loss"] for p in base_curve)
    base, aa = first_reaching(base_curve, target), first_reaching(aa_curve, target)
    end = aa_curve[-1]
    return {"target_loss": target, "baseline_at_target": base, "autoassist_at_target": aa,
            "autoassist_final_loss": end["valid_loss"],
            # the Boss's pace: wall seconds per million Boss tokens over the whole run (the
            # Assistant's CPU use would show here as a slower AutoAssist)
            "wall_per_mtok_baseline": seconds_per_mtok(base_curve[-1]),
            "wall_per_mtok_autoassist": seconds_per_mtok(end),
            "baseline_loss_at_autoassist_tokens": loss_at_tokens(base_curve, end["boss_tokens"]),
            "target_reached": aa is not None,
            "tokens_to_target_ratio": ratio(aa and aa["boss_tokens"], base["boss_tokens"]),
            "time_to_target_ratio": ratio(aa and aa["wall"], base["wall"]),
            "updates_to_target_ratio": ratio(aa and aa["updates"], base["updates"])}


def seconds_per_mtok(point):
    """Wall seconds per million Boss tokens up to a validation point (None if unknown)."""
    return ratio(point["wall"], point["boss_tokens"] and point["boss_tokens"] / 1e6)


def loss_at_tokens(curve, tokens):
    """The curve's validation loss at *tokens* Boss tokens, linear between validations
    (None outside the curve): AutoAssist's last loss against it is the per-token gain."""
    pts = [(p["boss_tokens"], p["valid_loss"]) for p in curve if p["boss_tokens"] is not None]
    for (t0, l0), (t1, l1) in zip(pts, pts[1:]):
        if t0 <= tokens <= t1:
            return l0 + (l1 - l0) * (tokens - t0) / (t1 - t0) if t1 > t0 else l1
    return None


def epochs_trained(records):
    """Epochs a run trained, a last partial one (--max-update) as the share of its updates
    done: from fairseq's "epoch E: i / N" progress, else the longest epoch's updates."""
    ends = {r["epoch"]: r["num_updates"] for r in records if r["tag"] == "train"}
    if not ends:
        return 0.0
    last = max(ends)
    lengths = [ends[e] - ends.get(e - 1, 0) for e in ends if e == 1 or e - 1 in ends]
    # the last epoch's own length (AutoAssist's epochs differ), else the longest epoch's
    own = [r["epoch_updates"] for r in records if "epoch_updates" in r and r["epoch"] == last]
    per_epoch = max(own or [r["epoch_updates"] for r in records if "epoch_updates" in r]
                    or lengths)
    if last == 1:
        done = ends[1]
    else:  # an epoch whose start is not in the log (lost at a resume) counts as full
        done = ends[last] - ends[last - 1] if last - 1 in ends else per_epoch
    return last - 1 + min(1.0, done / per_epoch)


def assistant_stats(records, baseline_tokens_per_epoch):
    """Last-epoch Assistant figures, Boss tokens saved over the same epochs as the
    baseline's, and the Boss's wait share."""
    epochs = sorted((r for r in records if r["tag"] == "train"), key=lambda r: r["num_updates"])
    last = epochs[-1] if epochs else {}
    wait = sum(r.get("aa_wait_s", 0.0) for r in epochs)
    baseline_tokens = baseline_tokens_per_epoch * epochs_trained(records)
    return {"epochs_trained": epochs_trained(records),
            "tokens_saved_share": 1 - last["aa_boss_tok"] / baseline_tokens
            if last.get("aa_boss_tok") is not None and baseline_tokens else None,
            "accept_tok_last_epoch": last.get("aa_accept_tok"),
            "accept_sent_last_epoch": last.get("aa_accept_sent"),
            "assistant_acc": last.get("aa_acc"), "assistant_acc_chance": last.get("aa_acc_base"),
            "lambda_last": last.get("aa_lambda"), "wait_seconds": wait,
            "train_wall": sum(r.get("train_wall", 0.0) for r in epochs),
            "wait_share": ratio(wait, sum(r.get("train_wall", 0.0) for r in epochs))}


def other_cpu_share(path):
    """Share of the machine's CPU that processes other than the run used while it trained
    (None when not recorded, e.g. a run trained by an older benchmark.py)."""
    if not path.exists():
        return None
    c = json.loads(path.read_text())
    return max(0.0, c["machine_cpu_s"] - c["run_cpu_s"]) / (c["wall_s"] * c["cores"])


def mean(values):
    """Mean, or None when any value is missing (e.g. a seed that did not reach the target)."""
    return sum(values) / len(values) if values and None not in values else None


# -- outputs -------------------------------------------------------------------------------
def plot_curves(curves, per_seed, path, aa_run="autoassist"):
    """Validation loss against Boss tokens and against wall time (cf. the paper's Fig. 4)."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = ["-", "--", ":", "-."]
    for ax, key, label in ((axes[0], "boss_tokens", "Boss tokens trained (non-padding src+tgt)"),
                           (axes[1], "wall", "wall-clock time (s)")):
        for i, s in enumerate(per_seed):
            for kind, color in (("baseline", "tab:blue"), (aa_run, "tab:red")):
                pts = [p for p in curves[f"{kind}-s{s['seed']}"] if p[key] is not None]
                ax.plot([p[key] for p in pts], [p["valid_loss"] for p in pts], marker="o",
                        ms=3, color=color, ls=styles[i % 4], label=f"{kind} (seed {s['seed']})")
            ax.axhline(s["target_loss"], color="gray", ls="--", lw=1,
                       label="target: baseline best" if i == 0 else None)
        ax.set_xlabel(label)
        ax.set_ylabel("validation loss (base 2)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fmt(value, spec=".3f"):
    """A table cell: the value formatted, or 'n/a'."""
    return "n/a" if value is None else format(value, spec)


def write_markdown(results, path):
    """results.md: one table row per seed plus the mean."""
    rows = ["| seed | target loss | tokens to target (AA/base) | time to target (AA/base) | "
            "updates to target (AA/base) | BLEU base | BLEU AA | Boss tokens saved | "
            "final loss AA / base at AA's tokens | accept tok (last ep.) | "
            "Assistant acc / chance | Boss wait share |",
            "|" + "---|" * 12]
    for s in results["per_seed"]:
        note = "" if s["target_reached"] else " (not reached)"
        rows.append(f"| {s['seed']} | {s['target_loss']:.3f} | {fmt(s['tokens_to_target_ratio'])}"
                    f"{note} | {fmt(s['time_to_target_ratio'])}{note} | "
                    f"{fmt(s['updates_to_target_ratio'])} | "
                    f"{fmt(s['bleu_baseline'], '.2f')} | {fmt(s['bleu_autoassist'], '.2f')} | "
                    f"{fmt(s['tokens_saved_share'], '.1%')} | {fmt(s['autoassist_final_loss'])} "
                    f"/ {fmt(s['baseline_loss_at_autoassist_tokens'])} | "
                    f"{fmt(s['accept_tok_last_epoch'])} | "
                    f"{fmt(s['assistant_acc'])} / {fmt(s['assistant_acc_chance'])} | "
                    f"{fmt(s['wait_share'], '.1%')} |")
    m = results
    rows.append(f"| **mean** | | {fmt(m['tokens_to_target_ratio'])} | "
                f"{fmt(m['time_to_target_ratio'])} | {fmt(m['updates_to_target_ratio'])} | "
                f"{fmt(m['bleu_baseline'], '.2f')} | "
                f"{fmt(m['bleu_autoassist'], '.2f')} | {fmt(m['tokens_saved_share'], '.1%')} "
                "| | | | |")
    machine = ", ".join(f"{k} {v}" for k, v in m["machine"].items())
    title = "# AutoAssist vs baseline" + (f" (variant {m['variant']}: "
                                          f"`{shlex.join(m['autoassist_args'])}`)"
                                          if m.get("variant") else "")
    other = [f"seed {s['seed']}: baseline {fmt(s.get('other_cpu_share_baseline'), '.1%')}, "
             f"AutoAssist {fmt(s.get('other_cpu_share_autoassist'), '.1%')}"
             for s in results["per_seed"]]
    pace = [f"seed {s['seed']}: baseline {fmt(s.get('wall_per_mtok_baseline'), '.1f')}, "
            f"AutoAssist {fmt(s.get('wall_per_mtok_autoassist'), '.1f')}"
            for s in results["per_seed"]]
    rows += ["", "Wall seconds per million Boss tokens: " + "; ".join(pace) + ".",
             "", "Other CPU during the runs: " + "; ".join(other) + "."]
    text = [title, "", f"Date: {m['date']}  ", f"Machine: {machine}  ",
            f"Config: `{m['config']}`, data: `{m['data']}`", "", "```", shlex.join(m["command"]),
            "```", "", *rows, "", m["notes"], ""]
    Path(path).write_text("\n".join(text))


NOTES = ("Target = the baseline's best validation loss within the budget; a run reaches it at "
         "its first validation at or below it (no interpolation). Boss tokens = non-padding "
         "source+target tokens (EOS included) through forward/backward: AutoAssist's from "
         "`aa_boss_tok` in its log, the baseline's recomputed from the train set with fairseq's "
         "batching. Wall = fairseq's `wall` (whole seconds since the start of training, "
         "validations and checkpoint saves included) on the train line of the validation's "
         "epoch. Boss tokens saved = 1 - AutoAssist's Boss tokens / (the baseline's tokens per "
         "epoch x AutoAssist's epochs, a last partial epoch as its share of updates done). "
         "Final loss AA / base at AA's tokens = AutoAssist's last validation loss, and the "
         "baseline's at the same Boss tokens (linear between its validations): lower on "
         "the left means AutoAssist learns more per Boss token. Wait share = sum of "
         "`aa_wait_s` / sum of `train_wall` over the epochs. Other CPU = the share of the "
         "machine's CPU time (/proc/stat) used by processes outside the run while it trained: "
         "above a few percent, its wall times are slowed by other work. Means are n/a "
         "when a seed has no value (e.g. target not reached). BLEU: scripts/evaluate.sh on "
         "checkpoint_best.pt, --subset test (sacreBLEU signature in OUT/<run>/checkpoints/"
         "bleu.log).")


def parse_cli(argv):
    """The command line of benchmark.py."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--config", required=True, help="configs/**/NAME.args name, or a path")
    p.add_argument("--out", required=True, type=Path)
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--max-epoch", type=int)
    budget.add_argument("--max-update", type=int)
    p.add_argument("--seed", type=int, nargs="+", help="seeds (default: the config's, or 1)")
    p.add_argument("--extra-args", default="", help="more fairseq-train flags, both runs")
    p.add_argument("--autoassist-args", default="", help="more flags for the AutoAssist run")
    p.add_argument("--variant", default="", help="name of these --autoassist-args: runs "
                   "autoassist-NAME-s<seed>, writes results-NAME.*, shares the baseline runs")
    p.add_argument("--skip-bleu", action="store_true", help="no test BLEU (evaluate.sh)")
    return p.parse_args(argv)


def benchmark_seed(seed, data, out, tokens, budget, extra, aa_extra, skip_bleu, aa_run):
    """Train (or reuse) baseline then AutoAssist for one seed: their curves and a result row."""
    logs, names = {}, {"baseline": f"baseline-s{seed}", "autoassist": f"{aa_run}-s{seed}"}
    for kind, name in names.items():
        args = build_run_args(tokens, kind, seed, out / name / "checkpoints", budget, extra,
                              aa_extra)
        logs[kind] = parse_log(run_training(name, data, args, out))
    base_args = build_run_args(tokens, "baseline", seed, out, budget, extra, [])
    counts, update_freq = baseline_batches(data, base_args, seed)
    curves = {
        f"baseline-s{seed}": build_curve(logs["baseline"], lambda e, u, _: baseline_tokens_at(
            counts, update_freq, seed, e, u)),
        names["autoassist"]: build_curve(logs["autoassist"], lambda e, u, train: (
            int(train["aa_boss_tok"]) if "aa_boss_tok" in train else None, None))}
    if not all(curves.values()):
        raise BenchmarkError(f"no validation lines in the train.log files of seed {seed} in {out}")
    row = {"seed": seed, **compare(*curves.values()),
           **assistant_stats(logs["autoassist"], int(counts[:, 0].sum())),
           "baseline_tokens_per_epoch": int(counts[:, 0].sum()),
           "baseline_padded_tokens_per_epoch": int(counts[:, 1].sum()),
           "baseline_batches_per_epoch": len(counts)}
    for kind, name in names.items():
        row[f"other_cpu_share_{kind}"] = other_cpu_share(out / name / "cpu.json")
        row[f"bleu_{kind}"] = None if skip_bleu else run_bleu(data, out / name / "checkpoints")
    return curves, row


def main(argv=None):
    """Parse the command line, benchmark every seed, write results.json/.md and curves.png."""
    a = parse_cli(argv)
    if not a.data.is_dir():
        raise BenchmarkError(f"data directory not found: {a.data}")
    data, out = a.data.resolve(), a.out.resolve()
    config = find_config(a.config).resolve()
    tokens = read_args_file(config)
    extra, aa_extra = shlex.split(a.extra_args), shlex.split(a.autoassist_args)
    seeds = a.seed or [int(get_flag(tokens + extra, "--seed", default=1))]
    budget = (["--max-epoch", str(a.max_epoch)] if a.max_epoch else
              ["--max-update", str(a.max_update)] if a.max_update else [])
    if not budget and get_flag(tokens + extra, "--max-epoch", "--max-update") is None:
        raise BenchmarkError("no budget: give --max-epoch or --max-update (the config has none)")
    infer_langs(data, tokens + extra)  # fail early on an unknown language pair
    if a.variant and not re.fullmatch(r"[A-Za-z0-9_.]+", a.variant):
        raise BenchmarkError(f"--variant {a.variant!r}: use letters, digits, '_' or '.' only")
    aa_run = "autoassist" + (f"-{a.variant}" if a.variant else "")
    suffix = f"-{a.variant}" if a.variant else ""
    curves, per_seed = {}, []
    for seed in seeds:
        seed_curves, row = benchmark_seed(seed, data, out, tokens, budget, extra, aa_extra,
                                          a.skip_bleu, aa_run)
        curves.update(seed_curves)
        per_seed.append(row)
    results = {key: mean([s[key] for s in per_seed]) for key in (
        "tokens_to_target_ratio", "time_to_target_ratio", "updates_to_target_ratio",
        "bleu_baseline", "bleu_autoassist", "tokens_saved_share")}
    results.update(
        per_seed=per_seed, curves=curves,
        command=[sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv)),
        date=time.strftime("%Y-%m-%d %H:%M:%S %z"),
        machine={"cpu_count": os.cpu_count(), "platform": platform.platform(),
                 "processor": platform.processor(), "python": platform.python_version()},
        config=str(config), data=str(data), notes=NOTES, variant=a.variant,
        autoassist_args=aa_extra,
        wall_source="fairseq 'wall' of the train line of the validation's epoch (whole "
                    "seconds since training start, validations and checkpoint saves included)")
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}{suffix}.{ext}"
             for stem, ext in (("results", "json"), ("results", "md"), ("curves", "png"))]
    paths[0].write_text(json.dumps(results, indent=2) + "\n")
    write_markdown(results, paths[1])
    plot_curves(curves, per_seed, paths[2], aa_run)
    print(paths[1].read_text())
    print("written: " + ", ".join(map(str, paths)))
    return results


def _terminate(signum, frame):
    raise SystemExit(f"benchmark.py: stopped by signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)  # unwinds run_training, which stops its child
    try:
        main()
    except BenchmarkError as err:
        sys.exit(f"benchmark.py: error: {err}")
