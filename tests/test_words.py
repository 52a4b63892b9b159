"""The words of a side (checks/words.py): texts and subword pieces give the same words."""
import numpy as np
import pytest

from autoassist_fairseq.checks import words as words_module
from autoassist_fairseq.checks.langid import langid_scores
from autoassist_fairseq.checks.words import Pieces, decode_pieces, side_words, unshared_bags
from utils import unshared_words

SPM = [["\u2581Das", "\u2581Ha", "us", "\u2581ist", "\u2581alt", "."],
       ["\u2581", "12", "\u2581Häuser", "\u2581", "\u2581Ha", "us"],  # lone ▁ pieces
       [],
       ["\u2581Los", "\u2581niños", "\u2581están", "\u2581jug", "ando", "."],
       ["\u2581Ha", "us", "\u2581Ha", "u", "s"],  # one word, two piece sequences
       ["\u2581Haus", "\u2581Ha", "us", "\u2581"]]  # and one piece
BPE = [["Das", "Ha@@", "us", "ist", "alt", "."], ["Ha@@", "us@@", "tür"], [], ["Haus"]]
WORDS = [["Das", "Haus", "."], [], ["Haus", "Haus"]]


def _pieces(sentences, extra=()):
    symbols = sorted({p for s in sentences for p in s} | set(extra)) or ["x"]
    index = {s: i for i, s in enumerate(symbols)}
    tokens = np.array([index[p] for s in sentences for p in s], dtype=np.int64)
    return Pieces(tokens, np.cumsum([0] + [len(s) for s in sentences]), symbols)


def _spelled(side, vocabulary):
    sentence, ids = side_words(side, vocabulary)
    words = list(vocabulary)
    out = [[] for _ in range(len(side))]
    for s, i in zip(sentence, ids):
        out[s].append(words[i])
    return out


@pytest.mark.parametrize("sentences", [SPM, BPE, WORDS], ids=["sentencepiece", "bpe", "words"])
@pytest.mark.parametrize("collide", [False, True])
def test_piece_words_are_the_decoded_texts_words(sentences, collide, monkeypatch):
    """A side's words from its pieces are those of its decoded text, also where the first
    hash of two different piece sequences is the same (then every word is spelled)."""
    if collide:  # the first hash then is the first piece's id alone
        monkeypatch.setattr(words_module, "_P", (np.uint64(0), words_module._P[1]))
    want = [decode_pieces(s).split() for s in sentences]
    vocabulary = {}
    assert _spelled(_pieces(sentences), vocabulary) == want
    # and into the vocabulary of the texts' words: the same ids
    texts = [decode_pieces(s) for s in sentences]
    assert _spelled(texts, vocabulary) == want
    assert vocabulary.keys() - {""} == {w for s in want for w in s}  # "": a lone ▁, no word


@pytest.mark.parametrize("sentences, extra, want", [
    # one "▁" symbol (from crawled text) does not turn a subword-nmt dictionary over
    (BPE + [["\u2581\u2582@@", "x"]], (), [*([w.split() for w in
                                                ["Das Haus ist alt .", "Haustür", "", "Haus"]]),
                                              ["\u2581\u2582x"]]),
    # a subword-nmt sentence's last piece ends in "@@": the word without it
    ([["Das", "Ha@@"]], (), [["Das", "Ha"]]),
    # sentencepiece pieces with a word boundary inside (--treat_whitespace_as_suffix)
    ([["\u2581Das", "\u2581Ha", "us\u2581ist", "\u2581alt"]], ("\u2581a", "\u2581b"),
     [["Das", "Haus", "ist", "alt"]]),
], ids=["bpe-with-a-spm-symbol", "bpe-final-@@", "spm-inner-boundary"])
def test_the_dictionarys_mode_decides_the_words(sentences, extra, want):
    side = _pieces(sentences, extra)
    assert _spelled(side, {}) == want
    mode = words_module.sentencepiece_mode(side.symbols)
    assert [decode_pieces(s, mode).split() for s in sentences] == want


def test_rows_of_pieces():
    side = _pieces(SPM)
    part = side.rows(1, 4)
    assert len(part) == 3 and _spelled(part, {}) == [decode_pieces(s).split() for s in SPM[1:4]]


