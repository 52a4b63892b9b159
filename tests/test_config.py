"""The task's flags are checked in one place (``tasks/config.check_config``), in-process:
each bad value names the flag and the fix."""

import copy
import logging

import pytest

from autoassist_fairseq.assistant import AssistantHParams
from autoassist_fairseq.tasks.config import check_config, check_criterion, check_hparams
from task_helpers import task_config


@pytest.fixture(scope="module")
def parsed():
    return task_config()


def _with(cfg, **values):
    cfg = copy.deepcopy(cfg)
    for name, value in values.items():
        setattr(cfg, "assistant_" + name, value)
    return cfg


@pytest.mark.parametrize("values, message", [
    (dict(window=0), "--assistant-window=0 must be >= 1"),
    (dict(boss_queue_size=0), "--assistant-boss-queue-size=0 must be >= 1"),
    (dict(loss_queue_size=0), "--assistant-loss-queue-size=0 must be >= 1"),
    (dict(anneal=1.0), r"--assistant-anneal=1.0 is out of range: it must be in \[0, 1\)"),
    (dict(lambda_max=1.0), "--assistant-lambda-max=1.0 is out of range"),
    (dict(rule="random"), "needs --assistant-random-rates"),
    (dict(rule="random", random_rates="0.8", pair_checks="require"),
     "random.*control must skip at random"),
])
def test_bad_flags_are_refused_naming_the_flag(parsed, values, message):
    check_config(parsed)  # the defaults pass
    with pytest.raises(ValueError, match=message):
        check_config(_with(parsed, **values))


@pytest.mark.parametrize("flags, mode, warning", [
    ((), "auto", None),
    (("--assistant-pair-checks", "auto"), "auto", None),
    (("--assistant-pair-checks", "require"), "require", None),
    (("--assistant-pair-checks", "off"), "off", None),
])
def test_pair_checks_flag_spellings(flags, mode, warning, caplog):
    with caplog.at_level(logging.WARNING):
        assert check_config(task_config(*flags)).pair_check_mode == mode
    assert not [r for r in caplog.records if "pair-checks" in r.getMessage()]


def test_the_bare_pair_checks_flag_of_the_development_versions_is_refused(capsys):
    """0.2.0 dropped the bare --assistant-pair-checks (require) and
    --assistant-no-pair-checks (off): argparse names the flag."""
    with pytest.raises(SystemExit):
        task_config("--assistant-pair-checks")
    assert "--assistant-pair-checks: expected one argument" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        task_config("--assistant-no-pair-checks")
    assert "unrecognized arguments: --assistant-no-pair-checks" in capsys.readouterr().err


@pytest.mark.parametrize("values, message", [
    (dict(pair_checks="on"), "--assistant-pair-checks on is not one of auto, require, off: "
                             "give one of them"),
    (dict(pair_checks=True), "--assistant-pair-checks True is not one of"),
])
def test_bad_pair_checks_flags_name_the_fix(parsed, values, message):
    with pytest.raises(ValueError, match=message):
        check_config(_with(parsed, **values))


def test_annealing_needs_a_run_with_an_end():
    """``--assistant-anneal`` is a share of the run: without --max-update or --max-epoch it
    would be silently ignored."""
    with pytest.raises(ValueError, match="--assistant-anneal=0.2 is a share of the run.*"
                                         "--max-update or --max-epoch"):
        check_config(task_config("--assistant-anneal", "0.2", "--stop-time-hours", "1"))
    for end in (("--max-update", "100"), ("--max-epoch", "5")):
        check_config(task_config("--assistant-anneal", "0.2", *end))


@pytest.mark.parametrize("flags, ignored", [
    (("--assistant-random-rates", "0.5"), "--assistant-random-rates 0.5 has no effect without "
                                          "--assistant-rule random"),
    (("--assistant-noise-patience", "5"), "--assistant-noise-patience 5 has no effect without "
                                          "--assistant-rule learnable or noise"),
    (("--assistant-sync", "--assistant-boss-queue-size", "8"),
     "--assistant-boss-queue-size 8 has no effect without an Assistant process"),
])
def test_a_flag_without_the_setting_it_acts_under_is_reported(flags, ignored, caplog):
    """A rule's parameter without that rule (e.g. the random control's rates, the rule
    forgotten) trains something else than asked: the run says so."""
    with caplog.at_level(logging.WARNING):
        check_config(task_config(*flags))
    assert any(ignored in r.getMessage() for r in caplog.records), caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # where they act, or left at their defaults: quiet
        check_config(task_config("--assistant-rule", "random", "--assistant-random-rates", "0.5"))
        check_config(task_config("--assistant-rule", "noise", "--assistant-noise-patience", "5"))
        check_config(task_config("--assistant-sync"))
    assert "has no effect" not in caplog.text


