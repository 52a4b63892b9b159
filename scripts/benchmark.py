#!/usr/bin/env python3
"""Baseline, AutoAssist and a random-skip control at equal compute, on the same data,
model, seed and LR schedule.

    python scripts/benchmark.py --data DIR --config NAME --out DIR
        [--max-epoch N | --max-update N | --budget-tokens N] [--seed S ...]
        [--extra-args "..."] [--autoassist-args "..."] [--arm NAME="ARGS" ...]
        [--variant NAME] [--no-random] [--skip-bleu | --bleu-kept] [--noise-labels FILE]

Arms, for each seed, one after the other on this machine:

* ``baseline-s<seed>``: ``--task translation``, fairseq's uniform batches;
* ``autoassist-s<seed>``: ``--task autoassist_translation`` (its defaults: the ``paper``
  rule, with the pair checks when the feature file has them) plus --autoassist-args;
* ``random-s<seed>``: the control, ``--assistant-rule random --assistant-random-rates
  r1,r2,...`` with r_e = the AutoAssist arm's measured token acceptance of its data pass e
  (its "AutoAssist data pass" log lines; the last repeats), so it skips as many tokens
  per pass as AutoAssist but picks them at random; it runs after the AutoAssist arm;
* ``NAME-s<seed>`` for every ``--arm NAME="ARGS"``: ``--task autoassist_translation``
  plus ARGS (e.g. ``--arm learnable="--assistant-rule learnable"``).

Equal compute. The budget is counted in updates, so that update-counting LR schedules
(inverse_sqrt, the configs' default) see the same schedule in every arm: the baseline
trains first, with the config's --max-epoch (or --max-epoch / --max-update here, or
``--budget-tokens N``, turned into updates with the baseline's tokens per update from
fairseq's own batching of the train set); every other arm then gets ``--max-update U``,
U = the baseline's final update count, and no --max-epoch. Batches are filled to
--max-tokens in every arm, so tokens per update are about equal and a skipping arm gets
more (shorter) epochs; the actual Boss tokens are measured and reported.

The language pair is read from DATA (``train.SRC-TGT.*`` and ``dict.*.txt``) and passed to
every arm, overriding the config's; a config naming other languages is an error.
Every arm logs to OUT/<run>/train.log and saves to OUT/<run>/checkpoints; a finished run
(log says "done training", checkpoint present, same command) is reused, an interrupted one
resumes from its checkpoint_last.pt, so a comparison can span several sessions. Epoch
checkpoints, and the checkpoints saved at the validations inside epochs, are kept (the
config's --keep-last-epochs, --keep-interval-updates and --no-epoch-checkpoints are dropped
unless --skip-bleu) and each is scored once (OUT/<run>/checkpoints/bleu-checkpoint*.log).
--bleu-kept trains as --skip-bleu does (so runs made with --skip-bleu are reused, not
retrained) and scores the checkpoints the config kept: BLEU at equal tokens, at equal wall
and last, where those fall within the kept epochs; the tokens and wall to the target BLEU
are then not reported (the curve does not start at the run's start).

Measured at each validation: the validation loss (base 2), fairseq's ``wall`` (seconds since
training started, validations and checkpoint saves included; a resumed run continues the
wall of the checkpoint it resumed from), and the Boss tokens trained so far (non-padding
source + target tokens, EOS included): ``aa_boss_tok`` of the arm's log, or for the
baseline recomputed from the binarised train set with fairseq's batching. Test BLEU (beam
4, detokenised sacreBLEU, scripts/evaluate.sh) per epoch checkpoint and, with --validations,
per checkpoint saved at each validation inside an epoch. For each arm: the
validation loss and BLEU at equal Boss tokens (the smallest final token count of the arms)
and at equal wall time (the smallest final wall), linear between measurements; the tokens
and wall time to reach the baseline's best validation loss and the baseline's final BLEU
minus 0.2 (the crossing, linear between the two measurements around it). With noise labels
(``--noise-labels``, default DATA/train.noise-labels when present; see
scripts/add_noise.py), every Assistant arm's last checkpoint is diagnosed
(``autoassist-diagnose``) for the noise share of the tokens it would skip and train.
Writes results.json, results.md and curves.png (all arms in one plot per measure).
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


LANG_FLAGS = ("--source-lang", "-s", "--target-lang", "-t")
KEEP_EPOCH_FLAGS = ("--keep-last-epochs", "--no-epoch-checkpoints", "--keep-interval-updates")
BLEU_MARGIN = 0.2
BLEU_KEPT = "kept by the config"  # results' bleu_checkpoints under --bleu-kept


def build_run_args(config_tokens, kind, seed, save_dir, budget, extra, autoassist_extra,
                   langs=None, keep_epochs=False):
    """The fairseq-train arguments (without DATA) of one run.

    Args:
        config_tokens (list): the config's tokens.
        kind (str): ``baseline`` (--task translation) or an Assistant arm (any other name).
        seed (int): --seed.
        save_dir (Path): --save-dir.
        budget (list): budget flags replacing the config's --max-epoch/--max-update.
        extra (list): flags for every arm.
        autoassist_extra (list): flags for an Assistant arm only.
        langs (tuple, optional): (source, target) replacing the config's (default: None).
        keep_epochs (bool, optional): drop --keep-last-epochs, --keep-interval-updates and
            --no-epoch-checkpoints, so every saved checkpoint stays for BLEU (default: False).
    """
    drop = {"--task", "--user-dir", "--save-dir", "--seed", "--log-format"}
    if budget:
        drop |= {"--max-epoch", "--max-update"}
    if langs:
        drop |= set(LANG_FLAGS)
    if keep_epochs:
        drop |= set(KEEP_EPOCH_FLAGS)
    tokens = drop_flags(config_tokens, drop, prefixes=("--assistant-",))
    if kind != "baseline":
        tokens = ["--task", "autoassist_translation", "--user-dir", str(USER_DIR)] + tokens
    else:
        tokens = ["--task", "translation"] + tokens
    if langs:
        tokens += ["--source-lang", langs[0], "--target-lang", langs[1]]
    tokens += budget + extra + (autoassist_extra if kind != "baseline" else [])
    for flag, value in FORCED:
        if get_flag(tokens, flag) is None or flag == "--log-format":
            tokens += [flag] + ([value] if value else [])
    return tokens + ["--seed", str(seed), "--save-dir", str(save_dir)]


def data_langs(data, config_tokens, extra, subset="train"):
    """The (source, target) pair every arm trains on: DATA's, unless --extra-args names one.

    DATA's pair comes from its ``SUBSET.SRC-TGT.*.idx`` files (both dictionaries must be
    there). A config naming other languages is an error that says what to change; a config
    naming DATA's languages the other way round is overridden, with a note."""
    pairs = sorted({m.group(1, 2) for p in Path(data).glob(f"{subset}.*.idx")
                    if (m := re.fullmatch(rf"{subset}\.([^.-]+)-([^.]+)\.[^.]+\.idx", p.name))})
    missing = [f"dict.{lang}.txt" for pair in pairs for lang in pair
               if not (Path(data) / f"dict.{lang}.txt").exists()]
    if not pairs or missing:
        raise BenchmarkError(f"{data} holds no binarised '{subset}' set with its dictionaries "
                             f"(found pairs {pairs}, missing {missing}): prepare it with "
                             "scripts/prepare-corpus.sh")
    src, tgt = get_flag(extra, "--source-lang", "-s"), get_flag(extra, "--target-lang", "-t")
    if src or tgt:  # given here by the user: must be a pair the data has
        if not src or not tgt or not any({src, tgt} == set(p) for p in pairs):
            raise BenchmarkError(f"--extra-args names {src}->{tgt} but {data} holds "
                                 f"{', '.join('-'.join(p) for p in pairs)}: give both "
                                 "--source-lang and --target-lang of that pair")
        return src, tgt
    if len(pairs) != 1:
        raise BenchmarkError(f"{data} holds several pairs ({pairs}): choose one with "
                             "--extra-args '--source-lang SRC --target-lang TGT'")
    pair = pairs[0]
    c_src = get_flag(config_tokens, "--source-lang", "-s")
    c_tgt = get_flag(config_tokens, "--target-lang", "-t")
    named = {lang for lang in (c_src, c_tgt) if lang}
    if named and not named <= set(pair):
        raise BenchmarkError(
            f"the config names {c_src}->{c_tgt} but {data} holds {pair[0]}-{pair[1]}: point "
            "--data at the corpus the config is for, or use a config for this pair (its "
            f"--source-lang/--target-lang are replaced by {pair[0]}->{pair[1]})")
    if (c_src, c_tgt) == (pair[1], pair[0]):
        print(f"note: the config's {c_src}->{c_tgt} is replaced by the data's {pair[0]}->"
              f"{pair[1]}; to train {c_src}->{c_tgt} on it, add --extra-args '--source-lang "
              f"{c_src} --target-lang {c_tgt}'")
    return pair


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


