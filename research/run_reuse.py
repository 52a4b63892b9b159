"""Reuse of a training run made by another session: is it the same fairseq-train command,
and has it finished? The command is read from research/bench's header line of the
run's train.log, else from the configuration fairseq-train logs at its start (its
``Namespace(...)`` of every argument), so runs started by a plain shell script qualify."""

import re
import shlex
from pathlib import Path

from research.bench import BenchmarkError
from research.bench.flags import LOG_FLAGS, WHERE_FLAGS, is_flag, same_command
from research.bench.logs import HEADER


def flag_values(tokens):
    """{--flag: value} of fairseq-train arguments (True for a flag without a value; the
    last occurrence wins, as with argparse)."""
    values, flag = {}, None
    for tok in map(str, tokens):
        if is_flag(tok):
            flag = tok
            values[flag] = True
        elif flag is not None:
            values[flag] = tok
            flag = None
    return values


def same_value(logged, given):
    """True when a value of fairseq's logged configuration equals a command-line value."""
    logged = logged.strip("'\"")
    if logged.startswith("[") and logged.endswith("]") and "," not in logged:
        logged = logged[1:-1].strip("'\"")
    if given is True:
        return logged == "True"
    try:
        return float(logged) == float(given)
    except ValueError:
        return logged == given


def logged_mismatches(config_line, data, args):
    """The flags of *args* (and DATA) whose value differs in the configuration a
    fairseq-train run logged (its ``Namespace(...)`` of every argument)."""
    wanted = {"--data": str(data)} | flag_values(args)
    wrong = []
    for flag, value in wanted.items():
        if flag in WHERE_FLAGS + LOG_FLAGS + ("--log-interval",):
            continue
        name = flag.lstrip("-").replace("-", "_")
        m = re.search(rf"\b{name}=('[^']*'|\[[^\]]*\]|[^,)]+)", config_line)
        if not m or not same_value(m.group(1), value):
            wrong.append(f"{flag} {value} (logged: {m.group(1) if m else 'absent'})")
    return wrong


def reusable_run(run_dir, data, args):
    """True when *run_dir* (a run of another session) finished the same fairseq-train
    command as *args* on *data* (--save-dir aside); False while it is still training; an
    error when its command or data differ. The command is read from a benchmark.py header,
    else from the configuration fairseq-train logged at its (last) start."""
    log = Path(run_dir) / "train.log"
    text = log.read_text() if log.exists() else ""
    if HEADER in text:
        last = text[text.rfind(HEADER):]
        theirs = shlex.split(last[len(HEADER):].splitlines()[0])[3:]  # after python -m module
        ours = [str(data)] + [str(t) for t in args]
        wrong = [] if same_command(theirs, ours) else [shlex.join(theirs)]
    else:
        starts = [line for line in text.splitlines() if "Namespace(" in line
                  and "fairseq_cli.train |" in line]
        if not starts:
            raise BenchmarkError(f"{log} holds neither a benchmark.py header nor fairseq's "
                                 "logged configuration: cannot check its command")
        last = text[text.rfind(starts[-1]):]
        wrong = logged_mismatches(starts[-1], data, args)
    if wrong:
        raise BenchmarkError(f"{run_dir} trained another command ({'; '.join(wrong)}); "
                             f"expected:\n  {shlex.join(map(str, args))}\n"
                             "drop --inverse-sqrt-run to train it here")
    return "done training" in last and (Path(run_dir) / "checkpoints" /
                                        "checkpoint_last.pt").exists()
