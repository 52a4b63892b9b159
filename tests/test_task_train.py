"""End to end: fairseq-train --task autoassist_translation with the paper's Boss families."""

import json
import sys

import pytest

from utils import REPO, USER_DIR, log_records, run, train_args

ARCHS = {
    "transformer": None,  # utils.TINY_TRANSFORMER
    "lstm": ["--arch", "lstm", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
             "--encoder-hidden-size", "32", "--decoder-hidden-size", "32",
             "--decoder-out-embed-dim", "32", "--share-all-embeddings"],
    "fconv": ["--arch", "fconv", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
              "--encoder-layers", "[(32, 3)] * 2", "--decoder-layers", "[(32, 3)] * 2",
              "--decoder-out-embed-dim", "32", "--decoder-attention", "True"],
}


def _train(data, save_dir, arch, extra=(), **kwargs):
    if ARCHS[arch] is not None:
        kwargs["arch_args"] = ARCHS[arch]
    return run(train_args(data, save_dir, extra=["--max-update", "400", *extra], **kwargs))


@pytest.fixture(scope="module")
def transformer_run(train_data, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("transformer")
    return save_dir, _train(train_data, save_dir, "transformer")


def _check_assistant_took_over(output):
    records = log_records(output)
    assert records[-1]["num_updates"] == 400
    late = records[len(records) // 2:]  # after warm-up
    assert all(r["aa_accept_sent"] < 1 for r in late[-3:]), late[-3:]
    assert late[-1]["aa_acc"] > late[-1]["aa_acc_base"]  # better than the majority guess
    assert late[-1]["aa_lambda"] > 0
    assert late[-1]["aa_skip_tok"] > 0


def test_transformer_skips_easy_pairs(transformer_run):
    _check_assistant_took_over(transformer_run[1].stdout)


@pytest.mark.parametrize("arch", ["lstm", "fconv"])
def test_other_boss_families(train_data, tmp_path, arch):
    # plain cross-entropy with lstm, label smoothing with the others
    kwargs = {"criterion": ("--criterion", "cross_entropy")} if arch == "lstm" else {}
    proc = _train(train_data, tmp_path, arch, **kwargs)
    _check_assistant_took_over(proc.stdout)


def test_trained_model_decodes(train_data, transformer_run):
    save_dir, _ = transformer_run
    proc = run(["fairseq-generate", train_data, "--user-dir", USER_DIR, "--task",
                "autoassist_translation", "--path", save_dir / "checkpoint_last.pt",
                "--gen-subset", "valid", "--beam", "2", "--batch-size", "32", "--cpu"])
    hyps = [line for line in proc.stdout.splitlines() if line.startswith("H-")]
    sources = [line for line in proc.stdout.splitlines() if line.startswith("S-")]
    assert len(hyps) == len(sources) >= 90
    assert "BLEU" in proc.stdout + proc.stderr


def test_update_freq_and_max_epoch(train_data, tmp_path):
    proc = run(train_args(train_data, tmp_path, extra=["--max-epoch", "2", "--update-freq", "2"]))
    assert "done training" in proc.stdout + proc.stderr
    assert len(log_records(proc.stdout, "valid")) == 2


def test_reweighted_training_still_skips(train_data, tmp_path):
    proc = _train(train_data, tmp_path, "transformer", extra=["--assistant-reweight"])
    _check_assistant_took_over(proc.stdout)


def test_diagnosis_finds_the_assistant_skips_low_loss_pairs(train_data, transformer_run,
                                                            tmp_path):
    save_dir, _ = transformer_run
    out, losses = tmp_path / "diagnosis.json", tmp_path / "losses.npz"
    run([sys.executable, REPO / "scripts" / "diagnose_assistant.py", "--data", train_data,
         "--checkpoint", save_dir / "checkpoint_last.pt", "--out", out, "--losses-out", losses])
    d = json.loads(out.read_text())
    assert d["pairs"] == 2000 and d["lambda"] > 0
    assert d["spearman_g_loss"] > 0.3  # g ranks pairs by the Boss's actual loss
    assert d["accuracy_vs_threshold"] > d["majority_share"]
    # the pairs it expects to skip hold less of the loss than of the tokens
    assert 0 < d["skipped_share_loss"] < d["skipped_share_tokens"] < 1
    # an oracle skipping the lowest-loss pairs first does at least as well, and skips
    # less than its token share of the loss
    assert 0 < d["oracle_skipped_share_loss"] <= d["skipped_share_loss"]
    assert 0 < d["oracle_skipped_share_loss_at_35pct_tokens"] < 0.35
    quintiles = [q["loss_mean"] for q in d["by_accept_quintile"]]
    assert quintiles[0] < quintiles[-1]  # least accepted: lowest loss

    # the saved losses replay offline: the defaults learn to skip low-loss pairs,
    # lambda_max=0 skips nothing
    replay_out = tmp_path / "replay.json"
    run([sys.executable, REPO / "scripts" / "replay_assistant.py", "--data", train_data,
         "-s", "src", "-t", "tgt", "--losses", losses, "--batches", "300", "--batch-size", "64",
         "--set", "", "--set", "lambda_max=0", "--out", replay_out])
    defaults, no_skip = json.loads(replay_out.read_text())["results"]
    assert defaults["spearman_g_loss"] > 0.3 and defaults["lambda"] > 0
    assert (defaults["oracle_skipped_share_loss"] <= defaults["skipped_share_loss"]
            < defaults["skipped_share_tokens"])
    assert no_skip["lambda"] == 0 and no_skip["skipped_share_tokens"] == 0
    bad = run([sys.executable, REPO / "scripts" / "replay_assistant.py", "--data", train_data,
               "-s", "src", "-t", "tgt", "--losses", losses, "--set", "lr=2,speed=3"],
              check=False)
    assert bad.returncode != 0 and "speed=3" in bad.stderr and "weight_decay" in bad.stderr


def test_diagnosis_of_a_checkpoint_without_assistant_is_an_error(train_data, tmp_path):
    missing = run([sys.executable, REPO / "scripts" / "diagnose_assistant.py", "--data",
                   train_data, "--checkpoint", tmp_path / "nope.pt"], check=False)
    assert missing.returncode != 0 and "nope.pt not found" in missing.stderr
