"""Getting a `*ForMaskedLM` model to pretrain, and writing the result.

Continued pretraining starts from any local HF encoder directory. Where the
directory has no MLM head (sentence-embedding models such as the packaged
MiniLM are saved as bare `BertModel`s), transformers initialises the head's
transform from scratch and ties its decoder to the input embeddings; we also
start the output bias at the corpus log-frequencies, so the first predictions
are the unigram distribution rather than noise, and say so in the log.
"""
import logging
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForMaskedLM, PreTrainedModel

from ..models.hf import ROBERTA_LIKE, WEIGHT_FILES, _check_model_dir, check_vocab, load_tokenizer, scratch_config
from ..errors import ModelLoadError
from ..util.io import atomic_directory
from .objectives import find_mlm_head

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


def load_mlm_model(path: PathLike) -> Tuple[PreTrainedModel, object, bool]:
    """(model, fast tokenizer, head_was_initialised) from a local HF directory."""
    path = Path(path)
    _check_model_dir(path)
    if not any((path / name).exists() for name in WEIGHT_FILES):
        raise ModelLoadError(path, f"has no weights (expected one of {', '.join(WEIGHT_FILES)})")
    tokenizer = load_tokenizer(path)
    if tokenizer.mask_token_id is None:
        raise ModelLoadError(path, "the tokenizer has no mask token, so it cannot be used for masked-LM training")
    try:
        config = AutoConfig.from_pretrained(str(path), local_files_only=True)
        model, info = AutoModelForMaskedLM.from_pretrained(
            str(path), config=config, local_files_only=True, output_loading_info=True
        )
    except Exception as err:  # transformers raises many kinds here
        raise ModelLoadError(path, f"cannot load as a masked-LM model ({type(err).__name__}: {err})") from None
    check_vocab(model, tokenizer, path)
    head = find_mlm_head(model)
    head_prefix = next(name for name, module in model.named_children() if module is head) + "."
    missing = [key for key in info["missing_keys"] if not key.startswith(head_prefix)]
    if missing:
        raise ModelLoadError(path, f"weights do not match the {config.model_type} architecture; missing {missing[:5]}")
    model.kept_pooler = _read_pooler(path, model)
    head_missing = bool(info["missing_keys"])
    if head_missing:
        logger.warning(
            "%s has no MLM head: its transform is initialised from scratch and its decoder "
            "is tied to the input embeddings; it is trained with the rest",
            path,
        )
    return model, tokenizer, head_missing


def _read_pooler(path: Path, model: PreTrainedModel) -> Dict[str, torch.Tensor]:
    """The source's pooler (the [CLS] dense+tanh layer) by its name in a
    *ForMaskedLM checkpoint. The MLM model has no pooler, so without this an
    encoder continued-pretrained from e.g. MiniLM would come back with a random
    one, and any head on the pooled output would lose the pretrained layer."""

    def is_pooler(name: str) -> bool:
        return ".pooler." in f".{name}"

    if (path / "model.safetensors").exists():
        from safetensors import safe_open

        with safe_open(str(path / "model.safetensors"), framework="pt") as weights:
            tensors = {name: weights.get_tensor(name) for name in weights.keys() if is_pooler(name)}
    elif (path / "pytorch_model.bin").exists():
        state = torch.load(str(path / "pytorch_model.bin"), map_location="cpu", weights_only=True)
        tensors = {name: tensor for name, tensor in state.items() if is_pooler(name)}
    else:  # sharded: whoever loads the output starts the pooler afresh
        logger.warning("%s: the pooler of a sharded checkpoint is not carried into the output", path)
        return {}
    prefix = model.base_model_prefix + "."
    return {(name if name.startswith(prefix) else prefix + name): tensor for name, tensor in tensors.items()}


def save_mlm_weights(model: PreTrainedModel, directory: PathLike) -> None:
    """`save_pretrained` (safetensors) with the pooler kept from the source added to
    the weights, so that AutoModel finds the source's pooler (AutoModelForMaskedLM ignores it)."""
    kept = getattr(model, "kept_pooler", None)
    state = {**model.state_dict(), **kept} if kept else None
    model.save_pretrained(str(directory), safe_serialization=True, state_dict=state)


def set_output_bias(model: PreTrainedModel, unigram_probs: np.ndarray) -> None:
    """Start the decoder bias at log p(token) (smoothed), i.e. predict the unigram prior."""
    bias = model.get_output_embeddings().bias
    if bias is None:
        return
    probs = np.asarray(unigram_probs, dtype=np.float64)[: bias.shape[0]]
    smoothed = (probs + 1e-3 / len(probs)) / (1 + 1e-3)
    with torch.no_grad():
        bias[: len(probs)] = torch.from_numpy(np.log(smoothed)).to(bias.dtype)
        bias[: len(probs)] -= bias[: len(probs)].mean()


def build_scratch_mlm_model(
    tokenizer,
    architecture: str = "bert",
    hidden_size: int = 256,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_size: int = 1024,
    max_length: int = 128,
    dropout: float = 0.1,
) -> PreTrainedModel:
    """A randomly initialised `*ForMaskedLM` sized for `tokenizer` (decoder tied)."""
    config = scratch_config(
        architecture, tokenizer, hidden_width=hidden_size, depth=num_layers, n_heads=num_heads,
        intermediate_width=intermediate_size, max_positions=max_length, dropout=dropout,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id, tie_word_embeddings=True,
    )
    return AutoModelForMaskedLM.from_config(config)


def model_max_length(model: PreTrainedModel) -> int:
    limit = model.config.max_position_embeddings
    if model.config.model_type in ROBERTA_LIKE:
        limit -= model.config.pad_token_id + 1
    return int(limit)


def save_mlm_model(
    model: PreTrainedModel, tokenizer, path: PathLike, extra: Optional[Sequence[Tuple[str, dict]]] = None
) -> None:
    """An HF directory (config, safetensors with the MLM head, tokenizer) that
    AutoModelForMaskedLM, AutoModel (spacy-transformers, our encoder) all load.
    `extra`: (file name, tensor dict) pairs saved beside, e.g. the NSP head."""
    from safetensors.torch import save_file

    with atomic_directory(path) as tmp:
        save_mlm_weights(model, tmp)
        tokenizer.save_pretrained(str(tmp))
        for name, tensors in extra or ():
            save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(tmp / name))
