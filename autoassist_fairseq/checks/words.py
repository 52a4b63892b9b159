"""The words of a corpus's sentences, and those a pair's other side lacks (the langid check's
input).

A side comes either as texts (split on whitespace) or as the subword pieces of a binarised
corpus (:class:`Pieces`), whose words are those of the texts :func:`decode_pieces` gives in
the dictionary's mode: sentencepiece (more symbols start with ``▁`` than end in ``@@``) or
subword-nmt. A sentencepiece word starts at a ``▁`` piece, a subword-nmt word runs on over
pieces that end in ``@@``, and any other token is a word; a sentencepiece dictionary with a
``▁`` inside a symbol (``--treat_whitespace_as_suffix``, ``--split_by_whitespace=false``) is
decoded sentence by sentence instead. Either way a side becomes ``(sentence, word id)`` per
word, the ids into one *vocabulary* (word -> id) of both sides. (A piece holds no whitespace:
fairseq's dictionaries and binarisation split on it.)

Invariant: the work per word of the corpus is numpy; Python touches each *distinct* word (or
piece sequence) once, which is what keeps the langid check's cost per pair low on a corpus of
millions of pairs (words repeat).
"""

import re
from dataclasses import dataclass
from itertools import chain
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

_EDGE_PUNCT = re.compile(r"^\W+|\W+$")
# a clitic as English tokenizers split it off its word: an apostrophe and one or two letters
# ('s, 't, 'm, 're, 've, 'll, 'd), or the Penn Treebank's n't
_CLITIC = re.compile(r"^(?:['\u2019][^\W\d_]{1,2}|[nN]['\u2019][tT])$")
_SPM = "\u2581"
_P = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))  # two odd multipliers


@dataclass(frozen=True, eq=False)
class Pieces:
    """One side's sentences as subword pieces: sentence i is ``symbols[j]`` for ``j`` in
    ``tokens[offsets[i]:offsets[i + 1]]``, special symbols (``<s>``, ``</s>``, ...) left out."""

    tokens: np.ndarray
    offsets: np.ndarray
    symbols: Sequence[str]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def rows(self, start: int, stop: int) -> "Pieces":
        """Sentences *start* to *stop*."""
        a, b = int(self.offsets[start]), int(self.offsets[stop])
        return Pieces(self.tokens[a:b], self.offsets[start:stop + 1] - a, self.symbols)


Side = Union[Sequence[str], Pieces]


def sentencepiece_mode(symbols: Sequence[str]) -> bool:
    """Whether a dictionary's pieces are sentencepiece's (``▁`` starts a word) rather than
    subword-nmt's (``@@`` ends a piece inside a word): by the majority of its symbols, so
    that a ``▁`` in crawled text does not turn a subword-nmt dictionary over."""
    return sum(s.startswith(_SPM) for s in symbols) > sum(s.endswith("@@") for s in symbols)


def decode_pieces(pieces: Sequence[str], sentencepiece: Optional[bool] = None) -> str:
    """A sentence's text from its subword pieces: sentencepiece (``▁`` starts a word) or
    subword-nmt (``@@`` ends a piece inside a word, also at the end); other tokens are joined
    by spaces. *sentencepiece*: the dictionary's mode (:func:`sentencepiece_mode`; default:
    whether a piece of this sentence holds a ``▁``)."""
    if sentencepiece is None:
        sentencepiece = any(_SPM in p for p in pieces)
    if sentencepiece:
        return "".join(pieces).replace(_SPM, " ").strip()
    text = " ".join(pieces).replace("@@ ", "")
    return (text[:-2] if text.endswith("@@") else text).strip()


def word_ids(words: List[str], vocabulary: dict) -> np.ndarray:
    """Each word's id in *vocabulary*, which first takes the words it lacks, in order."""
    new = [word for word in dict.fromkeys(words) if word not in vocabulary]
    vocabulary.update(zip(new, range(len(vocabulary), len(vocabulary) + len(new))))
    return np.fromiter(map(vocabulary.__getitem__, words), dtype=np.int64, count=len(words))


def _text_words(texts: Sequence[str], vocabulary: dict) -> Tuple[np.ndarray, np.ndarray]:
    words = [text.split() for text in texts]
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    return (np.repeat(np.arange(len(texts)), lengths),
            word_ids(list(chain.from_iterable(words)), vocabulary))


