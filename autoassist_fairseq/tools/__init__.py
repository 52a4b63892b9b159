"""Tools that run the pair checks outside fairseq's training path, on raw text:

    pair_scorer.py         the checks fitted on a sample of raw pairs, batches scored
    score_pairs.py         the ``autoassist-score-pairs`` command (TSV in, scores out)
    opusfilter_filter.py   an OpusFilter filter (its YAML's ``module:`` names this module)
    opuscleaner/           an OpusCleaner filter definition calling ``autoassist-score-pairs``

Nothing here is imported by ``--user-dir autoassist_fairseq``.
"""
