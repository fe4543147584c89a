"""Hugging Face models: loading, building, freezing, saving, limits.

The one module that touches transformers' Auto classes, for both kinds of model
the project uses: the bare encoder (`AutoModel`, under the `mlm_encoder`
component) and the encoder with its masked-LM head (`AutoModelForMaskedLM`, for
`pretrain` and `fill-mask`). Both go through the same checks, so a directory is
refused for the same reason in the same words whichever way it is loaded, and
each error names the directory or file:

* Local files only, and never code from the directory: every `from_pretrained`
  passes `local_files_only=True, trust_remote_code=False`, and a config.json or
  tokenizer_config.json with an `auto_map` (the model's own Python classes) is
  refused before transformers reads it, so it can neither run that code nor stop
  to ask whether it may.
* The weights must be the ones config.json describes. transformers initialises
  missing tensors randomly, drops surplus ones and skips ones of another shape,
  each with only a warning; a silently random encoder is worse than an error, so
  here each is a ModelLoadError. A different head count with the same hidden size
  cannot be caught: it leaves every weight shape the same.
* The tokenizer must fit the embedding matrix: more entries than rows is an
  error, fewer a warning giving both sizes (`check_vocab`).

Every model loaded or built here draws its dropout masks as 16-bit integers
(`dropout.py`: the same dropout, cheaper on CPUs).
"""
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer, PreTrainedModel

from ..errors import ModelLoadError, SpacyMlmError
from ..util.io import atomic_directory, recover_directory
from .dropout import use_int16_mask_dropout
from .families import family_layout, position_limit

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model")
# Where transformers looks for the name of a model's own classes (`auto_map`).
CODE_CONFIGS = ("config.json", "tokenizer_config.json")
# Every from_pretrained: nothing from the network, no code from the directory.
LOCAL_ONLY = {"local_files_only": True, "trust_remote_code": False}
# The one backbone part that may be absent: a bare encoder loaded from a
# *ForMaskedLM checkpoint lacks it, and a *ForMaskedLM model has none to load.
POOLER = "pooler"
# RoBERTa-style models offset positions by the padding index.
ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")


@dataclass
class MaskedLM:
    """A `*ForMaskedLM` model and its tokenizer, as loaded or built; for
    replaced-token detection the bare encoder that is its discriminator
    (`load_discriminator`, `build_scratch_discriminator`).

    head_initialised: the MLM head is fresh (a scratch model, or a directory
        without one, such as the packaged MiniLM saved as a bare BertModel), so
        its predictions are random until it is trained.
    pooler: the directory's pooler (the [CLS] dense+tanh layer) by its name in
        the model's state dict. *ForMaskedLM models have no pooler, so without
        this an encoder continued-pretrained from e.g. MiniLM would come back with
        a random one, and a head on the pooled output would lose the pretrained
        layer; `save_mlm_model` writes it back beside the model's own weights.
    """

    model: PreTrainedModel
    tokenizer: object
    head_initialised: bool
    pooler: Dict[str, torch.Tensor] = field(default_factory=dict)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ModelLoadError(path, f"is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ModelLoadError(path, f"should hold a JSON object, not {type(data).__name__}")
    return data


def _refuse_own_code(directory: Path) -> None:
    """A model or tokenizer that names its own classes needs its directory's
    Python code to load; that code is never run."""
    for name in CODE_CONFIGS:
        path = directory / name
        if path.is_file() and "auto_map" in (settings := _read_json(path)):
            classes = settings["auto_map"]
            names = ", ".join(classes) if isinstance(classes, dict) else str(classes)
            raise ModelLoadError(
                path,
                f"names classes defined by Python code in the model directory (auto_map: {names}); spacy-mlm never "
                "runs a model's own code: use a model of a family transformers itself provides",
            )


def _check_model_dir(path: PathLike) -> Path:
    """The directory, after finishing a save killed mid-replace, if it looks
    like a local HF model directory with weights."""
    path = recover_directory(path)
    if not path.exists():
        raise ModelLoadError(path, "no such directory (a local Hugging Face model directory is expected)")
    if not path.is_dir():
        raise ModelLoadError(path, "is a file; a Hugging Face model directory (config.json, weights, tokenizer) is expected")
    if not (path / "config.json").exists():
        raise ModelLoadError(path, "has no config.json: not a Hugging Face model directory")
    _read_json(path / "config.json")
    if not any((path / name).exists() for name in WEIGHT_FILES):
        raise ModelLoadError(path, f"has no weights (expected one of {', '.join(WEIGHT_FILES)})")
    return path


def load_tokenizer(path: PathLike):
    """The fast tokenizer of a local directory."""
    path = Path(path)
    if path.is_dir():
        if not any((path / name).exists() for name in TOKENIZER_FILES):
            raise ModelLoadError(path, f"has no tokenizer files (expected one of {', '.join(TOKENIZER_FILES)})")
        _refuse_own_code(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), **LOCAL_ONLY)
    except Exception as err:  # transformers raises many kinds here
        raise ModelLoadError(path, f"cannot load a tokenizer ({type(err).__name__}: {err})") from None
    if not tokenizer.is_fast:
        raise ModelLoadError(path, "only a slow tokenizer is available; a fast tokenizer (tokenizer.json) is needed")
    return tokenizer


