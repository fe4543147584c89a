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
    import torch
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizerFast

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(list(texts or SAMPLE_TEXT), vocab_size=400, special_tokens=specials)
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True, add_prefix_space=False)
    tokenizer = RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, model_max_length=62)
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=0,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    RobertaForMaskedLM(config).save_pretrained(str(output_dir))
    tokenizer.save_pretrained(str(output_dir))
    return output_dir


def make_tiny_distilbert(output_dir: Union[str, Path], texts: Optional[Iterable[str]] = None, seed: int = 0) -> Path:
    """A tiny DistilBERT (WordPiece, no segment embeddings)."""
    import torch
    from transformers import DistilBertConfig, DistilBertForMaskedLM, DistilBertTokenizerFast

    output_dir = Path(output_dir)
    bert_tok = train_wordpiece_tokenizer(texts or SAMPLE_TEXT, output_dir)
    tokenizer = DistilBertTokenizerFast(tokenizer_object=bert_tok.backend_tokenizer, model_max_length=64)
    config = DistilBertConfig(
        vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    DistilBertForMaskedLM(config).save_pretrained(str(output_dir))
    tokenizer.save_pretrained(str(output_dir))
    return output_dir