def epoch_updates(counts, update_freq, epoch):
    """The baseline's updates in *epoch*: its batches over that epoch's --update-freq (a list
    whose last value holds for later epochs, as fairseq's)."""
    return math.ceil(len(counts) / update_freq[min(epoch, len(update_freq)) - 1])


def baseline_tokens_at(counts, update_freq, seed, epoch, updates):
    """(non-padding, padded) Boss tokens of the baseline after *updates* updates, epoch
    *epoch*: full earlier epochs plus the first batches of this epoch in fairseq's
    shuffled order (EpochBatchIterator shuffles the fixed batches with seed + epoch)."""
    import numpy as np
    from fairseq.data import data_utils

    done = sum(epoch_updates(counts, update_freq, e) for e in range(1, epoch))
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
def machine_record():
    """The machine a benchmark ran on: cores, processor model (/proc/cpuinfo), platform."""
    processor = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                processor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(),
            "processor": processor or None, "python": platform.python_version()}


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
    # compared without this checkout's paths: another clone (a later session's) reuses it
    header = HEADER + shlex.join(cmd).replace(sys.executable, "python").replace(
        str(REPO), "<repo>") + "\n"
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


def run_bleu(data, ckpt_dir, subset="test", checkpoint="checkpoint_best.pt"):
    """Test BLEU of ckpt_dir/CHECKPOINT via scripts/evaluate.sh (None on failure, with the
    error shown); the output is kept next to the checkpoints (bleu.log for the best,
    bleu-NAME.log for others) and reused while it is newer than the checkpoint."""
    script = REPO / "scripts" / "evaluate.sh"
    stem = Path(checkpoint).stem
    log = ckpt_dir / ("bleu.log" if checkpoint == "checkpoint_best.pt" else f"bleu-{stem}.log")
    ckpt = ckpt_dir / checkpoint
    if log.exists() and ckpt.exists() and log.stat().st_mtime > ckpt.stat().st_mtime:
        if m := re.search(r"^BLEU = ([\d.]+)", log.read_text(), re.M):
            print(f"[{ckpt_dir.parent.name}] {stem}: {m.group(0)} (from {log})")
            return float(m.group(1))
    if not script.exists():
        print(f"WARNING: {script} not found: no BLEU", file=sys.stderr)
        return None
    proc = subprocess.run(["bash", str(script), str(data), str(ckpt_dir), "--subset", subset,
                           "--checkpoint", checkpoint, "--user-dir", str(USER_DIR)],
                          capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr)
    m = re.search(r"^BLEU = ([\d.]+)", proc.stdout, re.M)
    if proc.returncode != 0 or not m:
        print(f"WARNING: evaluate.sh failed for {ckpt} (log: {log}):\n"
              + "\n".join((proc.stdout + proc.stderr).splitlines()[-15:]), file=sys.stderr)
        return None
    print(f"[{ckpt_dir.parent.name}] {stem}: {m.group(0)}", flush=True)
    return float(m.group(1))


