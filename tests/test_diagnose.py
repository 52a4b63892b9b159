"""autoassist-diagnose (autoassist_fairseq/diagnose/): figures, verdict, errors; the noise
shares it gives with labelled pairs (research/noise_report.py); the offline replay
(research/replay_assistant.py)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from autoassist_fairseq import diagnose
from research import noise_report, replay_assistant
from utils import BIN, REPO, make_binarized, run, train_args


@pytest.fixture(scope="module")
def diag_run(train_data, paper_run):
    """A 2000-pair toy corpus (30% noisy pairs: random targets) and a 400-update run."""
    # the paper's rule alone: the diagnosis asks whether skipping low-loss pairs can pay
    return train_data, paper_run[0] / "checkpoint_last.pt"


def test_diagnosis_finds_the_assistant_skips_low_loss_pairs(diag_run, tmp_path):
    data, checkpoint = diag_run
    # --losses-out in a folder not made yet: made, as --out's
    out, losses = tmp_path / "diagnosis.json", tmp_path / "new" / "losses.npz"
    run([BIN / "autoassist-diagnose", "--data", data,
         "--checkpoint", checkpoint, "--out", out, "--losses-out", losses])
    d = json.loads(out.read_text())
    assert d["pairs"] == 2000 and d["lambda"] > 0
    assert d["spearman_g_loss"] > 0.3  # g ranks pairs by the Boss's actual loss
    # (not asserted: its accuracy against the saved T_k, an average of training-mode losses
    # with dropout, while the diagnosis measures eval-mode losses: the labels' balance
    # shifts from run to run; the ranking above and the quintiles below are what matter)
    # the pairs it expects to skip hold less of the loss than of the tokens
    assert 0 < d["skipped_share_reducible_loss"] < d["skipped_share_tokens"] < 1
    # an oracle skipping the lowest-loss pairs first does at least as well, and skips
    # less than its token share of the loss
    assert 0 < d["oracle_skipped_share_reducible_loss"] <= d["skipped_share_reducible_loss"]
    assert 0 < d["oracle_skipped_share_reducible_loss_at_35pct_tokens"] < 0.35
    quintiles = [q["loss_mean"] for q in d["by_accept_quintile"]]
    assert quintiles[0] < quintiles[-1]  # least accepted: lowest loss
    # --losses-out holds the Assistant's P(accept) of every pair: the figures' skips
    saved = np.load(losses)
    accept = saved["accept"]
    assert len(accept) == 2000 and 1 - 0.9 - 1e-6 <= accept.min() <= accept.max() <= 1
    assert 1 - accept.mean() == pytest.approx(d["skipped_share_pairs"])

    # the saved losses replay offline (the paper's rule unless set): it learns to skip
    # low-loss pairs, lambda_max=0 skips nothing
    replay_out = tmp_path / "replay.json"
    run([sys.executable, "-m", "research.replay_assistant", "--data", data,
         "-s", "src", "-t", "tgt", "--losses", losses, "--batches", "300", "--batch-size", "64",
         "--set", "", "--set", "lambda_max=0", "--out", replay_out], cwd=REPO)
    defaults, no_skip = json.loads(replay_out.read_text())["results"]
    assert defaults["spearman_g_loss"] > 0.3 and defaults["lambda"] > 0
    assert (defaults["oracle_skipped_share_reducible_loss"]
            <= defaults["skipped_share_reducible_loss"] < defaults["skipped_share_tokens"])
    assert no_skip["lambda"] == 0 and no_skip["skipped_share_tokens"] == 0
    bad = run([sys.executable, "-m", "research.replay_assistant", "--data", data,
               "-s", "src", "-t", "tgt", "--losses", losses, "--set", "lr=2,speed=3"],
              check=False, cwd=REPO)
    assert bad.returncode != 0 and "speed=3" in bad.stderr and "weight_decay" in bad.stderr


def test_the_command_registers_the_task_it_loads_in_a_process_of_its_own(diag_run, tmp_path):
    """Run cold (not forked from the tests' server, which has fairseq imported), the command
    imports the package before fairseq, so the package registers nothing on import: the
    command registers the task that the checkpoint names (and compat) itself."""
    import subprocess

    data, checkpoint = diag_run
    out = tmp_path / "cold.json"
    proc = subprocess.run([BIN / "autoassist-diagnose", "--data", data, "--checkpoint",
                           checkpoint, "--sample-pairs", "200", "--out", out],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert json.loads(out.read_text())["pairs"] == 200  # the sample's


def test_console_command_reports_noise_and_a_verdict(diag_run, tmp_path):
    data, checkpoint = diag_run
    # the toy corpus's noisy pairs carry the source word "noise" and a random target; the
    # labels file has one extra raw line first (as if cleaning had dropped it), so the
    # kept-lines mapping must shift every id by one
    sources = (Path(data).parent / "raw" / "train.src").read_text().splitlines()
    labels = ["clean"] + ["misaligned" if "noise" in s.split() else "clean" for s in sources]
    (tmp_path / "labels").write_text("\n".join(labels) + "\n")
    kept = Path(data) / "train.kept-lines"
    kept.write_text("".join(f"{i + 1}\n" for i in range(len(sources))))
    try:
        proc = run([sys.executable, "-m", "research.noise_report", "--data", data,
                    "--checkpoint", checkpoint, "--noise-labels", tmp_path / "labels", "--out",
                    tmp_path / "d.json"], cwd=REPO)
    finally:
        kept.unlink()
    d = json.loads((tmp_path / "d.json").read_text())
    noise = d["noise"]["assistant"]
    share = sum(label != "clean" for label in labels) / len(sources)
    assert abs(noise["corpus"] - share) < 0.05  # token share, close to the pair share
    # loss-based skipping keeps the noisy (always hard) pairs: the skipped tokens hold less
    # noise than the corpus, the trained ones more
    assert noise["skipped"] < noise["corpus"] < noise["trained"]
    assert d["noise"]["oracle_at_reference"]["skipped"] < noise["corpus"]
    kinds = d["noise"]["by_kind"]
    assert set(kinds) == {"clean", "misaligned"}
    assert kinds["misaligned"]["pairs"] == d["noise"]["by_kind_pairs"]["misaligned"]
    assert kinds["misaligned"]["mean_loss"] > kinds["clean"]["mean_loss"]
    assert kinds["misaligned"]["skipped_share"] < kinds["clean"]["skipped_share"]
    assert "share of each kind's tokens skipped: clean" in proc.stdout
    # the pair checks take the random targets (in the target language) for unrelated to
    # their sources, and the translations for translations; per kind
    assert kinds["clean"]["pair_checks_flagged"] < 0.05
    assert kinds["misaligned"]["pair_checks_flagged"] > 0.6
    flagged_line = "share of each kind's pairs the pair checks flag: clean " \
        f"{kinds['clean']['pair_checks_flagged']:.1%}, misaligned"
    assert flagged_line in proc.stdout
    # the checks' noise share is that of the pairs they flag, over every kind
    flagged = sum(v["pair_checks_flagged"] * v["pairs"] for v in kinds.values())
    assert d["noise_share_checks"] == pytest.approx(flagged / d["pairs"])
    assert d["noise_share_checks"] > 0.1 and d["noise_share_dynamics"] is None
    assert d["verdict"] == _expected_verdict(d)
    assert f"verdict: {d['verdict']}" in proc.stdout
    assert f"noise share of the training pairs: pair checks {d['noise_share_checks']:.1%}" \
        in proc.stdout
    assert "Boss tokens skipping would save" in proc.stdout
    assert d["cost"]["wall_s"] > 0 and d["cost"]["cpu_s"] > 0


def test_reducible_shares_and_an_oracle_curve_over_checkpoints(diag_run, tmp_path):
    """Shares of the reducible loss are those of the per-pair losses minus the label-smoothing
    floor (not of the raw losses); several checkpoints give one curve row each, and a
    checkpoint without an Assistant (as plain --task translation writes) the oracle only."""
    import torch

    from autoassist_fairseq import compat  # noqa: F401  (torch >= 2.6 loads fairseq's)
    from autoassist_fairseq.losses import label_smoothing_floor

    data, checkpoint = diag_run
    state = torch.load(checkpoint, weights_only=False)
    del state["extra_state"]["train_iterator"]["autoassist"]
    plain = tmp_path / "plain.pt"
    torch.save(state, plain)
    out, losses = tmp_path / "curve.json", tmp_path / "losses.npz"
    first, last, stalled = _dynamics_files(tmp_path, 2000)
    diagnose.cli_main(["--data", str(data), "--checkpoint", str(checkpoint), str(plain),
                       "--out", str(out), "--losses-out", str(losses),
                       "--dynamics", str(first), str(last)])
    saved = json.loads(out.read_text())
    assert [r["checkpoint"] for r in saved["curve"]] == ["checkpoint_last.pt", "plain.pt"]
    with_assistant, oracle_only = saved["diagnoses"]
    assert "lambda" not in oracle_only
    for d in saved["diagnoses"]:  # the dynamics flag the stalled pairs: the verdict filters
        assert d["noise_share_dynamics"] == pytest.approx(stalled.mean(), abs=0.01)
        assert d["noise_share"] >= max(d["noise_share_checks"], d["noise_share_dynamics"])
        assert d["verdict"] == _expected_verdict(d) == "filter"
        assert f"--dynamics {first} {last}" in d["verdict_command"]
    assert [r["verdict"] for r in saved["curve"]] == ["filter", "filter"]
    assert saved["curve"][0]["passes"] > 0 and saved["curve"][0]["num_updates"] == 400
    vocab = len((Path(data) / "dict.tgt.txt").read_text().splitlines()) + 4  # + specials
    floor = label_smoothing_floor(0.1, vocab)
    pairs = np.load(tmp_path / "losses.checkpoint_last.npz")
    assert float(pairs["floor"]) == pytest.approx(floor) and floor > 0.5
    reducible = pairs["losses"] - floor
    assert reducible.min() > -1e-4  # no token goes below the floor
    for d in saved["diagnoses"]:  # the same losses (eval mode): the same oracle
        assert d["loss_floor"] == pytest.approx(floor)
        assert d["oracle_skipped_share_reducible_loss_at_reference"] == pytest.approx(
            diagnose.oracle_skipped_loss(np.maximum(reducible, 0), pairs["ntok"], 0.35))
        assert d["oracle_skipped_share_raw_loss_at_reference"] == pytest.approx(
            diagnose.oracle_skipped_loss(pairs["losses"], pairs["ntok"], 0.35))
        # the floor counted as signal makes the easiest pairs look less easy
        assert (d["oracle_skipped_share_reducible_loss_at_reference"]
                < d["oracle_skipped_share_raw_loss_at_reference"] < 0.35)
    assert (with_assistant["skipped_share_reducible_loss"]
            < with_assistant["skipped_share_raw_loss"] < with_assistant["skipped_share_tokens"])
    quintiles = with_assistant["by_accept_quintile"]
    assert sum(q["reducible_loss_share"] for q in quintiles) == pytest.approx(1)
    # a random sample of the pairs (to cut the cost on a large corpus) estimates the same
    sample = diagnose.diagnose(str(data), str(checkpoint), sample_pairs=500)
    assert sample["pairs"] == 500 and sample["pairs_in_corpus"] == 2000
    key = "oracle_skipped_share_reducible_loss_at_reference"
    assert sample[key] == pytest.approx(with_assistant[key], abs=0.05)

    # T_k moves with the floor: the paper's rule learns the same labels from reducible losses
    from autoassist_fairseq.features.store import FeatureStore, feature_prefix

    store = FeatureStore.open(feature_prefix(str(data), "train", "src", "tgt"),
                              num_rows=len(reducible))
    raw, shifted = (replay_assistant.replay(store, [pairs["losses"]], pairs["ntok"], floor,
                                            replay_assistant.parse_setting(""), 100, 64, 0.15, 0,
                                            reducible) for reducible in (False, True))
    assert shifted["threshold"] == pytest.approx(raw["threshold"] - floor)
    for share in ("tokens", "reducible_loss", "raw_loss"):
        assert shifted[f"skipped_share_{share}"] == pytest.approx(raw[f"skipped_share_{share}"],
                                                                  abs=1e-9)
    assert raw["skipped_share_reducible_loss"] < raw["skipped_share_raw_loss"]


def _expected_verdict(d):
    """The verdict's rule, written out (diagnose.cli's docstring), from the noise shares of
    the same diagnosis: filter from the noise bar up, no up to the clean corpora's share,
    the noise rule between; the skip densities play no part."""
    share = d["noise_share"]
    if share is None:
        return "no-estimate"
    if share >= d["noise_bar"]:
        return "filter"
    return "no" if share <= d["clean_share"] else "noise-rule"


def _dynamics_files(folder, num_pairs, share=0.25, seed=0):
    """Two synthetic --losses-out files of *num_pairs* pairs: a share *share* of them
    (returned as a mask) keeps its early loss, the rest fall to a third of it."""
    rng = np.random.default_rng(seed)
    ntok = rng.integers(3, 16, num_pairs).astype(float)
    first = 5.0 + 0.1 * np.log(ntok) + rng.normal(0, 0.05, num_pairs)
    stalled = rng.random(num_pairs) < share
    last = np.where(stalled, first, first / 3) + rng.normal(0, 0.05, num_pairs)
    paths = folder / "losses-first.npz", folder / "losses-last.npz"
    for path, losses in zip(paths, (first, last)):
        np.savez(path, losses=losses, ntok=ntok, floor=0.0, ids=np.arange(num_pairs))
    return paths[0], paths[1], stalled


@pytest.mark.parametrize("checks, dynamics, expected", [
    (0.25, None, "filter"),       # noisy Multi30k: the checks flag 19.6%
    (0.19, None, "filter"),       # the bar is inclusive
    (0.0, None, "no"),            # a clean corpus
    (0.008, None, "no"),          # clean Multi30k: 0.8%
    (0.01, None, "no"),           # inclusive
    (0.08, None, "noise-rule"),   # realistic noise: the checks flag 8.9%
    (None, None, "no-estimate"),  # no feature file with pair checks, no dynamics
    (0.0, 0.25, "filter"),        # the dynamics find what the checks miss
    (None, 0.005, "no"),
    (0.005, 0.05, "noise-rule"),
])
def test_verdict_rule(checks, dynamics, expected):
    files = ("F.npz", "L.npz") if dynamics is not None else None
    code, reason, command = diagnose.verdict(checks, dynamics, data="work/crawl",
                                             dynamics=files)
    assert code == expected and reason
    if code == "filter":
        assert "through the noise, not through easy pairs" in reason
        assert command.startswith("autoassist-filter work/crawl")
        assert "--out FILTERED" in command and "--task translation" in command
        # a filter by the dynamics alone has no fixed-budget run behind it: said so
        assert ("--dynamics F.npz L.npz" in command) == (not checks or checks < 0.19)
        assert ("not filtered in a fixed-budget run" in reason) == (not checks or checks < 0.19)
    elif code == "no":
        assert command.startswith("fairseq-train work/crawl --task translation")
        assert "--lr-scheduler rex" in command and "autoassist-filter" not in command
    elif code == "noise-rule":
        assert "35.69 against 34.56, 35.26 and 34.85" in reason
        assert "Train both at the budget and compare" in reason
        assert "by 0.1 with each run's penalty chosen on the valid split" in reason
        rule, plain = command.split("; and ")
        assert rule.startswith("fairseq-train work/crawl --task autoassist_translation")
        assert "--assistant-rule noise" in rule and "--max-update BUDGET" in rule
        assert plain.startswith("fairseq-train work/crawl --task translation")
        assert "autoassist-filter" not in command
    else:
        assert command is None and "autoassist-features" in reason
    if command is not None:  # every training step with the schedule measured best, REX
        for step in command.split("; and "):
            assert "--user-dir autoassist_fairseq --lr-scheduler rex --max-update BUDGET" in step
    # the union of both estimates, where given, decides
    assert diagnose.verdict(0.0, 0.0, noise_share=0.3)[0] == "filter"


@pytest.fixture(scope="module")
def clean_and_noisy(tmp_path_factory):
    """Two 600-pair toy corpora with their feature files: one without noise, one with half
    of its pairs given random targets."""
    root = tmp_path_factory.mktemp("noise-share")
    return (make_binarized(root / "clean", noisy=0.0),
            make_binarized(root / "noisy", noisy=0.5))


def test_noise_share_of_the_feature_file_and_of_training_dynamics(clean_and_noisy, tmp_path):
    """The verdict follows the share of pairs the pair checks flag in the data directory's
    feature file (as autoassist-filter decides it), and, given, the dynamics of two losses
    files: a corpus whose checks flag many pairs gets filter, one whose checks flag none no."""
    import shutil

    from autoassist_fairseq.features.prepared import flagged_pairs

    clean, noisy = clean_and_noisy
    est = diagnose.noise_estimates(str(noisy), "src", "tgt", 600)
    flags = flagged_pairs(noisy, "src", "tgt")[0]
    assert est["noise_share_checks"] == pytest.approx(flags.mean()) and flags.mean() >= 0.19
    assert est["noise_share"] == est["noise_share_checks"] and est["noise_share_dynamics"] is None
    assert diagnose.verdict(est["noise_share_checks"])[0] == "filter"

    est = diagnose.noise_estimates(str(clean), "src", "tgt", 600)
    assert est["noise_share_checks"] == 0.0
    assert diagnose.verdict(est["noise_share_checks"])[0] == "no"

    # the dynamics of the clean corpus's pairs: a quarter of them stall
    first, last, stalled = _dynamics_files(tmp_path, 600)
    est = diagnose.noise_estimates(str(clean), "src", "tgt", 600, (str(first), str(last)))
    assert est["noise_share_dynamics"] == pytest.approx(stalled.mean(), abs=0.01)
    assert est["noise_share"] == est["noise_share_dynamics"]
    code, reason, command = diagnose.verdict(est["noise_share_checks"],
                                             est["noise_share_dynamics"], est["noise_share"],
                                             data=str(clean), dynamics=(str(first), str(last)))
    assert code == "filter" and f"--dynamics {first} {last}" in command
    # losses of other pairs than the corpus's: a clear error
    (tmp_path / "other").mkdir()
    other, _, _ = _dynamics_files(tmp_path / "other", 500)
    with pytest.raises(diagnose.DiagnosisError, match="--dynamics: .* 500 pairs"):
        diagnose.noise_estimates(str(clean), "src", "tgt", 600, (str(other), str(last)))
    with pytest.raises(diagnose.DiagnosisError, match="--dynamics .*nope.npz not found"):
        diagnose.noise_estimates(str(clean), "src", "tgt", 600,
                                 (str(tmp_path / "nope.npz"), str(last)))

    # no feature file: no estimate from the checks, and the verdict says what to build
    bare = tmp_path / "bare"
    shutil.copytree(clean, bare)
    for f in bare.glob("*.autoassist*"):
        f.unlink()
    est = diagnose.noise_estimates(str(bare), "src", "tgt", 600)
    assert est["noise_share_checks"] is None and est["noise_share_checks_missing"]
    assert diagnose.verdict(est["noise_share_checks"])[0] == "no-estimate"


def test_densities_and_noise_shares_on_constructed_losses():
    losses = np.array([0.1, 0.2, 5.0, 6.0])
    ntok = np.array([10.0, 10.0, 10.0, 10.0])
    # the easiest half of the tokens holds (1 + 2) / (1 + 2 + 50 + 60) of the loss
    assert diagnose.oracle_skipped_loss(losses, ntok, 0.5) == pytest.approx(3 / 113)
    assert diagnose.density(0.1, 0.4) == pytest.approx(0.25) and diagnose.density(0.1, 0) is None
    noisy = np.array([False, False, True, True])
    shares = noise_report.noise_shares(noisy, np.array([1.0, 1.0, 1.0, 3.0]),
                                   skip=np.array([1.0, 0.0, 0.0, 0.5]))
    assert shares["corpus"] == pytest.approx(4 / 6)
    assert shares["skipped"] == pytest.approx(1.5 / 2.5)
    assert shares["trained"] == pytest.approx(2.5 / 3.5)


def test_noise_by_kind_on_constructed_pairs():
    labels = np.array(["clean", "copy", "clean", "copy", "misaligned"])
    tokens = np.array([10.0, 30.0, 10.0, 10.0, 40.0])
    kinds = noise_report.noise_by_kind(labels, tokens, skip=np.array([0.5, 1.0, 0.0, 0.0, 0.25]),
                                   losses=np.array([1.0, 0.5, 3.0, 1.5, 8.0]))
    assert list(kinds) == ["clean", "copy", "misaligned"]
    assert kinds["clean"] == pytest.approx({"pairs": 2, "token_share": 0.2,
                                            "skipped_share": 0.25, "mean_loss": 2.0,
                                            "mean_reducible_loss": 2.0})
    assert kinds["copy"]["skipped_share"] == pytest.approx(0.75)  # token-weighted: 30 of 40
    assert kinds["misaligned"]["token_share"] == pytest.approx(0.4)
    assert "pair_checks_flagged" not in kinds["clean"]
    above = noise_report.noise_by_kind(labels, tokens, np.zeros(5),
                                   np.array([1.0, 0.5, 3.0, 1.5, 8.0]), floor=0.8)
    assert [above[k]["mean_reducible_loss"] for k in above] == pytest.approx([1.2, 0.35, 7.2])
    flags = np.array([False, True, False, False, True])
    kinds = noise_report.noise_by_kind(labels, tokens, np.zeros(5), np.ones(5), flags)
    assert [kinds[k]["pair_checks_flagged"] for k in kinds] == [0.0, 0.5, 1.0]


def test_noise_labels_need_the_kept_lines(tmp_path):
    (tmp_path / "labels").write_text("clean\nmisaligned\n")
    with pytest.raises(diagnose.DiagnosisError, match="rerun scripts/prepare-corpus.sh"):
        noise_report.read_noise_labels(str(tmp_path), "train", str(tmp_path / "labels"), 2)
    (tmp_path / "train.kept-lines").write_text("0\n5\n")
    with pytest.raises(diagnose.DiagnosisError, match="same corpus"):
        noise_report.read_noise_labels(str(tmp_path), "train", str(tmp_path / "labels"), 2)
    (tmp_path / "train.kept-lines").write_text("1\n0\n")
    assert list(noise_report.read_noise_labels(str(tmp_path), "train", str(tmp_path / "labels"),
                                           2)) == ["misaligned", "clean"]


def test_bad_arguments_are_clear_errors(tmp_path):
    missing = run([BIN / "autoassist-diagnose", "--data", tmp_path, "--checkpoint",
                   tmp_path / "nope.pt"], check=False)
    assert missing.returncode != 0 and f"--checkpoint {tmp_path / 'nope.pt'}: does not exist: " \
        "give checkpoint files that fairseq-train saved" in missing.stderr, missing.stderr
    assert "Traceback" not in missing.stderr
    gone = run([BIN / "autoassist-diagnose", "--data", tmp_path / "nowhere", "--checkpoint",
                tmp_path], check=False)
    assert gone.returncode != 0 and f"--data {tmp_path / 'nowhere'} does not exist: give the " \
        "data directory the run trained on" in gone.stderr, gone.stderr
    bad = run([BIN / "autoassist-diagnose", "--data", tmp_path, "--checkpoint", tmp_path,
               "--reference-share", "1.5"], check=False)
    assert bad.returncode == 2 and "--reference-share 1.5: must be in (0, 1)" in bad.stderr
    helped = run([BIN / "autoassist-diagnose", "--help"])
    # each verdict with the evidence behind it, and where the figures are
    for text in ("filter", "noise-rule", "no-estimate", "--dynamics FIRST LAST", "19.6%",
                 "8.9% of the prepared pairs", "docs/results/noise/gpu-h200/summary.json",
                 "35.73 against 34.91", "4.367 / BLEU 35.73", "docs/results/converged/README.md",
                 "summary.json"):
        assert text in " ".join(helped.stdout.split()), text


@pytest.mark.parametrize("case, message", [
    ("data-is-a-file", "--data {file} is a file"),
    ("checkpoint-is-a-folder", "--checkpoint {tmp} is a directory"),
    ("text-checkpoint", "--checkpoint {text} is not a checkpoint (not a file that torch"),
    ("second-checkpoint-not-fairseq",
     "--checkpoint {other} is not a fairseq checkpoint (it holds a dict with the keys weights"),
    ("out-is-a-folder", "--out {data} is a directory"),
    ("losses-out-under-a-file", "--losses-out {file}/losses.npz is under the file {file}"),
    ("not-loadable", "--checkpoint {fake} could not be loaded as a fairseq checkpoint"),
    ("dynamics-missing", "--dynamics {tmp}/first.npz not found"),
])
def test_bad_paths_are_refused_before_any_scoring(tmp_path, case, message):
    """Each path is checked before the first checkpoint is scored: a data directory that is
    a file, a checkpoint that is a folder or not a fairseq checkpoint (of any checkpoint
    given), an --out or --losses-out that cannot be written."""
    import torch

    data, file = tmp_path / "data", tmp_path / "file"
    data.mkdir()
    file.write_text("x\n")
    fake = tmp_path / "fake.pt"  # passes the file checks; fairseq cannot load it
    torch.save({"model": {}, "cfg": {}}, fake)
    text, other = tmp_path / "text.pt", tmp_path / "other.pt"
    text.write_text("not a checkpoint\n")
    torch.save({"weights": 1}, other)
    argv = {
        "data-is-a-file": ["--data", file, "--checkpoint", fake],
        "checkpoint-is-a-folder": ["--data", data, "--checkpoint", tmp_path],
        "text-checkpoint": ["--data", data, "--checkpoint", text],
        "second-checkpoint-not-fairseq": ["--data", data, "--checkpoint", fake, other],
        "out-is-a-folder": ["--data", data, "--checkpoint", fake, "--out", data],
        "losses-out-under-a-file": ["--data", data, "--checkpoint", fake,
                                    "--losses-out", file / "losses.npz"],
        "not-loadable": ["--data", data, "--checkpoint", fake, "--out",
                         tmp_path / "new" / "d.json"],
        "dynamics-missing": ["--data", data, "--checkpoint", fake, "--dynamics",
                             tmp_path / "first.npz", file, "--out", tmp_path / "new" / "d.json"],
    }[case]
    message = message.format(file=file, tmp=tmp_path, text=text, other=other, data=data,
                             fake=fake)
    with pytest.raises(SystemExit) as exit:
        diagnose.cli_main([str(a) for a in argv])
    error = str(exit.value.code)
    assert error.startswith("autoassist-diagnose: error: ") and message in error, error
    if "checkpoint" in case:  # and the fix
        assert "SAVE_DIR/checkpoint_last.pt" in error, error
    assert not (tmp_path / "new").exists()


def test_checkpoint_position_counts_data_passes_not_fairseq_epochs():
    """An AutoAssist checkpoint's passes are its stream's (an epoch of skipped pairs holds
    fewer batches than a pass); a plain checkpoint's come from fairseq's epoch and offset."""
    from types import SimpleNamespace

    from autoassist_fairseq.diagnose.scoring import checkpoint_position

    class Dataset:
        def __len__(self):
            return 200

        def ordered_indices(self):
            return np.arange(200)

        def batch_by_size(self, indices, **_):
            return np.array_split(indices, 10)

    cfg = SimpleNamespace(max_tokens=100, batch_size=None, required_batch_size_multiple=1)
    history = [{"num_updates": 57}]
    # fairseq's epoch 5, but rank 0's stream is a quarter into its third pass
    stream = {"generator": {"data_pass": 3, "next_pair": 50}}
    saved = {"world_size": 1, "ranks": [{"stream": stream}]}
    state = {"optimizer_history": history, "extra_state": {"train_iterator": {
        "epoch": 5, "iterations_in_epoch": 4, "autoassist": saved}}}
    assert checkpoint_position(state, Dataset(), cfg) == {"num_updates": 57, "passes": 2.25}
    saved["world_size"] = 2  # rank 0's shard: every second pair
    assert checkpoint_position(state, Dataset(), cfg)["passes"] == 2.5
    del state["extra_state"]["train_iterator"]["autoassist"]
    assert checkpoint_position(state, Dataset(), cfg)["passes"] == pytest.approx(4.4)


def test_losses_of_several_checkpoints_of_one_name_go_to_files_of_their_own():
    """Several runs' checkpoint_last.pt: each one's losses get a name of their own (its
    folders, as far as they differ), so none overwrites another; one checkpoint given
    twice is an error that says so."""
    paths = diagnose.losses_paths("out/losses.npz", ["runs/a/checkpoints/checkpoint_last.pt",
                                                     "runs/b/checkpoints/checkpoint_last.pt",
                                                     "runs/a/checkpoints/checkpoint5.pt"])
    assert paths == ["out/losses.a.checkpoints.checkpoint_last.npz",
                     "out/losses.b.checkpoints.checkpoint_last.npz",
                     "out/losses.checkpoint5.npz"]
    assert diagnose.losses_paths("l.npz", ["c/checkpoint1.pt"]) == ["l.npz"]
    assert diagnose.losses_paths(None, ["a.pt", "b.pt"]) == [None, None]
    with pytest.raises(diagnose.DiagnosisError, match="given twice"):
        diagnose.losses_paths("l.npz", ["c/checkpoint1.pt", "./c/checkpoint1.pt"])
    # names alike in every folder (they differ in a suffix or a dot): numbered, not a hang
    assert diagnose.losses_paths("l.npz", ["x/model.pt", "x/model.bin", "/r/a/b.pt",
                                           "/r/a.b.pt", "/q/b.pt"]) == \
        ["l.model.1.npz", "l.model.2.npz", "l.b.npz", "l.a.b.npz", "l.q.b.npz"]
    assert diagnose.losses_paths("l.npz", ["/ck.pt", "/a/ck.pt"]) == ["l.ck.npz", "l.a.ck.npz"]
