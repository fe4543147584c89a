"""The PyTorch transformer under the encoder: loading, building, freezing, saving.

Loading goes through transformers' Auto classes so BERT, RoBERTa, XLM-R,
DistilBERT (and any other encoder the library knows) work from a local
directory. Errors name the directory and what is wrong with it.
"""
import json
import logging
from pathlib import Path
from typing import Optional, Tuple, Union

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel

from ..errors import ModelLoadError
from ..util.io import atomic_directory, recover_directory

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model")
# A bare encoder loaded from a checkpoint saved with a task head (e.g. *ForMaskedLM)
# legitimately lacks the pooler; any other missing weight means foreign weights.
OPTIONAL_WEIGHT_PREFIXES = ("pooler.",)


def _check_model_dir(path: Path) -> None:
    if not path.exists():
        raise ModelLoadError(path, "no such directory (a local Hugging Face model directory is expected)")
    if not path.is_dir():
        raise ModelLoadError(path, "is a file; a Hugging Face model directory (config.json, weights, tokenizer) is expected")
    if not (path / "config.json").exists():
        raise ModelLoadError(path, "has no config.json: not a Hugging Face model directory")
    try:
        json.loads((path / "config.json").read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ModelLoadError(path / "config.json", f"is not valid JSON ({err})") from None


def load_tokenizer(path: PathLike):
    path = Path(path)
    if path.is_dir() and not any((path / name).exists() for name in TOKENIZER_FILES):
        raise ModelLoadError(path, f"has no tokenizer files (expected one of {', '.join(TOKENIZER_FILES)})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as err:  # transformers raises many kinds here
        raise ModelLoadError(path, f"cannot load a tokenizer ({type(err).__name__}: {err})") from None
    if not tokenizer.is_fast:
        raise ModelLoadError(path, "only a slow tokenizer is available; a fast tokenizer (tokenizer.json) is needed")
    return tokenizer


def load_backbone(path: PathLike, output_hidden_states: bool = False) -> Tuple[PreTrainedModel, object]:
    """The bare encoder (no task head) and its fast tokenizer from a local directory."""
    path = recover_directory(path)  # undo a save killed mid-replace
    _check_model_dir(path)
    if not any((path / name).exists() for name in WEIGHT_FILES):
        raise ModelLoadError(path, f"has no weights (expected one of {', '.join(WEIGHT_FILES)})")
    tokenizer = load_tokenizer(path)
    try:
        config = AutoConfig.from_pretrained(str(path), local_files_only=True)
        model, info = AutoModel.from_pretrained(
            str(path), config=config, local_files_only=True, output_loading_info=True
        )
    except Exception as err:
        raise ModelLoadError(path, f"cannot load the weights ({type(err).__name__}: {err})") from None
    # transformers only warns when the weights belong to another architecture and
    # initialises the rest randomly; a silently random encoder is worse than an error.
    missing = [key for key in info["missing_keys"] if not key.startswith(OPTIONAL_WEIGHT_PREFIXES)]
    if missing:
        raise ModelLoadError(
            path,
            f"the weights do not fit the '{config.model_type}' architecture of config.json: {len(missing)} of "
            f"{len(model.state_dict())} tensors are missing (e.g. {', '.join(missing[:3])})",
        )
    check_vocab(model, tokenizer, path)
    model.config.output_hidden_states = output_hidden_states
    return model, tokenizer


# RoBERTa-style models offset positions by the padding index.
ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")


def scratch_config(
    architecture: str,
    tokenizer,
    *,
    hidden_width: int,
    depth: int,
    n_heads: int,
    intermediate_width: int,
    max_positions: int,
    dropout: float,
    **extra,
):
    """The HF config of a from-scratch encoder that takes `max_positions` pieces
    (specials included) with `tokenizer`'s vocabulary; `extra` goes to the config."""
    offset = 2 if architecture in ROBERTA_LIKE else 0
    return AutoConfig.for_model(
        architecture,
        vocab_size=len(tokenizer),
        hidden_size=hidden_width,
        num_hidden_layers=depth,
        num_attention_heads=n_heads,
        intermediate_size=intermediate_width,
        max_position_embeddings=max_positions + offset,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        pad_token_id=tokenizer.pad_token_id,
        type_vocab_size=2,
        **extra,
    )


def build_scratch_backbone(
    tokenizer_path: PathLike,
    architecture: str,
    hidden_width: int,
    depth: int,
    n_heads: int,
    intermediate_width: int,
    max_positions: int,
    dropout: float,
    output_hidden_states: bool = False,
) -> Tuple[PreTrainedModel, object]:
    """A randomly initialised encoder sized for the given tokenizer."""
    tokenizer = load_tokenizer(tokenizer_path)
    config = scratch_config(
        architecture, tokenizer, hidden_width=hidden_width, depth=depth, n_heads=n_heads,
        intermediate_width=intermediate_width, max_positions=max_positions, dropout=dropout,
        output_hidden_states=output_hidden_states,
    )
    return AutoModel.from_config(config), tokenizer


def check_vocab(model: PreTrainedModel, tokenizer, path: PathLike) -> None:
    n_rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > n_rows:
        raise ModelLoadError(
            path,
            f"the tokenizer has {len(tokenizer)} entries but the embedding matrix only {n_rows} rows: "
            "tokenizer and weights do not belong together",
        )


def max_positions(model: PreTrainedModel, tokenizer) -> int:
    """Longest input the model can take, special tokens included."""
    config = model.config
    limit = getattr(config, "max_position_embeddings", None) or 512
    if getattr(config, "model_type", "") in ROBERTA_LIKE:
        limit -= config.pad_token_id + 1
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if tok_limit and tok_limit < 1_000_000:
        limit = min(limit, tok_limit)
    return int(limit)


def transformer_layers(model: PreTrainedModel) -> torch.nn.ModuleList:
    """The stack of transformer blocks, found structurally so any encoder family works."""
    candidates = [
        module
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and name.split(".")[-1] in ("layer", "layers", "block")
    ]
    if not candidates:
        raise ModelLoadError(getattr(model, "name_or_path", "?"), "cannot find the stack of transformer layers")
    return max(candidates, key=len)


def freeze_backbone(model: PreTrainedModel, trainable_layers: int) -> None:
    """-1: everything trains; 0: nothing does; k: only the last k transformer layers."""
    layers = transformer_layers(model)
    if trainable_layers < -1 or trainable_layers > len(layers):
        raise ValueError(f"trainable_layers must be -1 or between 0 and {len(layers)}, got {trainable_layers}")
    if trainable_layers == -1:
        for param in model.parameters():
            param.requires_grad_(True)
        return
    for param in model.parameters():
        param.requires_grad_(False)
    for layer in layers[len(layers) - trainable_layers :]:
        for param in layer.parameters():
            param.requires_grad_(True)


def save_backbone(model: PreTrainedModel, tokenizer, path: PathLike) -> None:
    """Write a plain HF directory (AutoModel/AutoTokenizer load it), atomically."""
    with atomic_directory(path) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))


def uses_token_type_ids(model: PreTrainedModel) -> bool:
    import inspect

    return "token_type_ids" in inspect.signature(model.forward).parameters and (
        getattr(model.config, "type_vocab_size", 0) or 0
    ) > 1
