import pytest

from utils import make_binarized


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """A 600-pair binarised toy corpus with its feature file."""
    return make_binarized(tmp_path_factory.mktemp("tiny"))
