"""autoassist_fairseq/optim/rex_schedule.py: the ``rex`` learning-rate schedule follows the
REX profile of Chen, Wolfe & Kyrillidis (MLSys 2022) after a linear warm-up, ends at
--min-lr at --max-update, resumes exactly, refuses to run without --max-update, and is
chosen by ``--lr-scheduler rex`` through fairseq's own argparse/hydra path, also for plain
``--task translation``."""

import subprocess
import sys

import pytest

from utils import REPO, TINY_TRANSFORMER, USER_DIR, log_records, run

PEAK, MIN_LR, INIT_LR, WARMUP, MAX_UPDATE = 0.004, 1e-5, 1e-7, 10, 110  # T = 100


def paper_rex(z):
    """The paper's profile, written out independently of the module under test."""
    return (1 - z) / (1 / 2 + 1 / 2 * (1 - z))


def train_flags(*extra, max_update=MAX_UPDATE):
    return ["--user-dir", USER_DIR, "--task", "translation", *TINY_TRANSFORMER,
            "--optimizer", "adam", "--lr", str(PEAK), "--lr-scheduler", "rex",
            "--warmup-updates", str(WARMUP), "--warmup-init-lr", str(INIT_LR),
            "--min-lr", str(MIN_LR), "--max-update", str(max_update), "--cpu", *extra]


def build(flags, data="DATA"):
    """The scheduler fairseq-train builds for *flags*: argparse, then the hydra config, then
    fairseq's registry, around a fairseq optimizer of one parameter."""
    import torch
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.optim import build_optimizer
    from fairseq.optim.lr_scheduler import build_lr_scheduler

    args = options.parse_args_and_arch(options.get_training_parser(), [str(data), *flags])
    cfg = convert_namespace_to_omegaconf(args)
    optimizer = build_optimizer(cfg.optimizer, [torch.nn.Parameter(torch.zeros(1))])
    return build_lr_scheduler(cfg.lr_scheduler, optimizer), cfg


def test_rex_is_chosen_through_fairseq_train_flags():
    from autoassist_fairseq.optim.rex_schedule import RexLRSchedule

    scheduler, cfg = build(train_flags())
    assert isinstance(scheduler, RexLRSchedule)
    assert cfg.lr_scheduler._name == "rex"
    assert (cfg.lr_scheduler.warmup_updates, cfg.lr_scheduler.min_lr,
            cfg.lr_scheduler.max_update) == (WARMUP, MIN_LR, MAX_UPDATE)
    assert scheduler.optimizer.get_lr() == pytest.approx(INIT_LR)  # the rate of update 1


@pytest.mark.parametrize("update, expected", [
    (0, INIT_LR),                                          # warm-up start
    (5, INIT_LR + 0.5 * (PEAK - INIT_LR)),                 # warm-up middle
    (WARMUP, PEAK),                                        # warm-up end: z = 0
    (WARMUP + 25, MIN_LR + (PEAK - MIN_LR) * paper_rex(0.25)),
    (WARMUP + 50, MIN_LR + (PEAK - MIN_LR) * 2 / 3),       # the profile is 2/3 at z = 1/2
    (WARMUP + 90, MIN_LR + (PEAK - MIN_LR) * paper_rex(0.9)),
    (MAX_UPDATE, MIN_LR),                                  # the end of the budget
    (MAX_UPDATE + 7, MIN_LR),                              # past it: stays at --min-lr
])
def test_the_curve_is_the_papers_profile_after_a_linear_warmup(update, expected):
    scheduler, _ = build(train_flags())
    assert scheduler.step_update(update) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert scheduler.optimizer.get_lr() == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_rex_stays_above_linear_and_decreases_after_the_warmup():
    scheduler, _ = build(train_flags())
    rates = [scheduler.step_update(u) for u in range(WARMUP, MAX_UPDATE + 1)]
    assert all(a > b for a, b in zip(rates, rates[1:]))
    for u, rate in zip(range(WARMUP, MAX_UPDATE + 1), rates):
        linear = MIN_LR + (PEAK - MIN_LR) * (1 - (u - WARMUP) / (MAX_UPDATE - WARMUP))
        assert rate >= linear - 1e-15  # REX keeps the rate higher than linear decay


def test_a_resumed_scheduler_gives_the_same_rate_as_the_uninterrupted_one():
    whole, _ = build(train_flags())
    for update in range(1, 64):
        expected = whole.step_update(update)
    # a new scheduler, as after a restart: fairseq loads the saved state, calls step() for
    # the epoch (Trainer.lr_step) and step_update() for the update count
    resumed, _ = build(train_flags())
    resumed.load_state_dict(whole.state_dict())
    resumed.step(3)
    assert resumed.step_update(63) == expected
    assert resumed.optimizer.get_lr() == expected
    for update in range(64, MAX_UPDATE + 1):
        assert resumed.step_update(update) == whole.step_update(update)


def test_without_max_update_the_error_names_the_flag_and_the_fix():
    with pytest.raises(ValueError, match=r"--max-update is not set: pass --max-update N"):
        build(train_flags(max_update=0))
    with pytest.raises(ValueError, match=r"--max-update 10 leaves no updates after "
                                         r"--warmup-updates 10: raise --max-update or lower "
                                         r"the warmup"):
        build(train_flags(max_update=WARMUP))
    with pytest.raises(ValueError, match=r"one peak learning rate, got --lr \[0.1, 0.2\]: "
                                         r"pass a single value"):
        build(train_flags() + ["--lr", "0.1,0.2"])


def test_the_schedule_module_adds_no_scikit_learn_to_fairseqs_own():
    # fairseq itself imports scikit-learn (its audio_classification task): the module is
    # loaded on its own, without the package's other modules, and must add no sklearn module
    code = (
        "import importlib.util, sys\n"
        "import fairseq.optim.lr_scheduler\n"
        "def sk(): return {m for m in sys.modules if m.split('.')[0] == 'sklearn'}\n"
        "before = sk()\n"
        "spec = importlib.util.spec_from_file_location('rex_alone', sys.argv[1])\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(sorted(sk() - before))\n")
    path = REPO / "autoassist_fairseq" / "optim" / "rex_schedule.py"
    out = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    init = (REPO / "autoassist_fairseq" / "optim" / "__init__.py").read_text()
    assert [line for line in init.splitlines() if "import" in line and not
            line.startswith("#")] == ["from . import rex_schedule  # noqa: F401"]


def test_plain_translation_trains_with_rex_and_logs_its_rates(tiny_data, tmp_path):
    max_update = 8
    proc = run(["fairseq-train", tiny_data, *train_flags(
        "--max-tokens", "600", "--seed", "1", "--save-dir", tmp_path, "--log-format",
        "simple", "--log-interval", "1", "--no-save", "--num-workers", "0",
        "--warmup-updates", "2", max_update=max_update)], timeout=300)
    records = [r for r in log_records(proc.stdout + proc.stderr) if "lr" in r]
    assert [int(r["num_updates"]) for r in records] == list(range(1, max_update + 1))
    from autoassist_fairseq.optim.rex_schedule import rex_multiplier
    for r in records:
        n = int(r["num_updates"])  # the line of update n logs the rate set after it
        expected = INIT_LR + n * (PEAK - INIT_LR) / 2 if n < 2 else \
            MIN_LR + (PEAK - MIN_LR) * rex_multiplier((n - 2) / (max_update - 2))
        assert r["lr"] == pytest.approx(expected, rel=1e-4), r
    assert records[-1]["lr"] == pytest.approx(MIN_LR)
