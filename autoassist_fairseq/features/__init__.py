"""Step 1 of the data flow: TF-IDF features psi_i of every source-target pair.

``tfidf`` computes them (pure), ``store`` writes and memory-maps them, ``build`` is
the ``autoassist-features`` command. Only ``store`` is imported with the package: the Boss
reads the feature file, and ``--user-dir`` must not load the build's scikit-learn modules;
``count_matrix`` and ``tfidf_features`` are imported on first use.
"""

from .store import FeatureStore, feature_prefix  # noqa: F401

_TFIDF_NAMES = ("count_matrix", "tfidf_features")


def __getattr__(name):
    if name in _TFIDF_NAMES:
        from . import tfidf

        return getattr(tfidf, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
