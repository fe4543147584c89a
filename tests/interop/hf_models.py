"""Tiny random fine-tuned Hugging Face classifiers of three families, built in
the tests: the backbone and tokenizer of `spacy_mlm.testing`'s tiny BERT and
DistilBERT (DeBERTa-v2 and ELECTRA on BERT's WordPiece tokenizer: they read any
fast tokenizer), a RoBERTa whose byte-level BPE is trained here on the test
sentences with room for whole words (`testing`'s 400 entries leave "Ġ" a piece
of its own before rare initials, which transformers' pipeline makes a word of
its own, as no real RoBERTa vocabulary does), a task head drawn wide enough
(std 0.5) that the argmax varies from token to token, and config.json's
id2label / problem_type."""
from pathlib import Path
from typing import Optional, Sequence

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoModelForTokenClassification, DebertaV2Config, ElectraConfig, RobertaConfig

from spacy_mlm.testing import make_tiny_bert, make_tiny_distilbert

from .sentences import SENTENCES

FAMILIES = ("bert", "roberta", "deberta-v2")
# families whose sequence-classification heads are also mapped (on the WordPiece tokenizer)
MORE_SEQUENCE_FAMILIES = ("distilbert", "electra")


def make_roberta_tokenizer(directory: Path, texts: Sequence[str]):
    """A byte-level BPE RoBERTa tokenizer trained on `texts` (up to 1000 entries)."""
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import RobertaTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(list(texts), vocab_size=1000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True, add_prefix_space=False)
    tokenizer = RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, model_max_length=62)
    tokenizer.save_pretrained(str(directory))
    return tokenizer


def _config(directory: Path, family: str, texts: Sequence[str]):
    if family == "roberta":
        tokenizer = make_roberta_tokenizer(directory, texts)
        return RobertaConfig(
            vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64, type_vocab_size=1, pad_token_id=tokenizer.pad_token_id,
            bos_token_id=0, eos_token_id=2,
        )
    if family == "distilbert":  # its own tokenizer class: it takes no token_type_ids
        make_tiny_distilbert(directory, texts=list(texts))
        return AutoConfig.from_pretrained(str(directory))
    make_tiny_bert(directory, texts=list(texts))
    if family == "electra":
        return ElectraConfig(vocab_size=AutoConfig.from_pretrained(str(directory)).vocab_size, embedding_size=32,
                             hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                             max_position_embeddings=64)
    if family == "deberta-v2":
        bert = AutoConfig.from_pretrained(str(directory))
        return DebertaV2Config(
            vocab_size=bert.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64, type_vocab_size=0, relative_attention=True,
            pos_att_type=["p2c", "c2p"], position_biased_input=False, pad_token_id=bert.pad_token_id,
        )
    return AutoConfig.from_pretrained(str(directory))


def make_classifier(
    directory: Path, family: str, kind: str, labels: Sequence[str], problem_type: Optional[str] = None, seed: int = 0,
    texts: Optional[Sequence[str]] = None,
) -> Path:
    """A `*For{kind}Classification` directory (kind: "Token" or "Sequence") of
    `family` with `labels` as id2label, in `directory`."""
    directory = Path(directory)
    config = _config(directory, family, texts or SENTENCES)
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    config.num_labels = len(labels)
    if problem_type:
        config.problem_type = problem_type
    torch.manual_seed(seed)
    auto = AutoModelForTokenClassification if kind == "Token" else AutoModelForSequenceClassification
    model = auto.from_config(config)
    prefix = model.base_model_prefix + "."
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not name.startswith(prefix):  # the task head
                param.normal_(0.0, 0.5)
    for stale in directory.glob("*.safetensors"):
        stale.unlink()
    model.save_pretrained(str(directory))
    return directory
