# fairseq's --user-dir imports this folder's modules; registration happens on import.
from . import autoassist_translation  # noqa: F401
