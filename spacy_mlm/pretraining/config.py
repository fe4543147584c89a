"""The pretraining config: a spaCy-style config file with a [pretraining] section.

User configs are filled from DEFAULT_CONFIG (so a config names only what it
changes), checked for unknown settings (typos fail loudly instead of being
ignored), then `--section.key value` overrides are applied as in `spacy train`.
"""
from pathlib import Path
from typing import Any, Dict, Optional, Union

from thinc.api import Config

from ..errors import SpacyMlmError
from ..util.settings import FLAG, INT, NUMBER, TEXT, check_setting, check_settings, one_of, read_config_file

DEFAULT_CONFIG = """
[paths]
train = null
dev = null
source = null

[pretraining]
# HF directory to continue pretraining from; null trains from scratch (see [pretraining.scratch])
source = ${paths.source}
seed = 0
max_length = 128
# sequences per optimizer step over all processes and accumulation steps
batch_size = 32
grad_accumulation_steps = 1
max_steps = 1000
# the first N steps train only the output heads (the MLM head, and NSP's), with the encoder and its
# embeddings frozen: a source without an MLM head (MiniLM, any AutoModel save) then does not
# train its encoder through a random head at the start (mlm only; 0 = off)
head_only_steps = 0
# seconds; 0 = no limit (a checkpoint is written when time runs out)
max_time = 0
eval_every = 100
eval_sequences = 256
checkpoint_every = 200
keep_checkpoints = 2
log_every = 10
# mlm: BERT's masked-LM; rtd: ELECTRA's replaced-token detection (see [pretraining.rtd])
objective = "mlm"
# BERT's next-sentence prediction (mlm only); off = RoBERTa-style packing across documents
next_sentence = false
# auto = cuda when available, else cpu
device = "auto"
# fp32, or bf16: forward passes under torch.autocast in bfloat16 (weights, optimizer and losses stay
# fp32); for CPUs with AMX and recent GPUs, slower than fp32 on other CPUs (docs/speed.md)
precision = "fp32"

[pretraining.corpus]
# a file or directory; for several languages use a section [pretraining.corpus.train] with lang = path lines
train = ${paths.train}
# null: hold out dev_fraction of the training documents
dev = ${paths.dev}
dev_fraction = 0.02
text_field = "text"
file_format = "auto"
# multilingual sampling exponent a in q_i = p_i^a / sum_j p_j^a
sampling_alpha = 0.3

[pretraining.masking]
rate = 0.15
mask_fraction = 0.8
random_fraction = 0.1
# unigram (corpus frequencies) or uniform
replacement = "unigram"
whole_word = false

[pretraining.rtd]
# objective = "rtd": the generator has this share of the discriminator's attention heads (and width)
generator_size = 0.25
# weight of the discriminator's loss against the generator's masked-LM loss (ELECTRA: 50)
discriminator_weight = 50.0
# shared: ELECTRA's (both losses train the token embeddings); disentangled: DeBERTaV3's (the
# discriminator reads them through a stop-gradient plus a difference of its own)
embedding_sharing = "shared"

[pretraining.optimizer]
learning_rate = 0.0001
weight_decay = 0.01
beta1 = 0.9
beta2 = 0.999
eps = 0.000001
warmup_steps = 100
max_grad_norm = 1.0

[pretraining.scratch]
# wordpiece | bpe | unigram
tokenizer = "wordpiece"
vocab_size = 8000
lowercase = true
architecture = "bert"
hidden_size = 256
num_layers = 4
num_heads = 4
intermediate_size = 1024
dropout = 0.1
"""

# settings whose value may be a section (a dict) instead of a single value
FREE_FORM = {("pretraining", "corpus", "train"), ("pretraining", "corpus", "dev")}


def _fill(user: Dict[str, Any], defaults: Dict[str, Any], where: tuple) -> Dict[str, Any]:
    for key in user:
        if key not in defaults:
            known = ", ".join(sorted(defaults))
            raise SpacyMlmError(f"unknown setting [{'.'.join(where)}] {key} (known: {known})")
    filled = {}
    for key, default in defaults.items():
        if key not in user:
            filled[key] = default
        elif isinstance(default, dict) and isinstance(user[key], dict) and where + (key,) not in FREE_FORM:
            filled[key] = _fill(user[key], default, where + (key,))
        else:
            filled[key] = user[key]
    return filled


def load_pretraining_config(
    path: Optional[Union[str, Path]] = None, overrides: Optional[Dict[str, Any]] = None
) -> Config:
    """The interpolated config: defaults <- the file at `path` <- `overrides`."""
    defaults = Config().from_str(DEFAULT_CONFIG, interpolate=False)
    user = Config() if path is None else read_config_file(path)
    filled = Config(_fill(dict(user), dict(defaults), ()))
    try:
        config = Config().from_str(filled.to_str(), overrides=overrides or {}, interpolate=True)
    except Exception as err:
        raise SpacyMlmError(f"invalid config or override: {err}") from None
    _fill(dict(config), dict(defaults), ())  # an override may have added an unknown key
    check_values(config)
    return config


