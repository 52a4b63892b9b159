"""scripts/evaluate.sh: fairseq-generate + detokenised sacreBLEU on a briefly trained model."""

import re

import pytest

import warm
from scripts_helpers import SCRIPTS, make_synthetic_data, run
from utils import REPO

SIGNATURE = re.compile(r"nrefs:1\|case:mixed\|eff:no\|tok:13a\|smooth:exp\|version:\d")

TINY_TRANSFORMER = [
    "--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
    "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
    "--decoder-attention-heads", "2", "--share-all-embeddings",
]


@pytest.fixture(scope="module")
def trained(synthetic_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    data = synthetic_data  # conftest: make_synthetic_data(..., pairs=300, bpe_size=300)
    save_dir = root / "checkpoints"
    run(["fairseq-train", data, "--task", "translation", *TINY_TRANSFORMER,
         "--optimizer", "adam", "--lr", "0.001", "--criterion", "label_smoothed_cross_entropy",
         "--label-smoothing", "0.1", "--max-tokens", "500", "--max-update", "5", "--cpu",
         "--save-dir", save_dir, "--save-interval-updates", "2", "--num-workers", "0",
         "--log-format", "simple", "--seed", "1"], timeout=300)
    return data, save_dir


def test_evaluate_prints_sacrebleu_signature(trained):
    data, save_dir = trained
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--cpu", "--",
                "--max-len-a", "1", "--max-len-b", "5"], timeout=300)
    out = proc.stdout
    assert re.search(r"^BLEU = \d+\.\d+ ", out, re.M), out
    assert SIGNATURE.search(out), out
    hyp = save_dir / "hyp.checkpoint_best.test.tgt"
    refs = (data / "raw" / "test.tgt").read_text().splitlines()
    assert len(hyp.read_text().splitlines()) == len(refs) == 30
    assert "no hypothesis" not in proc.stderr  # every test sentence was translated


def test_evaluate_averages_last_checkpoints(trained):
    data, save_dir = trained
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--avg-last", "2", "--beam", "2",
                "--lenpen", "1.0", "--subset", "valid", "--cpu", "--",
                "--max-len-a", "1", "--max-len-b", "5"], timeout=300)
    assert "averaged 2 checkpoints (checkpoint_1_2.pt, checkpoint_1_4.pt)" in proc.stdout
    assert (save_dir / "checkpoint.avg2.pt").exists()
    assert SIGNATURE.search(proc.stdout)
    assert len((save_dir / "hyp.checkpoint.avg2.valid.tgt").read_text().splitlines()) == 40


def test_evaluate_errors_name_the_missing_thing(trained, tmp_path):
    data, save_dir = trained
    proc = run([SCRIPTS / "evaluate.sh", data, tmp_path], check=False)
    assert proc.returncode != 0 and "checkpoint_last.pt" in proc.stderr
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--avg-last", "9"], check=False)
    assert proc.returncode != 0 and "only 2" in proc.stderr


def test_evaluate_passes_the_sacrebleu_tokenizer(trained):
    """--tokenize picks sacreBLEU's tokenizer (e.g. zh, ja-mecab for other targets)."""
    data, save_dir = trained
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--checkpoint", "checkpoint_last.pt",
                "--tokenize", "char", "--beam", "1", "--cpu", "--",
                "--max-len-a", "1", "--max-len-b", "5"], timeout=300)
    assert "|tok:char|" in proc.stdout and "tok:13a" not in proc.stdout
    proc = run([SCRIPTS / "evaluate.sh", data, save_dir, "--tokenize"], check=False)
    assert proc.returncode != 0 and "--tokenize needs a value" in proc.stderr


def test_copied_outputs_counts_translations_equal_to_their_source(tmp_path):
    """research.copied_outputs: a copy ignores case and end blanks; a near copy is not one;
    a hypothesis file of another length is refused with the reason."""
    import sys

    from research.copied_outputs import copies

    src = ["A dog runs.", "Two men talk", "a cat"]
    assert copies(src, ["a dog runs. ", "Zwei Männer reden", "a cat!"]) == [0]
    (tmp_path / "src").write_text("\n".join(src) + "\n")
    (tmp_path / "hyp").write_text("Ein Hund rennt.\ntwo men talk\nA CAT\n")
    (tmp_path / "short").write_text("Ein Hund rennt.\n")
    proc = warm.run([sys.executable, "-m", "research.copied_outputs", "--source",
                     tmp_path / "src", tmp_path / "hyp"], capture_output=True, text=True,
                    cwd=REPO, timeout=60)
    assert proc.returncode == 0 and "2 of 3 copy their source (66.7%)" in proc.stdout, proc
    proc = warm.run([sys.executable, "-m", "research.copied_outputs", "--source",
                     tmp_path / "src", tmp_path / "short"], capture_output=True, text=True,
                    cwd=REPO, timeout=60)
    assert proc.returncode != 0 and "1 hypotheses for 3 source lines" in proc.stderr


def test_bleu_scores_the_best_detokenised_hypothesis(tmp_path, capsys):
    """With --nbest, an id has several hypotheses, best first; with --tokenizer or --bpe,
    H- lines hold the tokenised text and D- lines the text that BLEU compares."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sacrebleu_score", SCRIPTS / "sacrebleu_score.py")
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)
    gen = tmp_path / "gen.txt"
    refs = ["the cat sat on the mat, as cats do.", "a good day to you all, my friends!"]
    gen.write_text(
        "S-1\tb\nH-1\t-0.1\ta good day to you all , my friends !\nD-1\t-0.1\t" + refs[1]
        + "\nH-1\t-0.9\tday\nD-1\t-0.9\tday\nS-0\ta\n"
        "H-0\t-0.2\tthe cat sat on the mat , as cats do .\nD-0\t-0.2\t" + refs[0]
        + "\nH-0\t-0.8\tbye\nD-0\t-0.8\tbye\n")
    ref = tmp_path / "ref.txt"
    ref.write_text("".join(r + "\n" for r in refs))
    assert score.main(["--generate-output", str(gen), "--ref", str(ref),
                       "--hyp-out", str(tmp_path / "hyp.txt")]) == 0
    assert (tmp_path / "hyp.txt").read_text() == ref.read_text()
    assert "BLEU = 100.00" in capsys.readouterr().out
