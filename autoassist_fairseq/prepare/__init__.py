"""Corpus preparation steps that ``scripts/prepare-corpus.sh`` runs and that the package's
commands reuse (``autoassist-check-report`` prepares its mix with them):

    clean_corpus.py       copy a split to plain text; on training data, Moses' length and
                          ratio filters
    text_files.py         read a corpus's text (plain or gzip, lines split on \\n only)
    spm_train_encode.py   train a joint sentencepiece BPE model, encode text with it

Each module needs numpy or sentencepiece alone, so that ``scripts/clean_corpus.py`` and
``scripts/spm_train_encode.py`` can run them without importing fairseq.
"""
