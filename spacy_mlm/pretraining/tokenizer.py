"""Subword tokenizers trained on the pretraining corpus (from-scratch runs).

Each kind is wrapped in the transformers fast-tokenizer class of the model family
that uses it, so AutoTokenizer, spacy-transformers and our encoder load it and
the special-token template ([CLS] A [SEP] B [SEP] or <s> A </s></s> B </s>) is right:

* wordpiece: BERT (BertTokenizerFast), lowercase optional
* bpe: byte-level BPE as in GPT-2/RoBERTa (RobertaTokenizerFast)
* unigram: SentencePiece-style Unigram with Metaspace (XLMRobertaTokenizerFast)
"""
from typing import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from ..errors import SettingError

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
KINDS = ("wordpiece", "bpe", "unigram")


def train_tokenizer(
    texts: Iterable[str], kind: str = "wordpiece", vocab_size: int = 8000, lowercase: bool = True, max_length: int = 512
):
    if kind not in KINDS:
        raise SettingError(f"tokenizer kind must be one of {', '.join(KINDS)}, got {kind!r}")
    texts = list(texts)
    if kind == "wordpiece":
        from transformers import BertTokenizerFast

        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(_batches(texts), trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=BERT_SPECIALS))
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
        return BertTokenizerFast(tokenizer_object=tok, do_lower_case=lowercase, model_max_length=max_length)
    if kind == "bpe":
        from transformers import RobertaTokenizerFast

        tok = Tokenizer(models.BPE())
        if lowercase:
            tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=ROBERTA_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        )
        tok.train_from_iterator(_batches(texts), trainer)
        tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
        return RobertaTokenizerFast(tokenizer_object=tok, model_max_length=max_length)
    from transformers import XLMRobertaTokenizerFast

    tok = Tokenizer(models.Unigram())
    steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=ROBERTA_SPECIALS, unk_token="<unk>")
    tok.train_from_iterator(_batches(texts), trainer)
    s, e = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", s), ("</s>", e)]
    )
    return XLMRobertaTokenizerFast(tokenizer_object=tok, model_max_length=max_length)


def _batches(texts, size: int = 1000) -> Iterator[list]:
    for i in range(0, len(texts), size):
        yield texts[i : i + size]
