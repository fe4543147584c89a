"""Tiny models for tests and examples: a WordPiece vocab built from a small text,
and a small randomly initialised BERT with an MLM head, saved as a plain Hugging
Face directory. Nothing is downloaded.

The vocab is chosen here, not by `tokenizers`' WordPieceTrainer: that trainer
gives its "##" pieces ids in hash-map order, so the same text trains a different
vocab in every process (huggingface/tokenizers#1794), and every test built on it
would then see another model each run. Normalisation, pre-tokenization and the
WordPiece model itself are still `tokenizers`'."""
from pathlib import Path
from typing import Iterable, List, Optional, Union

from .errors import SettingError

WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

SAMPLE_TEXT = [
    "The pond lies in a quiet wood near the town of Concord.",
    "Anna Berg works for the Northwind Company in Oslo.",
    "Peter Grant flew from Paris to Berlin on Monday.",
    "The river bank was muddy after the rain.",
    "She opened an account at the bank on Main Street.",
    "Our team won the match by two goals.",
    "The film was dull and far too long.",
    "What a wonderful and moving story this is.",
    "A man is playing a guitar on the stage.",
    "Nobody is playing any music tonight.",
    "Children play football in the park every Saturday.",
    "The committee met in Geneva to discuss the new treaty.",
    "Maria Lopez joined Acme Bank as chief economist.",
    "Prices rose sharply in the second quarter.",
    "He sat by the window and read an old book.",
    "The cat sleeps on the warm stone wall.",
]


def wordpiece_vocab(texts: Iterable[str], vocab_size: int, lowercase: bool = True) -> List[str]:
    """A deterministic WordPiece vocab: the special tokens, every character seen
    as a word-initial piece, the characters seen inside words as "##" pieces (as
    WordPieceTrainer's alphabet has them), then whole words from the most frequent
    down (ties alphabetical) up to `vocab_size`. Words left out split into their
    characters, or become [UNK] where a character never appeared inside a word."""
    from collections import Counter

    from tokenizers import normalizers, pre_tokenizers

    normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts: Counter = Counter()
    for text in texts:
        counts.update(word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({char for word in counts for char in word})
    inside = sorted({char for word in counts for char in word[1:]})
    vocab = list(WORDPIECE_SPECIALS) + chars + ["##" + char for char in inside]
    known = set(vocab)
    for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if len(vocab) >= vocab_size:
            break
        if word not in known:
            vocab.append(word)
            known.add(word)
    return vocab


def train_wordpiece_tokenizer(
    texts: Iterable[str], output_dir: Union[str, Path], vocab_size: int = 400, lowercase: bool = True
):
    """A BERT-style WordPiece tokenizer over `wordpiece_vocab(texts)`, saved as a
    `BertTokenizerFast` directory."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertTokenizerFast

    vocab = wordpiece_vocab(texts, vocab_size, lowercase)
    tok = Tokenizer(models.WordPiece({piece: i for i, piece in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(list(WORDPIECE_SPECIALS))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = BertTokenizerFast(tokenizer_object=tok, do_lower_case=lowercase, model_max_length=512)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(output_dir))
    return fast


def make_tiny_bert(
    output_dir: Union[str, Path],
    texts: Optional[Iterable[str]] = None,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 2,
    max_position_embeddings: int = 64,
    vocab_size: int = 400,
    seed: int = 0,
) -> Path:
    """Write a tiny BertForMaskedLM + tokenizer to `output_dir` and return the path."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    output_dir = Path(output_dir)
    tokenizer = train_wordpiece_tokenizer(texts or SAMPLE_TEXT, output_dir, vocab_size=vocab_size)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=hidden_size * 2,
        max_position_embeddings=max_position_embeddings,
        type_vocab_size=2,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = BertForMaskedLM(config)
    model.save_pretrained(str(output_dir))
    tokenizer.model_max_length = max_position_embeddings
    tokenizer.save_pretrained(str(output_dir))
    return output_dir


def make_tiny_roberta(output_dir: Union[str, Path], texts: Optional[Iterable[str]] = None, seed: int = 0) -> Path:
    """A tiny RoBERTa (byte-level BPE, `<s> A </s></s> B </s>` pairs, no segment ids)."""
    return make_tiny_family("roberta", output_dir, texts, seed)


def make_tiny_distilbert(output_dir: Union[str, Path], texts: Optional[Iterable[str]] = None, seed: int = 0) -> Path:
    """A tiny DistilBERT (WordPiece, no segment embeddings)."""
    return make_tiny_family("distilbert", output_dir, texts, seed)


# Tiny models of every encoder family the project supports, each with a fast
# tokenizer of the family's kind built here from SAMPLE_TEXT (nothing is
# downloaded): WordPiece (BERT, DistilBERT, ELECTRA, MPNet), byte-level BPE
# (RoBERTa, ModernBERT), SentencePiece Unigram (XLM-R, DeBERTa-v3, ALBERT).
# Each has the family's special tokens and pair template, and its quirks:
# ELECTRA's and ALBERT's embedding projection, ALBERT's one shared layer,
# DeBERTa-v3's relative attention, no segment ids and an embedding matrix
# larger than the tokenizer, ModernBERT's rotary local/global attention and its
# generic tokenizer class (templates only in tokenizer.json), XLM-R's and
# MPNet's positions offset by the padding index.
FAMILIES = ("bert", "roberta", "xlm-roberta", "distilbert", "electra", "deberta-v2", "modernbert", "albert", "mpnet")
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
TINY_POSITIONS = 64
# DeBERTa-v3 keeps more embedding rows than tokenizer entries (128,100 for 128,000)
DEBERTA_SPARE_ROWS = 12


def _templates(cls: str, sep: str, double_sep: bool):
    """(single, pair) TemplateProcessing strings: BERT's `[CLS] A [SEP] B [SEP]`
    with segment 1 for B, or RoBERTa's `<s> A </s></s> B </s>` in one segment."""
    if double_sep:
        return f"{cls} $A {sep}", f"{cls} $A {sep} {sep} $B {sep}"
    return f"{cls} $A {sep}", f"{cls} $A {sep} $B:1 {sep}:1"


def _finish(tok, specials: List[str], cls: str, sep: str, double_sep: bool):
    """Add the special tokens and the template to a `tokenizers.Tokenizer`."""
    from tokenizers import AddedToken, processors

    tok.add_special_tokens([AddedToken(s, lstrip="mask" in s.lower(), special=True) for s in specials])
    single, pair = _templates(cls, sep, double_sep)
    tok.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))]
    )
    return tok


