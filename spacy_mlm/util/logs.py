"""Quieting a library's log for a block where what it says is handled (or
contradicted) by our own checks and messages."""
import logging
from contextlib import contextmanager


@contextmanager
def quiet_logger(name: str):
    """Silence the logger `name` below ERROR for the block."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
