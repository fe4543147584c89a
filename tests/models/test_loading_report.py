"""Loading an encoder whose weights hold another head than the class loaded
(MiniLM's bare BertModel as a BertForMaskedLM to pretrain, a pretrained
BertForMaskedLM as the bare encoder of a pipeline) is expected here and checked
by `spacy_mlm.models.hf` itself: transformers' own loading report ("newly
initialized ... You should probably TRAIN this model") stays out of the output,
the project's own warning says what happened, and transformers' verbosity is
left as it was."""
import logging

import pytest
from transformers import AutoModel
from transformers.utils import logging as transformers_logging

from spacy_mlm.models.hf import load_backbone, load_mlm_model
from spacy_mlm.testing import make_tiny_bert


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def transformers_records():
    handler, logger = Records(), logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


@pytest.fixture(scope="module")
def bare_encoder_dir(tmp_path_factory):
    """A bare BertModel checkpoint (no MLM head), as the packaged MiniLM is saved."""
    source = make_tiny_bert(tmp_path_factory.mktemp("tiny_mlm"))
    out = tmp_path_factory.mktemp("tiny_bare")
    AutoModel.from_pretrained(str(source)).save_pretrained(str(out))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (source / name).is_file():
            (out / name).write_bytes((source / name).read_bytes())
    return out


def test_mlm_head_initialised_without_transformers_report(bare_encoder_dir, transformers_records, caplog):
    transformers_logging.set_verbosity_warning()
    AutoModel.from_pretrained(str(bare_encoder_dir))  # warm-up: nothing to report for the class it was saved as
    transformers_records.clear()
    with caplog.at_level(logging.WARNING, logger="spacy_mlm.models.hf"):
        loaded = load_mlm_model(bare_encoder_dir)
    assert loaded.head_initialised
    assert not [m for m in transformers_records if "newly initialized" in m], transformers_records
    assert any("has no MLM head" in r.getMessage() for r in caplog.records)
    assert transformers_logging.get_verbosity() == transformers_logging.WARNING


def test_the_report_is_on_without_the_mute(bare_encoder_dir, transformers_records):
    """The check above can fail: transformers does report this load when asked directly."""
    from transformers import AutoModelForMaskedLM

    transformers_logging.set_verbosity_warning()
    AutoModelForMaskedLM.from_pretrained(str(bare_encoder_dir))
    assert [m for m in transformers_records if "newly initialized" in m]


def test_verbosity_restored_after_a_failed_load(bare_encoder_dir, tmp_path):
    import shutil

    from spacy_mlm.errors import ModelLoadError

    broken = shutil.copytree(bare_encoder_dir, tmp_path / "broken")
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    transformers_logging.set_verbosity_info()
    try:
        with pytest.raises(ModelLoadError, match="cannot load the weights"):
            load_backbone(broken)
        assert transformers_logging.get_verbosity() == transformers_logging.INFO
    finally:
        transformers_logging.set_verbosity_warning()
