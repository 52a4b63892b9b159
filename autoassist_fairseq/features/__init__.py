"""Step 1 of the data flow: TF-IDF features psi_i of every source-target pair.

``tfidf`` computes them (pure), ``store`` writes and memory-maps them, ``build`` is
the ``autoassist-features`` command.
"""

from .store import FeatureStore, feature_prefix  # noqa: F401
from .tfidf import count_matrix, tfidf_features  # noqa: F401