def bleu_curve(data, ckpt_dir, curve):
    """Test BLEU of every epoch checkpoint (checkpointE.pt) of a run, of every checkpoint
    saved at a validation inside an epoch (checkpoint_E_U.pt, --save-interval-updates), and
    of its checkpoint_last.pt when the run ended elsewhere (--max-update), as points of its
    curve: {epoch, updates, boss_tokens, wall, bleu}, in update order."""
    by_epoch = {p["epoch"]: p for p in curve}  # an epoch's last validation: its end
    by_update = {p["updates"]: p for p in curve}
    todo = []
    for path in ckpt_dir.glob("checkpoint*.pt"):
        if m := re.fullmatch(r"checkpoint(\d+)\.pt", path.name):
            point = by_epoch.get(int(m.group(1)))
        elif m := re.fullmatch(r"checkpoint_\d+_(\d+)\.pt", path.name):
            point = by_update.get(int(m.group(1)))
        else:
            continue
        if point is not None:
            todo.append((point, path.name))
    if curve and curve[-1]["updates"] not in {p["updates"] for p, _ in todo} and (
            ckpt_dir / "checkpoint_last.pt").exists():
        todo.append((curve[-1], "checkpoint_last.pt"))
    points = []
    for p, name in sorted(todo, key=lambda t: t[0]["updates"]):
        bleu = run_bleu(data, ckpt_dir, checkpoint=name)
        if bleu is not None:
            points.append({k: p[k] for k in ("epoch", "updates", "boss_tokens", "wall")}
                          | {"bleu": bleu})
    return points


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
def value_at(points, key, x, value="valid_loss"):
    """*value* of *points* at points[key] == x, linear between measurements (None outside)."""
    pts = [(p[key], p[value]) for p in points if p.get(key) is not None]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return pts[0][1] if len(pts) == 1 and pts[0][0] == x else None


def crossing(points, key, target, value="valid_loss", lower_is_better=True):
    """points[key] where *value* first reaches *target*, linear between the measurement
    before and the first one at or past it; the first measurement if that one already is
    (None if never reached)."""
    sign = 1 if lower_is_better else -1
    pts = [(p[key], sign * p[value]) for p in points if p.get(key) is not None]
    goal = sign * target
    for i, (x, y) in enumerate(pts):
        if y <= goal:
            if i == 0:
                return x
            x0, y0 = pts[i - 1]
            return x0 + (x - x0) * (y0 - goal) / (y0 - y) if y0 != y else x
    return None


def arm_metrics(curve, bleus, base_curve, base_bleus, equal_tokens, equal_wall,
                bleu_from_start=True):
    """One arm's figures against its seed's baseline (the baseline's own included). Without
    *bleu_from_start* (the BLEU curves cover only the last checkpoints kept) the tokens and
    wall to the target BLEU are None: a curve already past the target at its first point
    would report that point, not where the run first reached it."""
    target_loss = min(p["valid_loss"] for p in base_curve)
    final_bleu = base_bleus[-1]["bleu"] if base_bleus else None
    target_bleu = None if final_bleu is None else final_bleu - BLEU_MARGIN
    cross_bleus, cross_base = (bleus, base_bleus) if bleu_from_start else ([], [])
    end = curve[-1]
    out = {"final": {k: end[k] for k in ("epoch", "updates", "boss_tokens", "wall",
                                          "valid_loss")},
           "final_bleu": bleus[-1]["bleu"] if bleus else None,
           "equal_tokens": equal_tokens, "equal_wall": equal_wall,
           "valid_loss_at_equal_tokens": value_at(curve, "boss_tokens", equal_tokens),
           "valid_loss_at_equal_wall": value_at(curve, "wall", equal_wall),
           "bleu_at_equal_tokens": value_at(bleus, "boss_tokens", equal_tokens, "bleu"),
           "bleu_at_equal_wall": value_at(bleus, "wall", equal_wall, "bleu"),
           "target_loss": target_loss, "target_bleu": target_bleu,
           "tokens_to_target_loss": crossing(curve, "boss_tokens", target_loss),
           "wall_to_target_loss": crossing(curve, "wall", target_loss),
           "tokens_to_target_bleu": None if target_bleu is None else crossing(
               cross_bleus, "boss_tokens", target_bleu, "bleu", lower_is_better=False),
           "wall_to_target_bleu": None if target_bleu is None else crossing(
               cross_bleus, "wall", target_bleu, "bleu", lower_is_better=False)}
    base = {"tokens_to_target_loss": crossing(base_curve, "boss_tokens", target_loss),
            "wall_to_target_loss": crossing(base_curve, "wall", target_loss),
            "tokens_to_target_bleu": None if target_bleu is None else crossing(
                cross_base, "boss_tokens", target_bleu, "bleu", lower_is_better=False),
            "wall_to_target_bleu": None if target_bleu is None else crossing(
                cross_base, "wall", target_bleu, "bleu", lower_is_better=False)}
    for key, value in base.items():
        out[key + "_ratio"] = ratio(out[key], value)
    return out


# the batch stream's line at the end of each data pass (rank 0's shard)
PASS_LINE = re.compile(r"AutoAssist data pass (\d+) \(shard 0\): accepted ([\d.]+) of its tokens")


