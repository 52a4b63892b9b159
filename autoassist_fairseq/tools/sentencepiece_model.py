"""The joint sentencepiece model the raw-text tools encode with: trained on both sides of a
sample as :mod:`..prepare.spm_train_encode` trains it (its defaults), or loaded from a file;
and the texts made one line each, as that module reads a line, before they are encoded.
"""

import os
import re
import tempfile
from typing import List, Sequence

import numpy as np

from ..prepare.spm_train_encode import LINE_BREAKS

# a character that LINE_BREAKS turns into a space: a text without one is left as it is (one
# search over a batch instead of a translate per text)
_BREAK = re.compile("[" + re.escape("".join(map(chr, LINE_BREAKS))) + "]")


def one_line(texts: Sequence[str]) -> List[str]:
    """*texts* with LINE_BREAKS' characters turned into spaces (``t.translate(LINE_BREAKS)``
    of each text, as :mod:`..prepare.spm_train_encode` reads a line)."""
    texts = list(texts)
    joined = "\n".join(texts)  # "\n" is none of them
    hits = [m.start() for m in _BREAK.finditer(joined)]
    if hits:  # the texts that hold one: where each text starts in *joined*
        starts = np.cumsum([0] + [len(t) + 1 for t in texts[:-1]])
        for i in np.unique(np.searchsorted(starts, hits, side="right") - 1).tolist():
            texts[i] = texts[i].translate(LINE_BREAKS)
    return texts


def train_sentencepiece(sources: Sequence[str], targets: Sequence[str], vocab_size: int,
                        threads: int = 1):
    """A joint sentencepiece BPE model of both sides, trained as
    :mod:`..prepare.spm_train_encode` trains it (its defaults), as a processor."""
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as workdir:
        files = []
        for side, lines in (("src", sources), ("tgt", targets)):
            path = os.path.join(workdir, f"train.{side}")
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write("".join(line + "\n" for line in one_line(lines)))
            files.append(path)
        prefix = os.path.join(workdir, "spm")
        try:
            spm.SentencePieceTrainer.train(
                input=",".join(files), model_prefix=prefix, vocab_size=vocab_size,
                model_type="bpe", character_coverage=0.9999, hard_vocab_limit=False,
                input_sentence_size=2_000_000, shuffle_input_sentence=True,
                num_threads=threads, bos_id=-1, eos_id=-1, unk_id=0, pad_id=-1, minloglevel=2)
        except RuntimeError as err:
            raise ValueError(f"sentencepiece could not train a vocabulary of {vocab_size} "
                             f"pieces on the fit sample ({err}); give a smaller --bpe-size, "
                             "more pairs to fit on, or a model (--spm-model)") from None
        return spm.SentencePieceProcessor(model_file=prefix + ".model")


def load_sentencepiece(path: str):
    import sentencepiece as spm

    if not os.path.isfile(path):
        raise FileNotFoundError(f"sentencepiece model not found: {path}")
    try:
        return spm.SentencePieceProcessor(model_file=path)
    except (RuntimeError, OSError) as err:
        raise ValueError(f"{path} is not a sentencepiece model ({err})") from None