def _backbone_parts(model: PreTrainedModel) -> set:
    """The top-level names of the backbone's state dict (embeddings, encoder, ...)."""
    return {name.split(".")[0] for name in model.base_model.state_dict()}


def _backbone_keys(model: PreTrainedModel, keys: Sequence[str]) -> List[str]:
    """The keys (as transformers reports them, with or without the backbone's
    prefix) that name a backbone tensor other than the pooler's; the others
    belong to task heads (BERT's `cls.*`, RoBERTa's `lm_head.*`, ...)."""
    prefix = model.base_model_prefix + "."
    parts = _backbone_parts(model) - {POOLER}
    return [key for key in keys if key.removeprefix(prefix).split(".")[0] in parts]


def _check_weights_fit(path: Path, model: PreTrainedModel, info: dict) -> None:
    model_type = model.config.model_type
    mismatched = info["mismatched_keys"]
    if mismatched:
        shapes = model.state_dict()
        example = mismatched[0]
        raise ModelLoadError(
            path,
            f"config.json does not match the weights: {len(mismatched)} tensors have another shape in the weights "
            f"than the '{model_type}' architecture of config.json gives them (e.g. {example}: "
            f"{tuple(shapes[example].shape)} by config.json); hidden_size, intermediate_size or vocab_size differ",
        )
    architecture = f"the '{model_type}' architecture of config.json"
    missing = _backbone_keys(model, info["missing_keys"])
    surplus = _backbone_keys(model, info["unexpected_keys"])
    for keys, problem in (
        (missing, f"the weights do not fit {architecture}: {len(missing)} of {len(model.state_dict())} tensors are "
                  "missing (e.g. {examples})"),
        (surplus, f"the weights hold {len(surplus)} encoder tensors that {architecture} has no place for (e.g. "
                  "{examples}): config.json describes a smaller model (fewer layers?) than the one saved"),
    ):
        if keys:
            raise ModelLoadError(path, problem.format(examples=", ".join(keys[:3])))


def check_vocab(model: PreTrainedModel, tokenizer, path: PathLike) -> None:
    """A tokenizer with more entries than the embedding matrix has rows would
    index past it: an error. One with fewer leaves rows that are never used,
    which is either padding for speed (`resize_token_embeddings(
    pad_to_multiple_of=...)`, Megatron's multiples of 128) or a vocabulary cut
    short or from another model: the two cannot be told apart, so it is a
    warning giving both sizes."""
    n_rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > n_rows:
        raise ModelLoadError(
            path,
            f"the tokenizer has {len(tokenizer)} entries but the embedding matrix only {n_rows} rows: "
            "tokenizer and weights do not belong together",
        )
    if len(tokenizer) < n_rows:
        logger.warning(
            "%s: the tokenizer has %d entries for an embedding matrix of %d rows, so %d rows are never used: "
            "padding for speed, or a vocabulary cut short or from another model",
            path, len(tokenizer), n_rows, n_rows - len(tokenizer),
        )