def _word_pieces(starts: np.ndarray, ends: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Where the pieces of words ``starts[i]:ends[i]`` stand in the side's tokens, one word
    after another, and where each word begins in that list."""
    lengths = ends - starts
    begins = np.cumsum(lengths) - lengths
    return np.repeat(starts - begins, lengths) + np.arange(lengths.sum()), begins


def _spell(spelling: Sequence[str], tokens: np.ndarray, starts: np.ndarray,
           ends: np.ndarray) -> List[str]:
    """The words of pieces ``tokens[starts[i]:ends[i]]``, spelled in one join (no piece holds
    a line break: fairseq's dictionaries are whitespace-separated)."""
    lengths = ends - starts
    at, _ = _word_pieces(starts, ends)
    pieces = np.empty(len(at) + len(starts), dtype=object)
    breaks = np.cumsum(lengths + 1) - 1
    pieces[breaks] = "\n"
    filled = np.ones(len(pieces), dtype=bool)
    filled[breaks] = False
    pieces[filled] = np.asarray(spelling, dtype=object)[tokens[at]]
    return "".join(pieces.tolist()).split("\n")[:-1]


def _sequence_ids(spelling: Sequence[str], tokens: np.ndarray, first: np.ndarray,
                  ends: np.ndarray, vocabulary: dict) -> np.ndarray:
    """The vocabulary ids of the words of pieces ``tokens[first[i]:ends[i]]``, each distinct
    piece sequence spelled once."""
    at, begins = _word_pieces(first, ends)
    position = at - np.repeat(first, ends - first)  # of each piece within its word
    pieces = tokens[at].astype(np.uint64) + np.uint64(1)
    # a word is its piece sequence: two polynomial hashes, the second checks the first
    hashes = []
    for p in _P:
        powers = np.cumprod(np.concatenate(([np.uint64(1)], np.full(position.max(), p))))
        hashes.append(np.add.reduceat(pieces * powers[position], begins))
    _, seen, inverse = np.unique(hashes[0], return_index=True, return_inverse=True)
    if np.array_equal(hashes[1], hashes[1][seen][inverse]):
        return word_ids(_spell(spelling, tokens, first[seen], ends[seen]), vocabulary)[inverse]
    return word_ids(_spell(spelling, tokens, first, ends), vocabulary)  # two share a hash


def _piece_words(side: Pieces, vocabulary: dict) -> Tuple[np.ndarray, np.ndarray]:
    tokens, offsets = np.asarray(side.tokens, dtype=np.int64), np.asarray(side.offsets)
    lengths = np.diff(offsets)
    sentence = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.zeros(len(tokens), dtype=bool)
    starts[offsets[:-1][lengths > 0]] = True
    if sentencepiece_mode(side.symbols):
        if any(_SPM in s[1:] for s in side.symbols):  # a word boundary inside a piece
            symbols = np.asarray(side.symbols, dtype=object)
            return _text_words([decode_pieces(symbols[tokens[a:b]].tolist(), True)
                                for a, b in zip(offsets[:-1], offsets[1:])], vocabulary)
        spelling = [s.replace(_SPM, "") for s in side.symbols]
        starts |= np.fromiter((s.startswith(_SPM) for s in side.symbols), dtype=bool,
                              count=len(side.symbols))[tokens]
    else:
        joins = np.fromiter((s.endswith("@@") for s in side.symbols), dtype=bool,
                            count=len(side.symbols))
        spelling = [s[:-2] if j else s for s, j in zip(side.symbols, joins)]
        starts[1:] |= ~joins[tokens[:-1]]
    if not len(tokens):
        return sentence, tokens
    first = np.flatnonzero(starts)
    ends = np.append(first[1:], len(tokens))
    single = ends - first == 1
    ids = np.empty(len(first), dtype=np.int64)
    # a word of one piece is that piece: its distinct pieces found by a mark over the
    # dictionary, without a sort (most words of a BPE corpus are one piece)
    piece = tokens[first[single]]
    seen_piece = np.zeros(len(side.symbols), dtype=bool)
    seen_piece[piece] = True
    distinct = np.flatnonzero(seen_piece)
    piece_word = np.zeros(len(side.symbols), dtype=np.int64)
    piece_word[distinct] = word_ids([spelling[i] for i in distinct], vocabulary)
    ids[single] = piece_word[piece]
    if not single.all():
        ids[~single] = _sequence_ids(spelling, tokens, first[~single], ends[~single],
                                     vocabulary)
    spelt = np.fromiter(map(bool, vocabulary), dtype=bool, count=len(vocabulary))
    keep = spelt[ids]  # a lone "▁" is no word
    return sentence[first][keep], ids[keep]


def side_words(side: Side, vocabulary: dict) -> Tuple[np.ndarray, np.ndarray]:
    """(sentence, word id) of each word of *side*'s sentences, in order."""
    return (_piece_words if isinstance(side, Pieces) else _text_words)(side, vocabulary)


def _isin(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """``np.isin`` of integers by one sort and a binary search."""
    if not len(pool):
        return np.zeros(len(values), dtype=bool)
    pool = np.sort(pool)
    return pool[np.minimum(np.searchsorted(pool, values), len(pool) - 1)] == values


def rejoin_clitics(sides: List[Tuple[np.ndarray, np.ndarray]],
                   vocabulary: dict) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Each side's :func:`side_words` ``(sentence, word id)`` with each clitic that a
    tokenizer split off (:data:`_CLITIC`: ``'t``, ``'s``, ``'re``, ``n't``, as Moses',
    Stanford's and the Penn Treebank's tokenizers split ``don't``) joined again to the word
    before it in its sentence, when that word ends in a letter and is no clitic itself: the
    word as it was written. A language identifier learned from untokenised text reads a
    detached ``'t`` as the n-grams of a word of its own, which no language writes, and a
    short tokenised side then scores another language above its own (``don 't watch tv .``:
    Nigerian Pidgin by 13 nats; ``don't watch tv .``: English). In untokenised text such a
    word stands alone rarely (Dutch ``'t``, Afrikaans ``'n``), and joining it moves a few
    n-grams.

    Numpy per word of the corpus; each distinct word is read once, and each distinct (word,
    clitic) pair spelled once."""
    words = list(vocabulary)
    clitic = np.fromiter((bool(_CLITIC.match(w)) for w in words), dtype=bool, count=len(words))
    host = np.fromiter((w[-1:].isalpha() for w in words), dtype=bool, count=len(words)) & ~clitic
    return [_rejoin(sentence, ids, words, clitic, host, vocabulary) for sentence, ids in sides]


def _rejoin(sentence, ids, words, clitic, host, vocabulary):
    if len(ids) < 2:
        return sentence, ids
    join = np.zeros(len(ids), dtype=bool)
    join[1:] = clitic[ids[1:]] & host[ids[:-1]] & (sentence[1:] == sentence[:-1])
    if not join.any():
        return sentence, ids
    at = np.flatnonzero(join)
    pairs = ids[at - 1] * len(words) + ids[at]
    distinct, inverse = np.unique(pairs, return_inverse=True)
    spelled = word_ids([words[p // len(words)] + words[p % len(words)]
                        for p in distinct.tolist()], vocabulary)
    out = ids.copy()
    out[at - 1] = spelled[inverse]
    keep = ~join
    return sentence[keep], out[keep]


def unshared_bags(src: Side, tgt: Side):
    """Per side, the words of each sentence that the other side of its pair lacks (compared
    without case and edge punctuation; so all words of punctuation alone compare equal),
    without the words holding digits: ``(vocabulary,
    [(sentence, word id) of the source side, of the target side])``, the words in order;
    a clitic split off by a tokenizer is one word with the word before it
    (:func:`rejoin_clitics`).

    A pair's sentence index times the number of keys plus a word's key is one integer, so
    the set operations of all pairs are one sort and one binary search."""
    vocabulary: dict = {}
    sides = [side_words(side, vocabulary) for side in (src, tgt)]
    sides = rejoin_clitics(sides, vocabulary)
    words = list(vocabulary)
    keys: dict = {}
    key_of = word_ids([w.lower() if w.isalnum() else _EDGE_PUNCT.sub("", w).lower()
                        for w in words], keys)
    has_digit = np.fromiter((not w.isalpha() and any(map(str.isdigit, w)) for w in words),
                            dtype=bool, count=len(words))
    codes = [sentence * max(len(keys), 1) + key_of[ids] for sentence, ids in sides]
    bags = []
    for (sentence, ids), mine, theirs in zip(sides, codes, codes[::-1]):
        keep = ~_isin(mine, theirs) & ~has_digit[ids]
        bags.append((sentence[keep], ids[keep]))
    return vocabulary, bags
