import json
import random

import pytest

from spacy_mlm.testing import SAMPLE_TEXT


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory):
    """BERT-format plain text: one sentence per line, blank lines between 40 documents."""
    rng = random.Random(0)
    lines = []
    for _ in range(40):
        lines += rng.sample(SAMPLE_TEXT, 4) + [""]
    path = tmp_path_factory.mktemp("corpus") / "train.txt"
    path.write_text("\n".join(lines), encoding="utf8")
    return path


@pytest.fixture(scope="session")
def still_model_dir(tmp_path_factory):
    """The tiny BERT with dropout off, so runs that split a batch differently
    (accumulation, processes, resume) must give the same numbers."""
    from spacy_mlm.testing import make_tiny_bert

    path = make_tiny_bert(tmp_path_factory.mktemp("still_bert"))
    config = json.loads((path / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (path / "config.json").write_text(json.dumps(config))
    return path


def tiny_overrides(corpus, source, **extra):
    """Settings for a few fast steps of the tiny model."""
    settings = {
        "paths.train": str(corpus),
        "paths.source": None if source is None else str(source),
        "pretraining.max_length": 32,
        "pretraining.batch_size": 8,
        "pretraining.max_steps": 4,
        "pretraining.eval_every": 2,
        "pretraining.eval_sequences": 8,
        "pretraining.checkpoint_every": 2,
        "pretraining.log_every": 1,
        "pretraining.optimizer.learning_rate": 0.001,
        "pretraining.optimizer.warmup_steps": 1,
        "pretraining.scratch.vocab_size": 300,
        "pretraining.scratch.hidden_size": 32,
        "pretraining.scratch.num_layers": 1,
        "pretraining.scratch.num_heads": 2,
        "pretraining.scratch.intermediate_size": 64,
    }
    settings.update(extra)
    return settings


@pytest.fixture(scope="session")
def pretrained_dir(tmp_path_factory, corpus_file, tiny_model_dir):
    """Output of a short real run from the tiny BERT (shared by loading and fill-mask tests)."""
    from spacy_mlm.pretraining.config import load_pretraining_config
    from spacy_mlm.pretraining.loop import pretrain

    out = tmp_path_factory.mktemp("pretrained")
    config = load_pretraining_config(None, tiny_overrides(corpus_file, tiny_model_dir, **{
        "pretraining.max_steps": 20, "pretraining.eval_every": 10, "pretraining.checkpoint_every": 10,
        "pretraining.optimizer.learning_rate": 0.005}))
    pretrain(config, out)
    return out


def cli_args(settings):
    """`--key value` command-line overrides for the same settings."""
    args = []
    for key, value in settings.items():
        args += [f"--{key}", "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)]
    return args


def read_history(output_dir):
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
