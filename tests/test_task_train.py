"""End to end: fairseq-train --task autoassist_translation with the paper's Boss families."""

import re

import numpy as np
import pytest

from utils import RANDOM_SKIP, USER_DIR, log_records, read_trace, run, train_args

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
    """400 updates with the paper's rule alone, the one that skips easy pairs, in the
    deterministic mode (as conftest's paper_run)."""
    if ARCHS[arch] is not None:
        kwargs["arch_args"] = ARCHS[arch]
    return run(train_args(data, save_dir, extra=[
        "--max-update", "400", "--assistant-rule", "paper", "--assistant-pair-checks", "off",
        "--assistant-sync", *extra], **kwargs))


@pytest.fixture(scope="module")
def transformer_run(paper_run):
    return paper_run  # conftest: _train(train_data, save_dir, "transformer"), traced


def _check_assistant_took_over(output):
    """In the run's second half (after warm-up) the Assistant accepts fewer pairs than it
    is offered, lambda_k > 0, and its accuracy beats the majority guess. An Assistant that
    never took over accepts every pair (1.0) at lambda_k = 0."""
    records = log_records(output)
    assert records[-1]["num_updates"] == 400
    late = records[len(records) // 2:]
    accept = [r["aa_accept_sent"] for r in late]
    assert sum(accept) / len(accept) < 1 and min(accept) < 1, accept
    assert late[-1]["aa_acc"] > late[-1]["aa_acc_base"]  # better than the majority guess
    assert late[-1]["aa_lambda"] > 0
    assert late[-1]["aa_skip_tok"] > 0


def test_transformer_skips_easy_pairs(train_data, transformer_run):
    """The pairs it skips are the ones the Boss finds easy: in the run's second half the
    pairs trained hold a larger share of the toy corpus's noisy pairs (random targets: they
    stay hard) than the corpus does; uniform batches, or skips at random, train the
    corpus's share."""
    save_dir, proc = transformer_run
    _check_assistant_took_over(proc.stdout)
    sources = (train_data.parent / "raw" / "train.src").read_text().splitlines()
    noisy = np.array(["noise" in s.split() for s in sources])  # utils.write_parallel
    trace = read_trace(save_dir / "trace")
    trained = np.concatenate([ids for _, _, ids in trace[len(trace) // 2:]])
    assert noisy[trained].mean() > noisy.mean(), (noisy[trained].mean(), noisy.mean())


@pytest.mark.parametrize("arch", ["lstm", "fconv"])
def test_other_boss_families(train_data, tmp_path, arch):
    # plain cross-entropy with lstm; label smoothing and importance weights with fconv:
    # reweighted training still skips
    kwargs = {"criterion": ("--criterion", "cross_entropy")} if arch == "lstm" else {}
    extra = ["--assistant-reweight"] if arch == "fconv" else []
    proc = _train(train_data, tmp_path, arch, extra=extra, **kwargs)
    _check_assistant_took_over(proc.stdout)


def test_trained_model_decodes(train_data, transformer_run):
    """fairseq-generate decodes the valid set with the checkpoint, and its BLEU4 is a score
    in [0, 100] of the hypotheses it printed: sacreBLEU's on the same H- and T- lines (the
    same lengths; no smoothing, as fairseq's)."""
    import sacrebleu

    save_dir, _ = transformer_run
    proc = run(["fairseq-generate", train_data, "--user-dir", USER_DIR, "--task",
                "autoassist_translation", "--path", save_dir / "checkpoint_last.pt",
                "--gen-subset", "valid", "--beam", "2", "--batch-size", "32", "--cpu"])
    lines = [line.split("\t") for line in proc.stdout.splitlines()]
    hyps = {line[0][2:]: line[2] for line in lines if line[0].startswith("H-")}
    refs = {line[0][2:]: line[1] for line in lines if line[0].startswith("T-")}
    sources = [line for line in lines if line[0].startswith("S-")]
    assert len(hyps) == len(refs) == len(sources) >= 90
    found = re.search(r"Generate valid with beam=2: BLEU4 = (\d+\.\d+), .* syslen=(\d+), "
                      r"reflen=(\d+)\)", proc.stdout + proc.stderr)
    assert found, (proc.stdout + proc.stderr)[-2000:]
    bleu, syslen, reflen = float(found.group(1)), int(found.group(2)), int(found.group(3))
    assert 0 <= bleu <= 100
    ids = sorted(hyps)
    again = sacrebleu.corpus_bleu([hyps[i] for i in ids], [[refs[i] for i in ids]],
                                  tokenize="none", smooth_method="none")
    assert (again.sys_len, again.ref_len) == (syslen, reflen)
    assert bleu == pytest.approx(again.score, abs=0.01)


def test_update_freq_and_max_epoch(train_data, tmp_path):
    """--update-freq 2: each update trains two of the epoch's batches (the last one of an
    odd epoch alone), so an epoch makes half as many updates as it has batches, rounded up;
    --max-epoch 2: two epochs, each validated."""
    proc = run(train_args(train_data, tmp_path, extra=[
        "--max-epoch", "2", "--update-freq", "2", "--assistant-trace-dir", tmp_path / "trace"]))
    assert "done training" in proc.stdout + proc.stderr
    assert len(log_records(proc.stdout, "valid")) == 2
    trace = read_trace(tmp_path / "trace")
    ends = [int(u) for u in re.findall(r"\| train \| epoch 00\d .*num_updates (\d+)",
                                       proc.stdout)]
    batches = [sum(1 for e, _, _ in trace if e == epoch) for epoch in (1, 2)]
    assert ends == [-(-batches[0] // 2), -(-batches[0] // 2) - (-batches[1] // 2)], \
        (ends, batches)
    per_update = {}
    for _, update, _ in trace:
        per_update[update] = per_update.get(update, 0) + 1
    assert sorted(per_update) == list(range(ends[-1]))  # 0-based: updates made before it
    assert sum(per_update.values()) == sum(batches) and max(per_update.values()) == 2


def test_boss_trains_fewer_tokens_per_epoch_than_translation(train_data, random_skip_run):
    """Skipped pairs stay skipped: later epochs train clearly fewer tokens than a full
    pass (what plain ``translation`` trains every epoch), and the Boss never trains more
    tokens than the Assistant accepted (nothing is added back to fill an epoch)."""
    from fairseq.data import data_utils

    # the random rule keeps 60% of every pass from pass 2 on: a known rate to check against
    proc = random_skip_run  # conftest: --max-epoch 6, --assistant-trace-dir, RANDOM_SKIP
    datasets = [data_utils.load_indexed_dataset(str(train_data / f"train.src-tgt.{lang}"), None)
                for lang in ("src", "tgt")]
    sizes = [np.array(ds.sizes) for ds in datasets]  # a view of the memory map: copied
    tokens = sizes[0] + sizes[1]
    full_pass = int(tokens.sum())
    per_epoch = {}
    for epoch, _, ids in read_trace(random_skip_run.trace):
        per_epoch[epoch] = per_epoch.get(epoch, 0) + int(tokens[ids].sum())
    assert sorted(per_epoch) == [1, 2, 3, 4, 5, 6]
    assert per_epoch[1] <= full_pass * 1.02  # one pass's worth of batches
    for epoch in (3, 4, 5, 6):
        assert 0.5 * full_pass < per_epoch[epoch] < 0.7 * full_pass, (per_epoch, full_pass)
    last = [line for line in proc.stdout.splitlines() if "| train | epoch 006" in line][0]
    boss_tok, skip_tok, padded_tok = (int(re.search(rf"{key} (\d+)", last).group(1))
                                      for key in ("aa_boss_tok", "aa_skip_tok",
                                                  "aa_boss_padded_tok"))
    trained = sum(per_epoch.values())
    assert boss_tok == trained
    # padded: every batch's pairs times its longest source plus its longest target
    assert padded_tok == sum(len(ids) * (int(sizes[0][ids].max()) + int(sizes[1][ids].max()))
                             for _, _, ids in read_trace(random_skip_run.trace)) > boss_tok
    assert skip_tok > 0.3 * trained


def test_loader_workers_and_buffer_train_the_same_batches(train_data, random_skip_run, tmp_path):
    """--num-workers and --data-buffer-size collate ahead in the background, as fairseq's
    own iterator does, without changing which batches are trained, or their order."""
    # "plain" (--num-workers 0 --data-buffer-size 0): the first 2 epochs of random_skip_run
    traces = [[ids for epoch, _, ids in read_trace(random_skip_run.trace) if epoch <= 2]]
    for name, loader in (("ahead", ["--num-workers", "2", "--data-buffer-size", "6"]),):
        run(train_args(train_data, tmp_path / name, extra=[
            "--max-epoch", "2", "--assistant-trace-dir", tmp_path / f"trace-{name}",
            *RANDOM_SKIP, *loader]))
        traces.append([ids for _, _, ids in read_trace(tmp_path / f"trace-{name}")])
    assert traces[0] == traces[1] and len(traces[0]) > 40


def test_features_fit_fairseqs_dataset_wrappers(train_data, tmp_path):
    """--truncate-source changes the dataset's sizes, not its pairs: the feature file still
    fits (so do fairseq's other wrappers, e.g. a prepended BOS)."""
    proc = run(train_args(train_data, tmp_path, extra=[
        "--max-update", "5", "--truncate-source", "--max-source-positions", "12"]))
    assert "done training" in proc.stdout + proc.stderr