def random_rates(records, text=""):
    """The token acceptance of an Assistant arm per data pass, as --assistant-random-rates
    (each in (0, 1], 4 decimals; passes in order), from its log's "AutoAssist data pass"
    lines (a pass logged again after a resume: the later line). The random rule applies
    its rates per data pass, and a fairseq epoch spans two passes, so the per-epoch
    ``aa_accept_tok`` would run the control's first pass below the arm's; it serves only
    for logs without pass lines (runs of older versions). The arm's last, unfinished pass
    has no line: the control goes on at the last finished pass's rate."""
    passes = {int(n): float(rate) for n, rate in PASS_LINE.findall(text)}
    if passes:
        missing = sorted(set(range(1, max(passes) + 1)) - set(passes))
        if missing:
            raise BenchmarkError(f"the AutoAssist arm's log has no line for data pass(es) "
                                 f"{missing}: rerun that arm (delete its directory)")
        values = [passes[n] for n in sorted(passes)]
    else:
        epochs = sorted((r for r in records if r["tag"] == "train" and "aa_accept_tok" in r),
                        key=lambda r: r["num_updates"])
        if not epochs:
            raise BenchmarkError("the AutoAssist arm's log has neither data pass lines nor "
                                 "aa_accept_tok on its train lines: cannot set the random "
                                 "control's rates")
        values = [r["aa_accept_tok"] for r in epochs]
    return ",".join(f"{min(1.0, max(1e-4, v)):.4f}" for v in values)


