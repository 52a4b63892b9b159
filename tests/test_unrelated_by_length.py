"""research/unrelated_by_length.py: the unrelated check's flags by length, and a per-pair
null, on a toy corpus whose misaligned pairs are known."""
import numpy as np

from research import unrelated_by_length

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def test_misaligned_pairs_are_above_the_bar_and_translations_below(tmp_path, capsys):
    rng = np.random.default_rng(0)

    def vocab(n):
        return ["".join(rng.choice(list(LETTERS), size=rng.integers(3, 8))) for _ in range(n)]

    en, de = vocab(150), vocab(150)
    n = 2000
    misaligned = np.arange(n) % 10 == 0  # the target of a sentence not in the corpus
    lines = []
    for i in range(n):
        words = rng.integers(0, 150, size=rng.integers(4, 12))
        target = rng.integers(0, 150, size=rng.integers(4, 12)) if misaligned[i] else words
        lines.append(" ".join(en[w] for w in words) + "\t" + " ".join(de[w] for w in target))
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "p.tsv"
    unrelated_by_length.main([str(corpus), "--src", "en", "--tgt", "de", "--bpe-size", "300",
                              "--partners", "20", "--out", str(out)])
    table = np.loadtxt(out)
    assert table.shape == (n, 3)
    assert ((table[:, :2] >= 0) & (table[:, :2] <= 1)).all()
    for column in (0, 1):  # the check's p-value, the per-pair null's
        assert np.mean(table[misaligned, column] > 0.3) > 0.35
        assert np.mean(table[~misaligned, column] > 0.3) < 0.05
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"{corpus}: {n} pairs, flagged")
    # the bands hold every pair once
    assert sum(int(line.split(":")[1].split()[0]) for line in printed[1:]) == n
