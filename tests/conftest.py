import pytest

from utils import make_binarized


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """A 600-pair binarised toy corpus with its feature file."""
    return make_binarized(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def train_data(tmp_path_factory):
    """A 2000-pair toy corpus: enough for a few hundred updates of a tiny Boss."""
    return make_binarized(tmp_path_factory.mktemp("train"), n_train=2000, n_valid=100)


@pytest.fixture(scope="session")
def big_data(tmp_path_factory):
    """A 6000-pair toy corpus: one window of the default size (4096 candidates) pickles to
    more than a pipe's buffer, as on real data."""
    return make_binarized(tmp_path_factory.mktemp("big"), n_train=6000, n_valid=60)