def _load(path: PathLike, auto_class, **config_options) -> Tuple[PreTrainedModel, object, dict, Path]:
    """(model, tokenizer, transformers' loading info, directory) of `auto_class`
    from a local directory, once every check above has passed."""
    from ..util.logs import quiet_logger

    path = _check_model_dir(path)
    tokenizer = load_tokenizer(path)  # first: it refuses a directory with code of its own
    try:
        config = AutoConfig.from_pretrained(str(path), **LOCAL_ONLY, **config_options)
        # ignore_mismatched_sizes=True only makes transformers list the tensors of
        # another shape instead of failing on the first without naming it; any
        # listed one is refused by _check_weights_fit.
        # transformers' "newly initialized ... You should probably TRAIN this model" is not said:
        # a missing pooler or head is handled (and logged) here, every other gap refused below
        with quiet_logger("transformers"):
            model, info = auto_class.from_pretrained(
                str(path), config=config, output_loading_info=True, ignore_mismatched_sizes=True, **LOCAL_ONLY
            )
    except Exception as err:  # transformers raises many kinds here
        raise ModelLoadError(path, f"cannot load the weights ({type(err).__name__}: {err})") from None
    _check_weights_fit(path, model, info)
    check_vocab(model, tokenizer, path)
    use_int16_mask_dropout(model)
    return model, tokenizer, info, path


def _is_pooler_key(name: str) -> bool:
    return f".{POOLER}." in f".{name}"


def load_backbone(path: PathLike, output_hidden_states: bool = False) -> Tuple[PreTrainedModel, object]:
    """The bare encoder (no task head) and its fast tokenizer from a local directory.

    A pooler that the weights do not hold (a *ForMaskedLM checkpoint saves none) is
    removed rather than left as transformers makes it, random: a head reading the
    model's pooled output (`pooling = "pooler"`) would otherwise take a random layer
    for a pretrained one, and a pipeline saved from it would reload with that random
    layer as if it were pretrained. Without it the model returns no pooled output."""
    model, tokenizer, info, path = _load(path, AutoModel, output_hidden_states=output_hidden_states)
    if getattr(model, POOLER, None) is not None and any(_is_pooler_key(k) for k in info["missing_keys"]):
        logger.info("%s: the weights hold no pooler; the encoder is loaded without one", path)
        setattr(model, POOLER, None)
    return model, tokenizer


def load_mlm_model(path: PathLike) -> MaskedLM:
    """The `*ForMaskedLM` model of a local directory, with its tokenizer and pooler.
    Where the directory has no MLM head, transformers initialises the head's
    transform from the torch seed and ties its decoder to the input embeddings."""
    model, tokenizer, info, path = _load(path, AutoModelForMaskedLM)
    if tokenizer.mask_token_id is None:
        raise ModelLoadError(path, "the tokenizer has no mask token, so it cannot be used for masked-LM training")
    head_initialised = bool(info["missing_keys"])  # _check_weights_fit let only head tensors be missing
    if head_initialised:
        logger.warning(
            "%s has no MLM head: its transform is initialised from scratch and its decoder "
            "is tied to the input embeddings ([pretraining] head_only_steps > 0 trains it alone first)",
            path,
        )
    return MaskedLM(model, tokenizer, head_initialised, _read_pooler(path, model))


def load_discriminator(path: PathLike) -> MaskedLM:
    """The bare encoder of a local directory (AutoModel, an MLM head in the
    weights ignored) to pretrain by replaced-token detection, with its pooler
    taken out and kept aside as `load_mlm_model` keeps it: nothing in pretraining
    trains a pooler, so it goes into the output unchanged (and DDP would refuse
    a parameter that never gets a gradient)."""
    model, tokenizer = load_backbone(path)
    if tokenizer.mask_token_id is None:
        raise ModelLoadError(path, "the tokenizer has no mask token, so its generator cannot be trained by masked-LM")
    pooler = {}
    if getattr(model, POOLER, None) is not None:
        pooler = {f"{POOLER}.{name}": tensor.detach().clone() for name, tensor in model.pooler.state_dict().items()}
        setattr(model, POOLER, None)
    return MaskedLM(model, tokenizer, head_initialised=False, pooler=pooler)


