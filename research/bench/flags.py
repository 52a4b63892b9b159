"""The fairseq-train command line of each arm: configs (.args files), flags, languages."""

import re
import shlex
from pathlib import Path

from . import CONFIGS, USER_DIR, BenchmarkError
from .logs import PASS_LOG

# flags every run gets (research/gpu/run_benchmark.py drops --cpu from this list on a GPU);
# fairseq's JSON log lines are the records logs.parse_log reads
FORCED = [("--log-format", "json"), ("--log-interval", "50"), ("--cpu", None)]
LANG_FLAGS = ("--source-lang", "-s", "--target-lang", "-t")
KEEP_EPOCH_FLAGS = ("--keep-last-epochs", "--no-epoch-checkpoints", "--keep-interval-updates")
# flags that name where a run writes, not what it trains: two commands that differ only in
# them train the same run (a finished run made without the pass log is reused as it is)
WHERE_FLAGS = ("--save-dir", "--assistant-pass-log")
# flags that set how a run logs, not what it trains: a finished run logged in fairseq's
# simple format is reused as it is
LOG_FLAGS = ("--log-format",)


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


def same_command(a, b):
    """True when the fairseq-train token lists *a* and *b* train the same run."""
    same = WHERE_FLAGS + LOG_FLAGS
    return drop_flags(list(map(str, a)), same) == drop_flags(list(map(str, b)), same)


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
    if ("--cpu", None) not in FORCED:  # on a GPU (run_benchmark --gpu): the config's too
        drop.add("--cpu")
    tokens = drop_flags(config_tokens, drop, prefixes=("--assistant-",))
    if kind != "baseline":
        tokens = ["--task", "autoassist_translation", "--user-dir", str(USER_DIR)] + tokens
    else:
        tokens = ["--task", "translation"] + tokens
    if langs:
        tokens += ["--source-lang", langs[0], "--target-lang", langs[1]]
    tokens += budget + extra
    if kind != "baseline":  # the pass log beside the run's train.log (save_dir's parent)
        tokens += autoassist_extra + ["--assistant-pass-log",
                                      str(Path(save_dir).parent / PASS_LOG)]
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

