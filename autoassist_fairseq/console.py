"""What the plugin's console scripts share: their log lines have fairseq-train's format, so
that a user reads one kind of log."""

import logging
import sys

# fairseq_cli/train.py's format (it is not exposed as a name)
FAIRSEQ_LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


def configure_logging(level: int = logging.INFO, stream=None, force: bool = False) -> None:
    """Log at *level* to *stream* (default: standard output, as fairseq-train logs) in
    fairseq's format; *force* replaces handlers set before (``logging.basicConfig``)."""
    logging.basicConfig(format=FAIRSEQ_LOG_FORMAT, level=level,
                        stream=sys.stdout if stream is None else stream, force=force)