def _read_pooler(path: Path, model: PreTrainedModel) -> Dict[str, torch.Tensor]:
    """The pooler tensors of the directory's weights, named as in `model`'s state dict."""
    if (path / "model.safetensors").exists():
        from safetensors import safe_open

        with safe_open(str(path / "model.safetensors"), framework="pt") as weights:
            tensors = {name: weights.get_tensor(name) for name in weights.keys() if _is_pooler_key(name)}
    elif (path / "pytorch_model.bin").exists():
        state = torch.load(str(path / "pytorch_model.bin"), map_location="cpu", weights_only=True)
        tensors = {name: tensor for name, tensor in state.items() if _is_pooler_key(name)}
    else:  # sharded: whoever loads the output starts the pooler afresh
        logger.warning("%s: the pooler of a sharded checkpoint is not carried into the output", path)
        return {}
    prefix = model.base_model_prefix + "."
    return {(name if name.startswith(prefix) else prefix + name): tensor for name, tensor in tensors.items()}


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
    (specials included) with `tokenizer`'s vocabulary and special tokens; `extra`
    goes to the config."""
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
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        type_vocab_size=2,
        **extra,
    )


def _from_config(auto_class, config) -> PreTrainedModel:
    """A random model of `config`, with dropout as a loaded one has it."""
    model = auto_class.from_config(config)
    use_int16_mask_dropout(model)
    return model


def build_scratch_backbone(
    tokenizer_path: PathLike, architecture: str, *, output_hidden_states: bool = False, **sizes
) -> Tuple[PreTrainedModel, object]:
    """A randomly initialised encoder sized for the given tokenizer; `sizes` are
    `scratch_config`'s keywords."""
    tokenizer = load_tokenizer(tokenizer_path)
    config = scratch_config(architecture, tokenizer, output_hidden_states=output_hidden_states, **sizes)
    return _from_config(AutoModel, config), tokenizer


def build_scratch_mlm_model(tokenizer, architecture: str, **sizes) -> MaskedLM:
    """A randomly initialised `*ForMaskedLM` (decoder tied to the input
    embeddings) for `tokenizer`; `sizes` are `scratch_config`'s keywords."""
    model = _from_config(AutoModelForMaskedLM, scratch_config(architecture, tokenizer, **sizes))
    return MaskedLM(model, tokenizer, head_initialised=True)


def build_scratch_discriminator(tokenizer, architecture: str, **sizes) -> MaskedLM:
    """A randomly initialised bare encoder without a pooler (nothing would train
    it) for `tokenizer`: the discriminator of replaced-token detection from
    scratch; `sizes` are `scratch_config`'s keywords."""
    model = _from_config(AutoModel, scratch_config(architecture, tokenizer, **sizes))
    if getattr(model, POOLER, None) is not None:
        setattr(model, POOLER, None)
    return MaskedLM(model, tokenizer, head_initialised=False)


def max_positions(model: PreTrainedModel, tokenizer) -> int:
    """Longest input the model can take, special tokens included: its position
    table's (`families.position_limit`), or the tokenizer's if shorter."""
    limit = position_limit(model)
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if tok_limit and tok_limit < 1_000_000:
        limit = min(limit, tok_limit)
    return int(limit)


def freeze_backbone(model: PreTrainedModel, trainable_layers: int) -> None:
    """-1: everything trains; 0: nothing does; k: only the last k transformer
    layers as the model runs them (ALBERT's shared group trains if any of the
    last k layers runs it)."""
    layers = family_layout(model).layers
    if trainable_layers < -1 or trainable_layers > len(layers):
        raise SpacyMlmError(f"trainable_layers must be -1 or between 0 and {len(layers)}, got {trainable_layers}")
    if trainable_layers == -1:
        for param in model.parameters():
            param.requires_grad_(True)
        return
    for param in model.parameters():
        param.requires_grad_(False)
    for layer in layers[len(layers) - trainable_layers :]:
        for param in layer.parameters():
            param.requires_grad_(True)


def _save_directory(
    model: PreTrainedModel,
    tokenizer,
    path: PathLike,
    state_dict: Optional[Dict[str, torch.Tensor]] = None,
    extra: Sequence[Tuple[str, Dict[str, torch.Tensor]]] = (),
) -> None:
    from safetensors.torch import save_file

    with atomic_directory(path) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True, state_dict=state_dict)
        tokenizer.save_pretrained(str(tmp))
        for name, tensors in extra:
            save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(tmp / name))


def save_backbone(model: PreTrainedModel, tokenizer, path: PathLike) -> None:
    """Write a plain HF directory (AutoModel/AutoTokenizer load it), atomically."""
    _save_directory(model, tokenizer, path)


def save_mlm_model(
    mlm: MaskedLM, path: PathLike, extra: Sequence[Tuple[str, Dict[str, torch.Tensor]]] = ()
) -> None:
    """An HF directory (config, safetensors with the MLM head and the kept
    pooler, tokenizer), written atomically, that AutoModelForMaskedLM and AutoModel
    (spacy-transformers, our encoder) both load; AutoModel finds the pooler there.
    `extra`: (file name, tensor dict) pairs saved beside, e.g. the NSP head."""
    state = {**mlm.model.state_dict(), **mlm.pooler} if mlm.pooler else None
    _save_directory(mlm.model, mlm.tokenizer, path, state, extra)