def diagnose_run(data, ckpt_dir, labels):
    """autoassist-diagnose of a run's checkpoint_last.pt with noise labels (cached in
    OUT/<run>/diagnosis.json while newer than the checkpoint); None on failure, shown."""
    ckpt, out = ckpt_dir / "checkpoint_last.pt", ckpt_dir.parent / "diagnosis.json"
    if out.exists() and ckpt.exists() and out.stat().st_mtime > ckpt.stat().st_mtime:
        return json.loads(out.read_text())
    proc = subprocess.run([sys.executable, "-m", "autoassist_fairseq.diagnose", "--data",
                           str(data), "--checkpoint", str(ckpt), "--noise-labels", str(labels),
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        print(f"WARNING: autoassist-diagnose failed for {ckpt}:\n"
              + "\n".join(proc.stderr.splitlines()[-10:]), file=sys.stderr)
        return None
    return json.loads(out.read_text())


# -- outputs -------------------------------------------------------------------------------
def plot_curves(curves, bleu_curves, per_seed, path, arms):
    """Validation loss (and test BLEU, when measured) against Boss tokens and against wall
    time, every arm in the same plot (cf. the paper's Fig. 4)."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("valid_loss", curves, "validation loss (base 2)")]
    if any(bleu_curves.values()):
        rows.append(("bleu", bleu_curves, "test BLEU"))
    fig, axes = plt.subplots(len(rows), 2, figsize=(11, 4.2 * len(rows)), squeeze=False)
    styles = ["-", "--", ":", "-."]
    colors = {arm: f"C{i}" for i, arm in enumerate(arms)}
    for r, (value, source, ylabel) in enumerate(rows):
        for c, (key, xlabel) in enumerate((("boss_tokens", "Boss tokens (non-padding src+tgt)"),
                                           ("wall", "wall-clock time (s)"))):
            ax = axes[r][c]
            for i, s in enumerate(per_seed):
                for arm in arms:
                    pts = [p for p in source.get(f"{arm}-s{s['seed']}", []) if p[key] is not None]
                    if pts:
                        ax.plot([p[key] for p in pts], [p[value] for p in pts], marker="o",
                                ms=3, color=colors[arm], ls=styles[i % 4],
                                label=f"{arm} (seed {s['seed']})")
                target = s["target_loss"] if value == "valid_loss" else s.get("target_bleu")
                if target is not None:
                    ax.axhline(target, color="gray", ls="--", lw=1, label=(
                        "target: baseline best" if value == "valid_loss" else
                        f"target: baseline final - {BLEU_MARGIN}") if i == 0 else None)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
        axes[r][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fmt(value, spec=".3f"):
    """A table cell: the value formatted, or 'n/a'."""
    return "n/a" if value is None else format(value, spec)


def fmt_tokens(value):
    """A token count in millions, to the thousand tokens (7.048M): arms often differ by less
    than the 1% that three significant digits would show."""
    return "n/a" if value is None else f"{value / 1e6:.3f}M"


def arm_rows(arms_of_seed, label):
    """Markdown rows of the equal-compute table for one seed (or the means)."""
    rows = []
    for arm, m in arms_of_seed.items():
        noise = m.get("noise") or {}
        rows.append(
            f"| {label} | {arm} | {fmt(m.get('epochs_trained'), '.2f')} | "
            f"{fmt(m['final']['updates'], '.0f')} | {fmt_tokens(m['final']['boss_tokens'])} | "
            f"{fmt(m['final']['wall'], '.0f')} | {fmt(m['valid_loss_at_equal_tokens'])} | "
            f"{fmt(m['valid_loss_at_equal_wall'])} | {fmt(m['bleu_at_equal_tokens'], '.2f')} | "
            f"{fmt(m['bleu_at_equal_wall'], '.2f')} | "
            f"{fmt(m['tokens_to_target_loss_ratio'])} / {fmt(m['wall_to_target_loss_ratio'])} | "
            f"{fmt(m['tokens_to_target_bleu_ratio'])} / {fmt(m['wall_to_target_bleu_ratio'])} | "
            f"{fmt(m.get('other_cpu_share'), '.1%')} | {fmt(noise.get('skipped'), '.1%')} / "
            f"{fmt(noise.get('trained'), '.1%')} |")
    return rows


def per_seed_arm(per_seed, seed, arm):
    """The figures of *arm* in *seed*'s row of *per_seed* ({} if absent)."""
    return next((s["arms"].get(arm) or {} for s in per_seed if s["seed"] == seed), {})


def noise_kind_rows(per_seed):
    """Markdown table: per seed and Assistant arm, the share of each label's tokens (clean
    and every noise kind) its last checkpoint would skip, with the kind's mean raw and
    reducible loss, and the share of the reducible loss its skips would remove."""
    found = [(s["seed"], arm, a["noise_by_kind"]) for s in per_seed
             for arm, a in s["arms"].items() if a.get("noise_by_kind")]
    if not found:
        return []
    kinds = sorted({k for *_, by_kind in found for k in by_kind})
    shares = any(a.get("skipped_share_reducible_loss") is not None
                 for s in per_seed for a in s["arms"].values())
    rows = ["", "## Tokens skipped by noise kind", "",
            "Share of each kind's tokens the arm's last checkpoint would skip (mean Boss "
            "loss of its pairs in brackets, raw / reducible: above the label-smoothing floor; "
            "when the feature file has pair checks, also the share of its pairs the checks "
            "flag), and the share of the reducible loss its skips would remove (density: that "
            "share / the skipped token share), from autoassist-diagnose.", "",
            "| seed | arm | " + " | ".join(kinds) + (" | reducible loss skipped (density) |"
                                                     if shares else " |"),
            "|" + "---|" * (len(kinds) + 2 + shares)]

    def cell(kind):
        flags = kind.get("pair_checks_flagged")
        flags = "" if flags is None else f"; {fmt(flags, '.1%')} flagged"
        reducible = kind.get("mean_reducible_loss")  # absent from older diagnoses
        reducible = "" if reducible is None else f" / {reducible:.2f}"
        return f"{fmt(kind['skipped_share'], '.1%')} ({kind['mean_loss']:.2f}{reducible}{flags})"

    for seed, arm, by_kind in found:
        cells = [cell(by_kind[k]) if k in by_kind else "n/a" for k in kinds]
        if shares:
            skips = per_seed_arm(per_seed, seed, arm)
            cells.append(f"{fmt(skips.get('skipped_share_reducible_loss'), '.1%')} "
                         f"({fmt(skips.get('skip_density'), '.2f')})")
        rows.append(f"| {seed} | {arm} | " + " | ".join(cells) + " |")
    return rows


def write_markdown(results, path):
    """results.md: the equal-compute table of every arm, then the baseline-vs-AutoAssist
    table of earlier versions (one row per seed plus the mean)."""
    m = results
    rows = ["## Every arm at equal compute", "",
            f"Budget: {m['budget']}", "",
            "| seed | arm | epochs | updates | Boss tokens | wall (s) | loss @ equal tokens | "
            "loss @ equal wall | BLEU @ equal tokens | BLEU @ equal wall | to target loss: "
            "tokens / wall vs base | to base BLEU - 0.2: tokens / wall vs base | other CPU | "
            "noise skipped / trained |", "|" + "---|" * 14]
    for s in results["per_seed"]:
        rows += arm_rows(s["arms"], s["seed"])
    rows += arm_rows(results["arms"], "**mean**")
    rows += ["", "## AutoAssist vs baseline", "",
             "| seed | target loss | tokens to target (AA/base) | time to target (AA/base) | "
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
    rows.append(f"| **mean** | | {fmt(m['tokens_to_target_ratio'])} | "
                f"{fmt(m['time_to_target_ratio'])} | {fmt(m['updates_to_target_ratio'])} | "
                f"{fmt(m['bleu_baseline'], '.2f')} | "
                f"{fmt(m['bleu_autoassist'], '.2f')} | {fmt(m['tokens_saved_share'], '.1%')} "
                "| | | | |")
    rows += noise_kind_rows(results["per_seed"])
    machine = ", ".join(f"{k} {v}" for k, v in m["machine"].items())
    title = "# Equal-compute benchmark" + (f" (variant {m['variant']}: "
                                           f"`{shlex.join(m['autoassist_args'])}`)"
                                           if m.get("variant") else "")
    other = [f"seed {s['seed']}: " + ", ".join(
        f"{arm} {fmt(a.get('other_cpu_share'), '.1%')}" for arm, a in s["arms"].items())
        for s in results["per_seed"]]
    pace = [f"seed {s['seed']}: baseline {fmt(s.get('wall_per_mtok_baseline'), '.1f')}, "
            f"AutoAssist {fmt(s.get('wall_per_mtok_autoassist'), '.1f')}"
            for s in results["per_seed"]]
    rows += ["", "Wall seconds per million Boss tokens: " + "; ".join(pace) + ".",
             "", "Other CPU during the runs: " + "; ".join(other) + "."]
    arms = [f"- `{arm}`: `{shlex.join(a['args'])}`" for arm, a in m["arm_args"].items()]
    text = [title, "", f"Date: {m['date']}  ", f"Machine: {machine}  ",
            f"Config: `{m['config']}`, data: `{m['data']}`", "", "```", shlex.join(m["command"]),
            "```", "", "Arms (flags beyond the config):", *arms, "", *rows, "", m["notes"], ""]
    if m.get("bleu_checkpoints") == BLEU_KEPT:
        text[-1:-1] = ["BLEU here (--bleu-kept): on the checkpoints the config kept (its last "
                       "epochs) only; tokens and wall to the target BLEU are not reported.", ""]
    Path(path).write_text("\n".join(text))


NOTES = ("Equal compute: the baseline trains first (the config's --max-epoch, or the "
         "budget given); every other arm gets --max-update = the baseline's final update "
         "count and no --max-epoch, so update-counting LR schedules are the same in every arm "
         "and, with batches filled to --max-tokens, the Boss tokens are about equal (the "
         "table gives the actual ones). Boss tokens = non-padding source+target tokens (EOS "
         "included) through forward/backward: an Assistant arm's from `aa_boss_tok` in its "
         "log, the baseline's recomputed from the train set with fairseq's batching. Wall = "
         "fairseq's `wall` (whole seconds since the start of training, validations and "
         "checkpoint saves included) on the train line of the validation's epoch. Equal tokens "
         "/ equal wall = the smallest final Boss tokens / wall of the seed's arms; values "
         "there are linear between the measurements around them. Target loss = the "
         "baseline's best validation loss; target BLEU = the baseline's final test BLEU "
         f"minus {BLEU_MARGIN}; tokens/wall to a target = where the curve first reaches it, "
         "linear between the measurement before and the first one at or past it (ratios: "
         "arm / baseline). BLEU: scripts/evaluate.sh (beam 4, detokenised sacreBLEU, test "
         "set) on every epoch checkpoint, every checkpoint saved at a validation inside an "
         "epoch and the last checkpoint (sacreBLEU signatures in "
         "OUT/<run>/checkpoints/bleu-*.log). The random arm accepts at AutoAssist's "
         "measured token acceptance of each data pass (its \"AutoAssist data pass\" log "
         "lines; logs of older versions: `aa_accept_tok` per epoch). AutoAssist vs baseline table: "
         "as earlier versions (first validation at or below the target, no interpolation; "
         "BLEU of checkpoint_best.pt; Boss tokens saved = 1 - AutoAssist's Boss tokens / "
         "(the baseline's tokens per epoch x AutoAssist's epochs); wait share = sum of "
         "`aa_wait_s` / sum of `train_wall`). Other CPU = the share of the machine's CPU time "
         "(/proc/stat) used by processes outside the run while it trained: above a few "
         "percent, its wall times are slowed by other work. Noise skipped / trained = the "
         "share of noisy Boss tokens among those the arm's last Assistant would skip / train "
         "(autoassist-diagnose; the baseline trains the corpus share); its loss shares and "
         "verdict are of the reducible loss (the label-smoothed loss minus its floor). Means "
         "are n/a when a seed has no value.")


def parse_arm(text):
    """'NAME=ARGS' of --arm -> (NAME, [args])."""
    name, sep, args = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.]+", name):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME=\"fairseq args\" with NAME of letters, digits, '_' or '.'"
            " (e.g. learnable=\"--assistant-rule learnable\")")
    return name, shlex.split(args)


EPILOG = """example (Multi30k, two seeds, the control and two more arms):
  python scripts/benchmark.py --data work/multi30k --config multi30k/transformer_small \\
      --out work/bench-m30k --seed 1 2 --max-epoch 12 \\
      --arm learnable="--assistant-rule learnable" \\
      --arm anneal="--assistant-anneal 0.125"
Rerun the same command to continue after an interruption: finished runs are reused."""


def parse_cli(argv):
    """The command line of benchmark.py."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, type=Path,
                   help="a data directory written by scripts/prepare-corpus.sh (fairseq data, "
                        "features, raw references); its language pair is used")
    p.add_argument("--config", required=True,
                   help="configs/**/NAME.args name (e.g. multi30k/transformer_small), or a path")
    p.add_argument("--out", required=True, type=Path,
                   help="output directory: one folder per run, results.json/.md, curves.png")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--max-epoch", type=int,
                        help="the baseline's epochs (default: the config's --max-epoch)")
    budget.add_argument("--max-update", type=int, help="the baseline's updates")
    budget.add_argument("--budget-tokens", type=float,
                        help="the baseline's Boss tokens (non-padding src+tgt), turned into "
                             "updates with its tokens per update (default: what the config's "
                             "--max-epoch gives)")
    p.add_argument("--seed", type=int, nargs="+", help="seeds (default: the config's, or 1)")
    p.add_argument("--extra-args", default="", help="more fairseq-train flags, every arm")
    p.add_argument("--validations", type=int, default=10,
                   help="validations per run, evenly over the baseline's updates "
                        "(--validate-interval-updates, a multiple of --log-interval), besides "
                        "those at epoch ends, each with a checkpoint scored for BLEU "
                        "(--save-interval-updates; not with --skip-bleu); 0: at epoch ends "
                        "only, as before this option (default: 10)")
    p.add_argument("--autoassist-args", default="",
                   help="more flags for the autoassist arm only")
    p.add_argument("--arm", action="append", type=parse_arm, default=[], metavar='NAME="ARGS"',
                   help="one more --task autoassist_translation arm with these flags "
                        "(repeatable); runs NAME-s<seed>")
    p.add_argument("--variant", default="", help="name of these --autoassist-args: runs "
                   "autoassist-NAME-s<seed> and random-NAME-s<seed>, writes results-NAME.*, "
                   "shares the baseline runs")
    p.add_argument("--async", dest="async_arms", action="store_true",
                   help="run the AutoAssist arms with the Assistant in its own process, as "
                        "plain use does (default: --assistant-sync, so that a rerun trains the "
                        "same batches and two arms differ by their rules, not by timing)")
    p.add_argument("--no-random", action="store_true",
                   help="leave out the random-skip control arm")
    p.add_argument("--skip-bleu", action="store_true",
                   help="no test BLEU (evaluate.sh); epoch checkpoints follow the config")
    p.add_argument("--bleu-kept", action="store_true",
                   help="train as --skip-bleu does (runs made with it are reused), then score "
                        "test BLEU on the checkpoints the config kept (its last epochs): BLEU "
                        "at equal tokens and last, no tokens to the target BLEU")
    p.add_argument("--noise-labels", type=Path, default=None,
                   help="labels of the raw training pairs (scripts/add_noise.py), for the noise "
                        "report (default: DATA/train.noise-labels when present; needs "
                        "DATA/train.kept-lines)")
    return p.parse_args(argv)


def updates_for_tokens(counts, update_freq, tokens):
    """Baseline updates that train about *tokens* Boss tokens (its mean tokens per update
    of an epoch; at least 1)."""
    per_epoch = epoch_updates(counts, update_freq, 1)
    return max(1, round(tokens / (counts[:, 0].sum() / per_epoch)))


def budget_updates(counts, update_freq, tokens):
    """The baseline's updates under *tokens* (its run arguments): --max-update, else
    --max-epoch full epochs of fairseq's batches; None without either."""
    if (max_update := get_flag(tokens, "--max-update")) is not None and int(max_update) > 0:
        return int(max_update)
    if (max_epoch := get_flag(tokens, "--max-epoch")) is None:
        return None
    return sum(epoch_updates(counts, update_freq, e) for e in range(1, int(max_epoch) + 1))


def validation_flags(tokens, updates, validations, checkpoints=False):
    """--validate-interval-updates for about *validations* validations over *updates*: with
    a validation only at epoch ends, a 2-epoch budget has 2 points and every figure between
    them is a straight line. A multiple of --log-interval, so each validation's Boss tokens
    are read from the train_inner line of its own update. With *checkpoints* (test BLEU
    wanted), also --save-interval-updates at the same step: fairseq then saves
    checkpoint_E_U.pt at every such validation, and BLEU is scored there too, not only at
    epoch ends. [] when 0, or when the config or --extra-args sets an interval."""
    if not validations or not updates or get_flag(tokens,
                                                  "--validate-interval-updates") is not None:
        return []
    log_interval = int(get_flag(tokens, "--log-interval", default=100))
    step = str(math.ceil(math.ceil(updates / validations) / log_interval) * log_interval)
    flags = ["--validate-interval-updates", step]
    if checkpoints and get_flag(tokens, "--save-interval-updates") is None:
        flags += ["--save-interval-updates", step]
    return flags


def benchmark_seed(seed, ctx):
    """Train (or reuse) every arm of one seed: their curves, BLEU curves and a result row."""
    data, out, tokens, extra = ctx["data"], ctx["out"], ctx["tokens"], ctx["extra"]
    langs, keep = ctx["langs"], not (ctx["skip_bleu"] or ctx["bleu_kept"])
    base_name = f"baseline-s{seed}"
    probe = build_run_args(tokens, "baseline", seed, out, ctx["budget"], extra, [], langs)
    counts, update_freq = baseline_batches(data, probe, seed)
    budget = ctx["budget"]
    if ctx["budget_tokens"]:
        budget = ["--max-update", str(updates_for_tokens(counts, update_freq,
                                                         ctx["budget_tokens"]))]
    probe = build_run_args(tokens, "baseline", seed, out, budget, extra, [], langs)
    extra = extra + validation_flags(probe, budget_updates(counts, update_freq, probe),
                                     ctx["validations"], checkpoints=keep)
    args = {"baseline": build_run_args(tokens, "baseline", seed, out / base_name / "checkpoints",
                                       budget, extra, [], langs, keep)}
    texts = {"baseline": run_training(base_name, data, args["baseline"], out)}
    logs = {"baseline": parse_log(texts["baseline"])}
    updates = int(max(r["num_updates"] for r in logs["baseline"] if r["tag"] == "train"))
    arm_budget = ["--max-update", str(updates)]
    for arm, arm_args in ctx["arms"].items():
        if arm == ctx["random_run"]:  # the control skips at AutoAssist's measured rates
            arm_args = arm_args + ["--assistant-random-rates", random_rates(
                logs[ctx["aa_run"]], texts[ctx["aa_run"]])]
        name = f"{arm}-s{seed}"
        args[arm] = build_run_args(tokens, arm, seed, out / name / "checkpoints", arm_budget,
                                   extra, arm_args, langs, keep)
        texts[arm] = run_training(name, data, args[arm], out)
        logs[arm] = parse_log(texts[arm])

    curves = {"baseline": build_curve(logs["baseline"], lambda e, u, _: baseline_tokens_at(
        counts, update_freq, seed, e, u))}
    for arm in ctx["arms"]:
        curves[arm] = build_curve(logs[arm], lambda e, u, train: (
            int(train["aa_boss_tok"]) if "aa_boss_tok" in train else None, None))
    if not all(curves.values()):
        raise BenchmarkError(f"no validation lines in the train.log files of seed {seed} in {out}")
    bleus = {arm: [] if ctx["skip_bleu"] else bleu_curve(
        data, out / f"{arm}-s{seed}" / "checkpoints", curves[arm]) for arm in curves}
    equal_tokens = min(c[-1]["boss_tokens"] for c in curves.values()
                       if c[-1]["boss_tokens"] is not None)
    equal_wall = min(c[-1]["wall"] for c in curves.values() if c[-1]["wall"] is not None)
    noise_corpus = None
    arms = {}
    for arm in curves:
        m = arm_metrics(curves[arm], bleus[arm], curves["baseline"], bleus["baseline"],
                        equal_tokens, equal_wall, bleu_from_start=keep)
        m["epochs_trained"] = epochs_trained(logs[arm])
        m["other_cpu_share"] = other_cpu_share(out / f"{arm}-s{seed}" / "cpu.json")
        if ctx["noise_labels"] and arm != "baseline":
            d = diagnose_run(data, out / f"{arm}-s{seed}" / "checkpoints", ctx["noise_labels"])
            m["noise"] = d and d["noise"]["assistant"]
            m["noise_by_kind"] = d and d["noise"].get("by_kind")
            m["verdict"] = d and d["verdict"]  # on the reducible loss
            m["skipped_share_reducible_loss"] = d and d.get("skipped_share_reducible_loss")
            m["skip_density"] = d and d.get("skip_density_assistant")
            noise_corpus = noise_corpus or (d and d["noise"]["assistant"]["corpus"])
        arms[arm] = m
    if ctx["noise_labels"]:  # uniform batches train every pair: the corpus share
        arms["baseline"]["noise"] = {"skipped": None, "trained": noise_corpus,
                                     "corpus": noise_corpus}

    aa = ctx["aa_run"]
    row = {"seed": seed, **compare(curves["baseline"], curves[aa]),
           **assistant_stats(logs[aa], int(counts[:, 0].sum())),
           "baseline_tokens_per_epoch": int(counts[:, 0].sum()),
           "baseline_padded_tokens_per_epoch": int(counts[:, 1].sum()),
           "baseline_batches_per_epoch": len(counts), "budget_updates": updates,
           "target_bleu": arms["baseline"]["target_bleu"], "arms": arms}
    for kind, arm in (("baseline", "baseline"), ("autoassist", aa)):
        row[f"other_cpu_share_{kind}"] = arms[arm]["other_cpu_share"]
        row[f"bleu_{kind}"] = None if ctx["skip_bleu"] else best_bleu(
            data, out / f"{arm}-s{seed}" / "checkpoints", curves[arm], bleus[arm])
    named = {f"{arm}-s{seed}": c for arm, c in curves.items()}
    return named, {f"{arm}-s{seed}": b for arm, b in bleus.items()}, row, args


def best_bleu(data, ckpt_dir, curve, bleus):
    """BLEU of checkpoint_best.pt: its epoch checkpoint's when scored (same weights: the
    first validation at the best loss), else evaluate.sh on checkpoint_best.pt."""
    best = min(curve, key=lambda p: p["valid_loss"])
    same = [b["bleu"] for b in bleus if b["updates"] == best["updates"]]
    return same[0] if same else run_bleu(data, ckpt_dir)


def mean_arms(per_seed):
    """Per arm, the mean over seeds of each figure (None when a seed has none)."""
    arms = {}
    for arm in per_seed[0]["arms"]:
        rows = [s["arms"][arm] for s in per_seed if arm in s["arms"]]
        m = {k: mean([r[k] for r in rows]) for k, v in rows[0].items()
             if isinstance(v, (int, float)) or v is None}
        m["final"] = {k: mean([r["final"][k] for r in rows]) for k in rows[0]["final"]}
        if "noise" in rows[0]:
            m["noise"] = {k: mean([(r["noise"] or {}).get(k) for r in rows])
                          for k in ("skipped", "trained", "corpus")}
        arms[arm] = m
    return arms


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
    if (not budget and not a.budget_tokens
            and get_flag(tokens + extra, "--max-epoch", "--max-update") is None):
        raise BenchmarkError("no budget: give --max-epoch, --max-update or --budget-tokens "
                             "(the config has none)")
    if a.budget_tokens is not None and a.budget_tokens <= 0:
        raise BenchmarkError(f"--budget-tokens {a.budget_tokens}: must be > 0")
    if a.skip_bleu and a.bleu_kept:
        raise BenchmarkError("--skip-bleu and --bleu-kept: choose one (--bleu-kept scores the "
                             "checkpoints a --skip-bleu run kept)")
    if a.validations < 0:
        raise BenchmarkError(f"--validations {a.validations}: must be >= 0 (0: at epoch ends "
                             "only)")
    langs = data_langs(data, tokens, extra)  # fail early on an unknown language pair
    if a.variant and not re.fullmatch(r"[A-Za-z0-9_.]+", a.variant):
        raise BenchmarkError(f"--variant {a.variant!r}: use letters, digits, '_' or '.' only")
    suffix = f"-{a.variant}" if a.variant else ""
    aa_run, random_run = "autoassist" + suffix, "random" + suffix
    arms = {aa_run: aa_extra}
    if not a.no_random:
        arms[random_run] = ["--assistant-rule", "random"]
    for name, arm_args in a.arm:
        if name in arms or name == "baseline" or name.startswith(("autoassist", "random")):
            raise BenchmarkError(f"--arm {name}: the name is taken (baseline, autoassist*, "
                                 "random*) or given twice: choose another")
        arms[name] = arm_args
    if not a.async_arms:  # runs that repeat exactly: margins are not timing noise
        arms = {name: args + ["--assistant-sync"] * ("--assistant-sync" not in args)
                for name, args in arms.items()}
    labels = a.noise_labels or (data / "train.noise-labels")
    if a.noise_labels and not labels.exists():
        raise BenchmarkError(f"--noise-labels {labels} not found")
    if labels.exists() and not (data / "train.kept-lines").exists():
        raise BenchmarkError(f"{data}/train.kept-lines not found: the noise labels follow the "
                             "raw lines; rerun scripts/prepare-corpus.sh to write it")
    ctx = {"data": data, "out": out, "tokens": tokens, "extra": extra, "langs": langs,
           "budget": budget, "budget_tokens": a.budget_tokens, "arms": arms,
           "aa_run": aa_run, "random_run": None if a.no_random else random_run,
           "validations": a.validations,
           "skip_bleu": a.skip_bleu, "bleu_kept": a.bleu_kept,
           "noise_labels": labels if labels.exists() else None}
    curves, bleu_curves, per_seed, run_args = {}, {}, [], {}
    for seed in seeds:
        seed_curves, seed_bleus, row, args = benchmark_seed(seed, ctx)
        curves.update(seed_curves)
        bleu_curves.update(seed_bleus)
        per_seed.append(row)
        run_args = run_args or args
    results = {key: mean([s[key] for s in per_seed]) for key in (
        "tokens_to_target_ratio", "time_to_target_ratio", "updates_to_target_ratio",
        "bleu_baseline", "bleu_autoassist", "tokens_saved_share")}
    budget_text = (f"baseline: {shlex.join(budget) if budget else 'the config'}"
                   + (f", --budget-tokens {a.budget_tokens:g} as --max-update"
                      if a.budget_tokens else "")
                   + "; other arms: --max-update = the baseline's updates ("
                   + ", ".join(f"seed {s['seed']}: {s['budget_updates']}" for s in per_seed)
                   + ")")
    results.update(
        per_seed=per_seed, curves=curves,
        command=[sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv)),
        date=time.strftime("%Y-%m-%d %H:%M:%S %z"),
        machine=machine_record(),
        config=str(config), data=str(data), notes=NOTES, variant=a.variant,
        autoassist_args=aa_extra,
        wall_source="fairseq 'wall' of the train line of the validation's epoch (whole "
                    "seconds since training start, validations and checkpoint saves included)",
        arms=mean_arms(per_seed), bleu_curves=bleu_curves, budget=budget_text,
        bleu_checkpoints=None if a.skip_bleu else BLEU_KEPT if a.bleu_kept else "all",
        languages=list(langs), noise_labels=str(ctx["noise_labels"] or "") or None,
        arm_args={"baseline": {"args": ["--task", "translation"]}} | {
            arm: {"args": arm_args} for arm, arm_args in arms.items()},
        run_args=run_args)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}{suffix}.{ext}"
             for stem, ext in (("results", "json"), ("results", "md"), ("curves", "png"))]
    paths[0].write_text(json.dumps(results, indent=2) + "\n")
    write_markdown(results, paths[1])
    plot_curves(curves, bleu_curves, per_seed, paths[2], ["baseline", *arms])
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