OBJECTIVES = ("mlm", "rtd")
# how an RTD discriminator reads the token embeddings it shares with its generator
EMBEDDING_SHARING = ("shared", "disentangled")
PRECISIONS = ("fp32", "bf16")
# setting -> its kind and the bounds its value must keep
LIMITS = {
    "seed": (INT,), "max_length": (INT, ">= 4"), "batch_size": (INT, ">= 1"),
    "grad_accumulation_steps": (INT, ">= 1"), "max_steps": (INT, ">= 1"), "head_only_steps": (INT, ">= 0"),
    "max_time": (NUMBER, ">= 0"),
    "eval_every": (INT, ">= 0"), "eval_sequences": (INT, ">= 0"), "checkpoint_every": (INT, ">= 0"),
    "keep_checkpoints": (INT, ">= 0"), "log_every": (INT, ">= 1"), "objective": (TEXT,), "next_sentence": (FLAG,),
    "device": (TEXT,), "precision": (TEXT,),
    "corpus.dev_fraction": (NUMBER, "> 0", "< 1"), "corpus.text_field": (TEXT,), "corpus.file_format": (TEXT,),
    "corpus.sampling_alpha": (NUMBER, ">= 0"),
    "masking.rate": (NUMBER, "> 0", "< 1"), "masking.mask_fraction": (NUMBER, ">= 0", "<= 1"),
    "masking.random_fraction": (NUMBER, ">= 0", "<= 1"), "masking.replacement": (TEXT,), "masking.whole_word": (FLAG,),
    "rtd.generator_size": (NUMBER, "> 0", "<= 1"), "rtd.discriminator_weight": (NUMBER, "> 0"),
    "rtd.embedding_sharing": (TEXT,),
    "optimizer.learning_rate": (NUMBER, "> 0"), "optimizer.weight_decay": (NUMBER, ">= 0"),
    "optimizer.beta1": (NUMBER, ">= 0", "< 1"), "optimizer.beta2": (NUMBER, ">= 0", "< 1"),
    "optimizer.eps": (NUMBER, "> 0"), "optimizer.warmup_steps": (INT, ">= 0"), "optimizer.max_grad_norm": (NUMBER, "> 0"),
    "scratch.tokenizer": (TEXT,), "scratch.vocab_size": (INT, ">= 10"), "scratch.lowercase": (FLAG,),
    "scratch.architecture": (TEXT,), "scratch.hidden_size": (INT, ">= 1"), "scratch.num_layers": (INT, ">= 1"),
    "scratch.num_heads": (INT, ">= 1"), "scratch.intermediate_size": (INT, ">= 1"), "scratch.dropout": (NUMBER, ">= 0", "< 1"),
}

def check_values(config: Config) -> None:
    """Each [pretraining] setting of the right kind and in its range, with a
    SpacyMlmError naming the setting (a batch size of 0 or "x" would fail deep
    in the loop, a max_steps of -1 train nothing and save the model unchanged)."""
    section = config["pretraining"]
    for name, (kind, *bounds) in LIMITS.items():
        *parents, key = name.split(".")
        value = section
        for parent in parents:
            value = value[parent]
        value = value[key]
        check_setting(f"[pretraining{''.join('.' + p for p in parents)}]", key, value, kind, *bounds)
    check_settings("[pretraining]", objective=(section["objective"], one_of(*OBJECTIVES)),
                   precision=(section["precision"], one_of(*PRECISIONS)))
    check_setting("[pretraining.rtd]", "embedding_sharing", section["rtd"]["embedding_sharing"],
                  one_of(*EMBEDDING_SHARING))
    if section["objective"] == "rtd" and section["next_sentence"]:
        raise SpacyMlmError("[pretraining] next_sentence works with objective = \"mlm\" only (ELECTRA has no NSP)")
    if section["head_only_steps"] and section["objective"] != "mlm":
        raise SpacyMlmError("[pretraining] head_only_steps works with objective = \"mlm\" only (RTD has no MLM head)")
    if section["head_only_steps"] >= section["max_steps"]:
        raise SpacyMlmError(
            f"[pretraining] head_only_steps ({section['head_only_steps']}) must be below max_steps "
            f"({section['max_steps']}): the encoder would never train"
        )
    masking = section["masking"]
    if masking["mask_fraction"] + masking["random_fraction"] > 1:
        raise SpacyMlmError(
            "[pretraining.masking] mask_fraction + random_fraction must be at most 1 (the rest stays unchanged), "
            f"got {masking['mask_fraction']} + {masking['random_fraction']}"
        )
    scratch = section["scratch"]
    if not section["source"] and scratch["hidden_size"] % scratch["num_heads"]:
        raise SpacyMlmError(
            f"[pretraining.scratch] hidden_size {scratch['hidden_size']} is not a multiple of num_heads "
            f"{scratch['num_heads']}"
        )