def test_a_trace_dir_that_is_a_file_is_refused_before_training(tmp_path):
    path = tmp_path / "trace"
    path.write_text("")
    with pytest.raises(ValueError, match="--assistant-trace-dir .* is a file: give a folder"):
        check_config(task_config("--assistant-trace-dir", str(path)))
    check_config(task_config("--assistant-trace-dir", str(tmp_path / "new")))  # made later


def test_a_pass_log_that_cannot_be_written_is_refused_before_training(tmp_path):
    """The pass log is first written at the end of a data pass: a folder, or a path in a
    folder that does not exist, would fail only then."""
    for path in (tmp_path, tmp_path / "missing" / "passes.jsonl"):
        with pytest.raises(ValueError, match=f"--assistant-pass-log {path} is a folder, or a "
                                             "file this user cannot write or create: give a "
                                             "file in a writable folder"):
            check_config(task_config("--assistant-pass-log", str(path)))
    check_config(task_config("--assistant-pass-log", str(tmp_path / "passes.jsonl")))


def test_docs_options_lists_every_assistant_flag_with_its_default():
    """docs/options.md's table of training flags is the task config's: every assistant_*
    field is a row with the field's default, and no row names a flag the config lacks."""
    import dataclasses
    import re
    from pathlib import Path

    from autoassist_fairseq.tasks.config import AutoAssistTranslationConfig

    defaults = {f.name: f.default for f in dataclasses.fields(AutoAssistTranslationConfig)
                if f.name.startswith("assistant_")}
    text = (Path(__file__).resolve().parents[1] / "docs" / "options.md").read_text()
    rows = {m.group(1).replace("-", "_"): m.group(2).strip().strip("`")
            for m in re.finditer(r"^\| `--(assistant-[a-z-]+)` \| ([^|]+) \|", text, re.M)}
    assert sorted(rows) == sorted(defaults), \
        "docs/options.md and the task config name different flags: document the new ones, " \
        "remove the stale ones"

    def documented(name, default):
        doc = rows[name]
        if isinstance(default, bool):
            return doc == ("on" if default else "off")
        if default is None or default == "":
            return doc == "none" or name == "assistant_features"  # DATA/train.SRC-TGT...
        if isinstance(default, (int, float)):
            return float(doc) == float(default)
        return doc == str(default)

    wrong = {name: (rows[name], defaults[name]) for name in rows
             if not documented(name, defaults[name])}
    assert not wrong, f"docs/options.md gives other defaults than the config: {wrong}"
    assert rows["assistant_features"] == "DATA/train.SRC-TGT.autoassist"


def _docs_rows(first_flag):
    """``{flag: default cell}`` of the docs/options.md table whose first row names
    *first_flag*; a row of several flags (``--a``, ``--b`` | 1, 2) gives each its value."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "options.md").read_text()
    table = text[text.index(f"| `{first_flag}` |"):].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        flags = re.findall(r"`(--[a-z-]+)`", cells[0])
        values = cells[1].split(", ") if len(flags) > 1 else [cells[1]]
        assert len(flags) == len(values), line
        rows.update(zip(flags, values))
    return rows


def test_docs_options_lists_every_pair_check_option_with_its_default():
    """docs/options.md's table of autoassist-features' pair-check options is its parser's
    "pair checks" group: the same flags, each with the parser's default."""
    from autoassist_fairseq.features.build import get_parser

    group = next(g for g in get_parser()._action_groups if g.title == "pair checks")
    defaults = {a.option_strings[0]: a.default for a in group._group_actions}
    rows = _docs_rows("--pair-checks")
    assert sorted(rows) == sorted(defaults), \
        "docs/options.md and autoassist-features' pair-check options name different flags: " \
        "document the new ones, remove the stale ones"
    assert rows.pop("--pair-checks").startswith(f"`{defaults.pop('--pair-checks')}` ")
    wrong = {flag: (rows[flag], default) for flag, default in defaults.items()
             if float(rows[flag]) != float(default)}
    assert not wrong, f"docs/options.md gives other defaults than autoassist-features: {wrong}"


