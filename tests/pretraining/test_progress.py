"""Pretraining progress: on a terminal a bar with the log records written
above it (the bar is cleared first, then redrawn), elsewhere one line at the
end (and one per interval), nothing when quiet."""
import io
import logging
import sys

import pytest

from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.loop import pretrain

from .conftest import tiny_overrides


class Terminal(io.StringIO):
    def isatty(self):
        return True


def run(tmp_path, corpus_file, tiny_model_dir, **options):
    config = load_pretraining_config(None, tiny_overrides(corpus_file, tiny_model_dir))
    return pretrain(config, tmp_path / "out", **options)


def test_log_records_go_above_the_bar_on_a_terminal(tmp_path, corpus_file, tiny_model_dir, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    handler = logging.StreamHandler(terminal)
    logging.root.addHandler(handler)
    level, logging.root.level = logging.root.level, logging.INFO
    try:
        run(tmp_path, corpus_file, tiny_model_dir)
    finally:
        logging.root.removeHandler(handler)
        logging.root.setLevel(level)
    physical_lines = terminal.getvalue().split("\n")
    logged = [line for line in physical_lines if "step 3 loss=" in line]
    assert len(logged) == 1
    *drawn, cleared, message = logged[0].split("\r")
    assert message.startswith("step 3 loss=") and cleared.strip() == "", "the bar was not cleared first"
    assert any("pretrain:" in part for part in drawn), "no bar before the record"
    assert "4/4" in physical_lines[-3] and "loss" in physical_lines[-3]  # the bar, then "Saved the model"


def test_not_a_terminal_gets_a_line_and_quiet_nothing(tmp_path, corpus_file, tiny_model_dir, capfd):
    run(tmp_path, corpus_file, tiny_model_dir)
    err = capfd.readouterr().err
    assert "pretrain: 4/4 steps (100%)" in err and "steps/s" in err and ", loss " in err
    assert "\r" not in err
    run(tmp_path / "quiet", corpus_file, tiny_model_dir, quiet=True)
    assert "pretrain:" not in capfd.readouterr().err


@pytest.fixture(autouse=True)
def _no_stray_handlers():
    yield
    assert not any(type(h).__name__ == "_TqdmLoggingHandler" for h in logging.root.handlers)
