"""Tools that run the pair checks outside fairseq's training path: on raw text, and on
labelled pairs to measure them:

    pair_scorer.py         the checks fitted on a sample of raw pairs, batches scored
    sentencepiece_model.py the joint sentencepiece model they encode with, trained or loaded
    pair_files.py          raw pair files (TSV, plain, gzip or stdin) read, and sampled
    score_pairs.py         the ``autoassist-score-pairs`` command (TSV in, scores out)
    opusfilter_filter.py   an OpusFilter filter (its YAML's ``module:`` names this module)
    opuscleaner/           an OpusCleaner filter definition calling ``autoassist-score-pairs``
    filter.py              the ``autoassist-filter`` command: a prepared corpus without
                           the pairs the checks flag
    drop_share.py          its ``--drop-share``: the pairs a share drops, by rank
    filter_output.py       its --out and --scores-out, checked first and replaced whole
    pair_scores.py         its ``--scores-out`` TSV
    check_report.py        the ``autoassist-check-report`` command: the checks scored on
                           labelled pairs mixed into a clean corpus
    labelled_pairs.py      the report's labelled file, the clean corpus, and their mix
    mix_preparation.py     the mix prepared and counted as a training set is
    check_figures.py       the report's figures (AUCs, flag rates, intervals)
    bootstrap.py           the report's intervals (resampling the labelled pairs)
    opusfilter_heuristics.py  OpusFilter's heuristic filters beside the checks in the report
    opusfilter_figures.py  the report's ``opusfilter`` block: those filters' figures

Nothing here is imported by ``--user-dir autoassist_fairseq``.
"""