def _wordpiece_backend(texts: List[str], specials: List[str], cls: str, sep: str, double_sep: bool, unk: str):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    vocab = list(specials) + [piece for piece in wordpiece_vocab(texts, 400) if piece not in WORDPIECE_SPECIALS]
    tok = Tokenizer(models.WordPiece({piece: i for i, piece in enumerate(vocab)}, unk_token=unk))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return _finish(tok, specials, cls, sep, double_sep)


def _bpe_backend(texts: List[str], specials: List[str], cls: str, sep: str, double_sep: bool):
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=400, special_tokens=specials)
    return _finish(bpe._tokenizer, specials, cls, sep, double_sep)


def _unigram_backend(texts: List[str], specials: List[str], cls: str, sep: str, double_sep: bool, unk: str):
    """A SentencePiece-style Unigram model: whole words (with their leading
    `▁`, punctuation attached as SentencePiece leaves it) scored by frequency,
    then every character alone and after `▁`, so any other word splits into
    pieces whose offsets can include the space before it."""
    import math
    from collections import Counter

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    words = Counter(word for text in texts for word in text.split())
    total = sum(words.values())
    chars = sorted({char for word in words for char in word})
    pieces = [(s, 0.0) for s in specials] + [("▁", -3.0)]
    pieces += [("▁" + w, math.log(n / total)) for w, n in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:250]]
    pieces += [(c, -12.0) for c in chars] + [("▁" + c, -13.0) for c in chars]
    tok = Tokenizer(models.Unigram(pieces, unk_id=specials.index(unk), byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return _finish(tok, specials, cls, sep, double_sep)


def _family_tokenizer(family: str, texts: List[str]):
    """The family's fast tokenizer class around a backend of the family's kind."""
    import transformers as tf

    bert = dict(unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]")
    roberta = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", cls_token="<s>", sep_token="</s>",
                   pad_token="<pad>", mask_token="<mask>")
    wordpiece = lambda tokens, order, double: _wordpiece_backend(  # noqa: E731
        texts, [tokens[k] for k in order], tokens["cls_token"], tokens["sep_token"], double, tokens["unk_token"])
    unigram = lambda tokens, order, double: _unigram_backend(  # noqa: E731
        texts, [tokens[k] for k in order], tokens["cls_token"], tokens["sep_token"], double, tokens["unk_token"])
    bert_order = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
    roberta_order = ("cls_token", "pad_token", "sep_token", "unk_token", "mask_token")
    if family in ("bert", "electra", "distilbert"):
        cls = {"bert": tf.BertTokenizerFast, "electra": tf.ElectraTokenizerFast,
               "distilbert": tf.DistilBertTokenizerFast}[family]
        return cls(tokenizer_object=wordpiece(bert, bert_order, False), **bert)
    if family == "mpnet":
        tokens = {**roberta, "unk_token": "[UNK]"}
        return tf.MPNetTokenizerFast(tokenizer_object=wordpiece(tokens, roberta_order, True), **tokens)
    if family == "roberta":
        specials = [roberta[k] for k in roberta_order]
        return tf.RobertaTokenizerFast(tokenizer_object=_bpe_backend(texts, specials, "<s>", "</s>", True), **roberta)
    if family == "modernbert":
        # transformers' generic class, as ModernBERT ships: its templates live only in tokenizer.json
        specials = [bert[k] for k in ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token")]
        return tf.PreTrainedTokenizerFast(tokenizer_object=_bpe_backend(texts, specials, "[CLS]", "[SEP]", False),
                                          model_input_names=["input_ids", "attention_mask"], **bert)
    if family == "xlm-roberta":
        return tf.XLMRobertaTokenizerFast(tokenizer_object=unigram(roberta, roberta_order, True), **roberta)
    if family == "albert":
        order = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
        tokens = {**bert, "pad_token": "<pad>", "unk_token": "<unk>"}
        return tf.AlbertTokenizerFast(tokenizer_object=unigram(tokens, order, False), **tokens)
    if family == "deberta-v2":
        order = ("pad_token", "cls_token", "sep_token", "unk_token", "mask_token")
        return tf.DebertaV2TokenizerFast(tokenizer_object=unigram(bert, order, False), **bert)
    raise SettingError(f"no tiny model for family {family!r}; the families are {', '.join(FAMILIES)}")


def _family_config(family: str, tokenizer):
    """A tiny config of the family (2 layers, width 32) for `tokenizer`."""
    import transformers as tf

    ids = dict(pad_token_id=tokenizer.pad_token_id, vocab_size=len(tokenizer))
    offset = ids["pad_token_id"] + 1  # positions counted from the padding index
    if family == "bert":
        return tf.BertConfig(**TINY, **ids, max_position_embeddings=TINY_POSITIONS, type_vocab_size=2)
    if family == "electra":
        return tf.ElectraConfig(**TINY, **ids, embedding_size=16, max_position_embeddings=TINY_POSITIONS)
    if family == "distilbert":
        return tf.DistilBertConfig(vocab_size=ids["vocab_size"], pad_token_id=ids["pad_token_id"], dim=32, n_layers=2,
                                   n_heads=2, hidden_dim=64, max_position_embeddings=TINY_POSITIONS)
    if family in ("roberta", "xlm-roberta"):
        config = tf.RobertaConfig if family == "roberta" else tf.XLMRobertaConfig
        return config(**TINY, **ids, max_position_embeddings=TINY_POSITIONS + offset, type_vocab_size=1,
                      bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    if family == "mpnet":
        return tf.MPNetConfig(**TINY, **ids, max_position_embeddings=TINY_POSITIONS + offset,
                              bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    if family == "albert":
        return tf.AlbertConfig(**TINY, **ids, embedding_size=16, num_hidden_groups=1, inner_group_num=1,
                               max_position_embeddings=TINY_POSITIONS, type_vocab_size=2,
                               bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    if family == "deberta-v2":  # DeBERTa-v3's layout
        return tf.DebertaV2Config(
            **TINY, pad_token_id=ids["pad_token_id"], vocab_size=ids["vocab_size"] + DEBERTA_SPARE_ROWS,
            max_position_embeddings=TINY_POSITIONS, type_vocab_size=0, relative_attention=True, position_buckets=16,
            max_relative_positions=-1, pos_att_type=["p2c", "c2p"], position_biased_input=False,
            norm_rel_ebd="layer_norm", share_att_key=True,
        )
    if family == "modernbert":
        return tf.ModernBertConfig(
            **TINY, **ids, max_position_embeddings=4 * TINY_POSITIONS, local_attention=16,
            global_attn_every_n_layers=2, cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
            bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id, reference_compile=False,
        )
    raise SettingError(f"no tiny model for family {family!r}; the families are {', '.join(FAMILIES)}")


def make_tiny_family(family: str, output_dir: Union[str, Path], texts: Optional[Iterable[str]] = None,
                     seed: int = 0) -> Path:
    """Write a tiny randomly initialised `*ForMaskedLM` of `family` (one of
    FAMILIES, transformers' model_type) and its fast tokenizer to `output_dir`."""
    import torch
    from transformers import AutoModelForMaskedLM

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    if family == "bert":
        return make_tiny_bert(output_dir, texts, seed=seed)
    tokenizer = _family_tokenizer(family, list(texts or SAMPLE_TEXT))
    config = _family_config(family, tokenizer)
    torch.manual_seed(seed)
    AutoModelForMaskedLM.from_config(config).save_pretrained(str(output_dir))
    tokenizer.model_max_length = TINY_POSITIONS if family != "modernbert" else config.max_position_embeddings
    tokenizer.save_pretrained(str(output_dir))
    return output_dir
