"""Every script of scripts/, the research tools (research/) and the autoassist-features
command answer --help with a description of each of its options and an example.

Python scripts are checked through their argparse parsers (every action has a help text,
every parser an epilog with an example) and through the text --help prints; bash
scripts through their --help text, against the options their ``case`` labels accept.
"""

import argparse
import re
import runpy
import sys

import pytest

from scripts_helpers import SCRIPTS, run

PYTHON_SCRIPTS = ["clean_corpus.py", "spm_train_encode.py", "launch_cpu_workers.py",
                  "average_checkpoints.py", "sacrebleu_score.py", "make_synthetic_corpus.py",
                  "config_to_args.py", "research.benchmark_assistant",
                  "research.benchmark_padding", "research.drop_noise", "research.compare_results",
                  "research.bench", "research.history_ranking", "research.add_noise",
                  "research.benchmark_overhead", "research.fingerprint_cost",
                  "research.fixed_budget", "research.fixed_budget_report",
                  "research.noise_report", "research.oracle_curve", "research.pair_classifier",
                  "research.reducible_from_raw", "research.replay_assistant", "research.copied_outputs",
                  "research.langid_bar", "research.merge_run", "research.features_time",
                  "research.repeat_corpus", "research.check_pairs", "research.dynamics_mix",
                  "research.dynamics_report", "research.schedule_report",
                  "autoassist_fairseq.features.build:cli_main",
                  "autoassist_fairseq.tools.check_report:cli_main",
                  "autoassist_fairseq.tools.filter:cli_main",
                  "autoassist_fairseq.tools.score_pairs:cli_main"]
BASH_SCRIPTS = ["prepare-corpus.sh", "prepare-wmt14en2de.sh", "evaluate.sh", "demo.sh",
                "setup_env.sh", "_common.sh", "test.sh"]


class _Parsed(Exception):
    """Raised instead of parsing: carries the parser that a script built."""

    def __init__(self, parser):
        super().__init__()
        self.parser = parser


def run_script(target, argv):
    """Run a script's main (a path under scripts/, module:function, or a module run as
    ``python -m``) with *argv*."""
    if ":" in target:
        module, func = target.split(":")
        __import__(module)
        sys.argv = [module] + argv
        return getattr(sys.modules[module], func)(argv)
    if not target.endswith(".py"):
        sys.argv = [target] + argv
        return runpy.run_module(target, run_name="__main__", alter_sys=True)
    sys.argv = [str(SCRIPTS / target)] + argv
    return runpy.run_path(str(SCRIPTS / target), run_name="__main__")


def the_parser(target, monkeypatch):
    def capture(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(_Parsed) as e:
        run_script(target, [])
    return e.value.parser


def undescribed(parser, path=""):
    """(parser path, option) of every argparse action without a help text, and of every
    parser without an example in its epilog."""
    problems = []
    if "example" not in (parser.epilog or "").lower():
        problems.append((path or parser.prog, "an epilog with an example"))
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        if not (action.help and action.help.strip() and action.help != argparse.SUPPRESS):
            problems.append((path or parser.prog, name))
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if not choice.help:
                    problems.append((path or parser.prog, f"subcommand {choice.dest}"))
            for sub_name, sub in action.choices.items():
                problems += undescribed(sub, f"{path or parser.prog} {sub_name}")
    return problems


def subcommands(parser):
    return [name for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            for name in a.choices]


@pytest.mark.parametrize("target", PYTHON_SCRIPTS)
def test_python_script_help_describes_every_option(target, monkeypatch, capsys):
    parser = the_parser(target, monkeypatch)
    assert undescribed(parser) == []
    monkeypatch.undo()

    # the text of --help itself (per subcommand too): every option, and the example
    for argv in [["--help"]] + [[name, "--help"] for name in subcommands(parser)]:
        monkeypatch.setattr(sys, "argv", list(sys.argv))
        with pytest.raises(SystemExit) as e:
            run_script(target, argv)
        assert e.value.code == 0
        text = capsys.readouterr().out
        assert text.startswith("usage:") and "example" in text.lower()
        sub = parser if len(argv) == 1 else next(
            a.choices[argv[0]] for a in parser._actions
            if isinstance(a, argparse._SubParsersAction))
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text, f"{target} {' '.join(argv)}: {flag} missing"
            if action.help and action.help != argparse.SUPPRESS and not action.option_strings \
                    and not isinstance(action, argparse._SubParsersAction):
                assert action.help.split()[0] in text


def accepted_options(script):
    """The options that a bash script's ``case`` labels accept."""
    options = set()
    for line in (SCRIPTS / script).read_text().splitlines():
        m = re.match(r"^\s+(-[^()\s]*(?:\|\\?\s*-?[^()\s]*)*)\)", line)
        if m:
            options.update(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", m.group(1)))
    return options


def described_in(text, option):
    """True when *option* heads a line of *text* that carries a description, on the
    same line (after two spaces) or on the more indented lines that follow."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith("-"):
            continue
        m = re.match(r"(\S.*?)(?:\s{2,}(.*))?$", stripped)
        head, desc = m.group(1), m.group(2) or ""
        if option not in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", head):
            continue
        if re.search(r"[a-z]{3}", desc):
            return True
        indent = len(line) - len(line.lstrip())
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if len(nxt) - len(nxt.lstrip()) > indent and re.search(r"[a-z]{3}", nxt) \
                and not nxt.strip().startswith("-"):
            return True
    return False


@pytest.mark.parametrize("script", BASH_SCRIPTS)
def test_bash_script_help_describes_every_option(script):
    for flag in ("--help", "-h"):
        proc = run(["bash", SCRIPTS / script, flag])
        text = proc.stdout
        assert text.startswith("Usage:"), text[:200]
        assert re.search(r"^Examples?\b", text, re.M), f"{script}: no example"
        assert described_in(text, "--help") and described_in(text, "-h")
        for option in accepted_options(script):
            assert described_in(text, option), f"{script}: {option} is not described"


def test_bash_help_checker_finds_an_undescribed_option():
    text = "Options:\n  --ratio R   drop pairs\n  --bare\n  --next X    more\n"
    assert described_in(text, "--ratio") and not described_in(text, "--bare")
    assert accepted_options("prepare-corpus.sh") >= {"--src", "--max-len", "--no-ratio-filter",
                                                     "--absolute-ratio", "-h", "--help"}