def test_unshared_bags_leave_out_shared_words_and_digits():
    src = ["Hostel Condado de Miranda 2019", "The old house .", ""]
    tgt = ["Gästehaus Condado, de Miranda", "Das alte Haus.", "Haus"]
    vocabulary, bags = unshared_bags(src, tgt)
    words = list(vocabulary)
    got = [[(int(s), words[i]) for s, i in zip(*bag)] for bag in bags]
    assert got[0] == [(0, "Hostel"), (1, "The"), (1, "old"), (1, "house"), (1, ".")]
    assert got[1] == [(0, "Gästehaus"), (1, "Das"), (1, "alte"), (1, "Haus."), (2, "Haus")]
    assert unshared_words("Hostel Condado de Miranda 2019", "Gästehaus Condado, de Miranda") == \
        "Hostel"


def test_clitics_split_by_a_tokenizer_are_joined_to_their_word():
    """A clitic that a tokenizer split off ('t, 're, n't) is one word with the word before it
    that ends in a letter, in the sentence and as the other side's words are compared; a
    quote, a clitic after punctuation or at a sentence's start, and the words of the other
    sentences stay as they are."""
    src = ["i don 't know", "we 're here , 's", "'s x", "they do n't ' t", "don't"]
    tgt = ["x"] * 5
    assert [unshared_words(s, t) for s, t in zip(src, tgt)] == [
        "i don't know", "we're here , 's", "'s", "they don't ' t", "don't"]
    # the joined word is what the other side's words are compared with
    assert unshared_words("don 't go", "don't") == "go"
    assert unshared_words("don 't go", "don") == "don't go"


def test_a_tokenised_side_is_read_as_written():
    """The langid check reads a tokenised English side as its untokenised text: a detached
    't alone makes a short side Nigerian Pidgin by 13 nats."""
    tgt = ["テレビ を 見 て は いけ ま せ ん 。"] * 2
    tokenised, written = langid_scores(["don 't watch tv .", "don't watch tv ."], tgt, "en", "ja")
    assert tokenised == pytest.approx(written, abs=1e-4)
    assert written < 0


def test_langid_scores_of_pieces_are_those_of_their_texts():
    src = [["\u2581The", "\u2581child", "ren", "\u2581play", "\u2581in", "\u2581the",
            "\u2581garden", "."],
           ["\u2581Los", "\u2581niños", "\u2581están", "\u2581jug", "ando", "\u2581en",
            "\u2581el", "\u2581jardín", "."]]
    tgt = [["\u2581Die", "\u2581Kinder", "\u2581spiel", "en", "\u2581im", "\u2581Garten", "."],
           ["\u2581Die", "\u2581Kinder", "\u2581spiel", "en", "\u2581im", "\u2581Garten", "."]]
    pieces = [_pieces(src + tgt).rows(0, 2), _pieces(src + tgt).rows(2, 4)]
    texts = [[decode_pieces(s) for s in side] for side in (src, tgt)]
    by_pieces = langid_scores(*pieces, "en", "de")
    np.testing.assert_allclose(by_pieces, langid_scores(*texts, "en", "de"), rtol=1e-5)
    assert by_pieces[1] > 7 > by_pieces[0]  # the Spanish side


def test_an_upper_case_side_is_read_in_lower_case():
    """As py3langid lowers an upper-case text, the bag of an upper-case side is read in lower
    case; a side with one lower-case word is read as it is."""
    tgt = ["Die Kinder spielen im Garten."] * 3
    src = ["LOS NIÑOS ESTÁN JUGANDO EN EL JARDÍN.", "los niños están jugando en el jardín.",
           "LOS NIÑOS ESTÁN JUGANDO EN EL jardín."]
    upper, lower, mixed = langid_scores(src, tgt, "en", "de")
    np.testing.assert_allclose(upper, lower, rtol=1e-5)
    assert abs(mixed - lower) > 1.0
    # "ª" is a lower-case letter without an upper-case form: the side is not upper case
    assert not (src[0] + " ª").isupper()
    as_is, lowered = langid_scores([src[0] + " ª", src[1] + " ª"], tgt[:2], "en", "de")
    assert abs(as_is - lowered) > 1.0