def test_docs_options_lists_the_rex_schedulers_flags_with_their_defaults():
    """docs/options.md's table of --lr-scheduler rex is its config's fields: the numeric
    defaults as the config's, the others as the values they stand for."""
    import dataclasses

    from autoassist_fairseq.optim.rex_schedule import RexLRScheduleConfig

    fields = {"--" + f.name.replace("_", "-"): f.default
              for f in dataclasses.fields(RexLRScheduleConfig) if not f.name.startswith("_")}
    rows = _docs_rows("--max-update")
    assert sorted(rows) == sorted(fields)
    assert float(rows["--min-lr"]) == fields["--min-lr"]
    assert float(rows["--warmup-updates"]) == fields["--warmup-updates"]
    assert fields["--warmup-init-lr"] == -1 and rows["--warmup-init-lr"] == "`--min-lr`"
    # fairseq's own --max-update (required by rex) and --lr
    assert str(fields["--max-update"]) == "${optimization.max_update}"
    assert rows["--max-update"] == "(required)"
    assert str(fields["--lr"]) == "${optimization.lr}" and rows["--lr"] == "fairseq's"


@pytest.mark.parametrize("kw,flag", [
    (dict(lr=float("inf")), r"--assistant-lr=inf is out of range: it must be a finite number"),
    (dict(rule="oracle"), "--assistant-rule=oracle.*paper, random, learnable"),
    (dict(rule="random"), "--assistant-rule random needs --assistant-random-rates"),
    (dict(rule="random", random_rates="1.0,1.2"), "--assistant-random-rates.*out of range"),
    (dict(random_rates="0.5,x"), "--assistant-random-rates.*not a list of numbers"),
    (dict(noise_quantile=0.4), r"--assistant-noise-quantile=0.4.*\(0.5, 1\)"),
    (dict(noise_quantile=1.0), "--assistant-noise-quantile=1.0"),
    (dict(noise_min_decline=-0.1), r"--assistant-noise-min-decline=-0.1.*\[0, 1\)"),
    (dict(noise_patience=1), r"--assistant-noise-patience=1.*\[2, 255\]"),
    (dict(noise_patience=300), "--assistant-noise-patience=300"),
    (dict(lambda_max=1.0), "--assistant-lambda-max=1.0"),
    (dict(lr=0.0), "--assistant-lr=0.0"),
    (dict(threshold_decay=1.5), "--assistant-threshold-decay=1.5"),
    (dict(warmup=-1), "--assistant-warmup=-1"),
])
def test_out_of_range_hparams_name_the_flag(kw, flag):
    check_hparams(AssistantHParams())  # the defaults pass
    with pytest.raises(ValueError, match=flag):
        check_hparams(AssistantHParams(**kw))


@pytest.mark.parametrize("text,problem", [
    (" ", "empty"), ("1.0,,0.5", "empty"), ("1.0,abc", "not a list of numbers"),
    ("1.0,0", "out of range"), ("1.5", "out of range"), ("nan", "out of range"),
])
def test_bad_random_rates_name_the_flag(text, problem):
    with pytest.raises(ValueError, match=f"--assistant-random-rates.*{problem}"):
        check_hparams(AssistantHParams(rule="random", random_rates=text))


def test_criteria_without_one_loss_per_target_token_are_refused():
    from types import SimpleNamespace

    def compute_loss(model, net_output, sample, reduce=True):
        return net_output

    check_criterion(SimpleNamespace(compute_loss=compute_loss, rdrop_alpha=0.0))
    with pytest.raises(ValueError, match="--rdrop-alpha 0.5 runs every sentence twice"):
        check_criterion(SimpleNamespace(compute_loss=compute_loss, rdrop_alpha=0.5))
    with pytest.raises(ValueError, match="criterion SimpleNamespace has no compute_loss"):
        check_criterion(SimpleNamespace())
