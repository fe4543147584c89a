"""The encoder as a Thinc model.

`forward(model, docs, is_train)` tokenizes the docs, runs the transformer over
their windows grouped by length (little padding, few passes: see `batching.py`)
and returns an `EncoderBatch`: one tensor of piece vectors per doc (windows
merged) plus the [CLS] vectors and, for a model with a pretrained pooler, its
pooled output (dense + tanh over [CLS], what Hugging Face's sequence
classifiers read). With `backend = "onnx"` (HFEncoder.v2, ScratchEncoder.v2) an
ONNX Runtime graph of the transformer (`onnx_backbone.py`) replaces the torch
model at prediction; such an encoder is inference only. In training those
tensors are autograd leaves: listeners pool from them and accumulate gradients
into `.grad`; the backprop callback then pushes the accumulated gradient
through the transformer once.
"""
import contextlib
import functools
from typing import Callable, ContextManager, Dict, List, Optional, Sequence

import numpy as np
import torch
from spacy.attrs import IDX, LENGTH
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model

from ..errors import NotInitializedError, SpacyMlmError
from ..util.machine import cpu_bf16_is_faster, warn_slow_bf16
from ..util.settings import FLAG, INT, INTS, NUMBER, TEXT, check_settings
from ..tokenization.align import Alignment, align_texts
from ..tokenization.batching import length_batches, packed_rows
from .hf import (
    build_scratch_backbone,
    freeze_backbone,
    load_backbone,
    max_positions,
)
from .attention import plain_attention
from .window_packing import ROW_LENGTH, packing_verified, pass_inputs, pooled_rows, position_offset
from .families import DEFAULT_WINDOW, has_segments, layer_scopes, position_limit
from ..util.vectors import cosine_rows
from .encoding import DocEncoding, EncoderBatch
from .onnx_backbone import (
    GRAPH_FORMAT, OnnxBackbone, export_backbone, layer_matmuls, quantize_int8, with_settings,
)
from .row_adamw import use_sparse_word_gradients
from .torch_shim import TorchShim
from ..tokenization.tokenizer import DocPieces, PieceTokenizer


def to_doc_encodings(batch: EncoderBatch, tokenizer: PieceTokenizer) -> List[DocEncoding]:
    """One `DocEncoding` per doc of a prediction batch, its tensors left on the device."""
    return [
        DocEncoding(
            piece_ids=pieces.ids,
            piece_offsets=np.stack([pieces.starts, pieces.ends], axis=1),
            alignment=alignment,
            hidden_tensor=batch.hidden[i],
            cls_tensor=batch.cls[i],
            layers_tensor=None if batch.layers is None else batch.layers[i],
            pieces=tokenizer.piece_strings(pieces.ids),
            pooled_tensor=None if batch.pooled is None else batch.pooled[i],
        )
        for i, (pieces, alignment) in enumerate(zip(batch.pieces, batch.alignments))
    ]


BACKENDS = ("torch", "onnx")
# what each backend runs: torch fp32 or bf16 autocast, ONNX Runtime fp32 or dynamic int8
PRECISIONS = {"torch": ("fp32", "bf16"), "onnx": ("fp32", "int8")}


def _encoder_model(init: Callable, path: str, output_hidden_states: bool, max_batch_pieces: int, **options) -> Model:
    """The thinc encoder model; `init` loads or builds its transformer (see
    `_set_backbone`). Refuses a backend/precision pair that does not exist."""
    # plain_attention: a training pass on a CPU runs the family's plain attention (attention.py);
    # False keeps SDPA there. pack_row_length: a training pass packs windows into rows of about
    # that many pieces (window_packing.py); 0 keeps one window a row. (bench/train_step.py compares them.)
    attrs = {
        "backend": "torch", "precision": "fp32", "fp32_layers": [], "onnx": None, "plain_attention": True,
        "pack_row_length": ROW_LENGTH,
        **options, "path": path, "output_hidden_states": output_hidden_states, "max_batch_pieces": max_batch_pieces,
    }
    check_settings(
        "the mlm_encoder model's", path=(path, TEXT), window=(attrs["window"], INT, ">= 0"),
        overlap=(attrs["overlap"], INT, ">= 0"), trainable_layers=(attrs["trainable_layers"], INT, ">= -1"),
        output_hidden_states=(output_hidden_states, FLAG), max_batch_pieces=(max_batch_pieces, INT, ">= 1"),
        fp32_layers=(attrs["fp32_layers"], INTS),
    )
    backend, precision = attrs["backend"], attrs["precision"]
    if backend not in BACKENDS:
        raise SpacyMlmError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if precision not in PRECISIONS[backend]:
        raise SpacyMlmError(
            f"precision {precision!r} is not available with backend {backend!r} "
            f"(it offers {', '.join(PRECISIONS[backend])})"
        )
    if attrs["fp32_layers"] and precision != "int8":
        raise SpacyMlmError("fp32_layers applies to precision = \"int8\" only")
    return Model("mlm_encoder", forward, init=init, attrs={"tokenizer": None, **attrs}, shims=[], dims={"nO": None})


@registry.architectures("spacy_mlm.HFEncoder.v2")
def build_hf_encoder_v2(
    path: str,
    window: int = 0,
    overlap: int = 128,
    trainable_layers: int = -1,
    output_hidden_states: bool = False,
    max_batch_pieces: int = 16384,
    backend: str = "torch",
    precision: str = "fp32",
    fp32_layers: Sequence[int] = (),
) -> Model[List[Doc], EncoderBatch]:
    """An encoder loaded from a local Hugging Face directory (BERT, RoBERTa, XLM-R,
    DistilBERT...), run by torch or, for CPU inference, by ONNX Runtime.

    window: pieces per window, specials included; 0 = the model's maximum, at most 512
        (a long-context model such as ModernBERT is read in windows of 512 unless set).
    overlap: pieces shared by consecutive windows of a long document.
    trainable_layers: -1 all train, 0 frozen, k = only the last k layers.
    output_hidden_states: also keep every layer's output on `doc._.mlm_encoding.layers`.
    max_batch_pieces: padded pieces per forward pass (memory bound).
    backend: "torch" runs the Hugging Face model; "onnx" runs an ONNX Runtime graph
        of it on the CPU, exported in `nlp.initialize()` (or `spacy_mlm optimize`)
        and saved with the pipeline (needs `pip install spacy-mlm[onnx]`). An "onnx"
        encoder is inference only: train with "torch", then optimize.
    precision: "fp32"; "bf16" (torch: matmuls in bfloat16 under torch.autocast,
        weights and outputs float32, faster on CPUs with AMX and on recent GPUs,
        slower than fp32 on other CPUs: docs/speed.md); "int8" (onnx: dynamic int8 matmuls, faster on CPUs, at an
        accuracy cost to measure: bench/inference_speed.py, docs/benchmarks.md).
    fp32_layers: with int8, transformer layers whose matmuls stay fp32 (-1 = the last)."""

    options = dict(
        window=window, overlap=overlap, trainable_layers=trainable_layers,
        backend=backend, precision=precision, fp32_layers=list(fp32_layers),
    )
    load = functools.partial(_load_pretrained, path, output_hidden_states)
    return _encoder_model(load, path, output_hidden_states, max_batch_pieces, **options)


def _load_pretrained(path: str, output_hidden_states: bool, model: Model, X=None, Y=None) -> None:
    """HFEncoder's init: load the transformer. A module-level function under
    functools.partial, not a closure, so that a pipeline pickles."""
    _set_backbone(model, *load_backbone(path, output_hidden_states=output_hidden_states))
    set_inference_graph(model, None)


@registry.architectures("spacy_mlm.ScratchEncoder.v2")
def build_scratch_encoder_v2(
    tokenizer_path: str,
    architecture: str = "bert",
    hidden_width: int = 256,
    depth: int = 4,
    n_heads: int = 4,
    intermediate_width: int = 1024,
    max_positions: int = 512,
    dropout: float = 0.1,
    window: int = 0,
    overlap: int = 128,
    trainable_layers: int = -1,
    output_hidden_states: bool = False,
    max_batch_pieces: int = 16384,
    backend: str = "torch",
    precision: str = "fp32",
    fp32_layers: Sequence[int] = (),
) -> Model[List[Doc], EncoderBatch]:
    """A randomly initialised encoder of the given size, for training from scratch;
    `tokenizer_path` is a directory with a fast tokenizer (see `spacy_mlm pretrain`).
    The other settings are HFEncoder.v2's; with backend = "onnx" the graph is
    exported from the weights a saved pipeline loads (random ones in `initialize`)."""
    check_settings(
        "spacy_mlm.ScratchEncoder", architecture=(architecture, TEXT), hidden_width=(hidden_width, INT, ">= 1"),
        depth=(depth, INT, ">= 1"), n_heads=(n_heads, INT, ">= 1"), intermediate_width=(intermediate_width, INT, ">= 1"),
        max_positions=(max_positions, INT, ">= 8"), dropout=(dropout, NUMBER, ">= 0", "< 1"),
    )

    options = dict(
        window=window, overlap=overlap, trainable_layers=trainable_layers,
        backend=backend, precision=precision, fp32_layers=list(fp32_layers),
    )
    sizes = dict(hidden_width=hidden_width, depth=depth, n_heads=n_heads, intermediate_width=intermediate_width,
                 max_positions=max_positions, dropout=dropout)
    build = functools.partial(_build_scratch, tokenizer_path, architecture, sizes, output_hidden_states)
    return _encoder_model(build, tokenizer_path, output_hidden_states, max_batch_pieces, **options)


def _build_scratch(tokenizer_path: str, architecture: str, sizes: dict, output_hidden_states: bool, model: Model,
                   X=None, Y=None) -> None:
    """ScratchEncoder's init: a random transformer of `sizes` (scratch_config's
    keywords); a partial, not a closure, so that a pipeline pickles."""
    backbone = build_scratch_backbone(tokenizer_path, architecture, output_hidden_states=output_hidden_states, **sizes)
    _set_backbone(model, *backbone)
    set_inference_graph(model, None)


def _set_backbone(model: Model, hf_model, hf_tokenizer) -> None:
    """Install a loaded transformer + tokenizer into the Thinc model."""
    hf_model.config.output_hidden_states = model.attrs["output_hidden_states"]
    freeze_backbone(hf_model, model.attrs["trainable_layers"])
    use_sparse_word_gradients(hf_model)  # word-embedding rows stepped as used (row_adamw.py)
    limit = max_positions(hf_model, hf_tokenizer)
    window = model.attrs["window"] or min(limit, DEFAULT_WINDOW)
    model.attrs["tokenizer"] = PieceTokenizer(hf_tokenizer, min(window, limit), model.attrs["overlap"])
    model.attrs["type_ids"] = has_segments(hf_model)
    model.shims[:] = [TorchShim(hf_model)]
    model.set_dim("nO", int(hf_model.config.hidden_size), force=True)


def graph_settings(model: Model) -> Dict:
    """What an ONNX graph for this encoder must have been made with."""
    return {
        "format": GRAPH_FORMAT,
        "precision": model.attrs["precision"],
        "fp32_layers": model.attrs["fp32_layers"],
        "output_hidden_states": model.attrs["output_hidden_states"],
    }


def set_inference_graph(model: Model, saved: Optional[OnnxBackbone]) -> None:
    """For backend "onnx", the graph that runs at prediction: `saved` (from a
    saved pipeline) when it was made with this encoder's settings, otherwise one
    exported (and quantized) from the torch model now."""
    if model.attrs["backend"] != "onnx":
        model.attrs["onnx"] = None
        return
    settings = graph_settings(model)
    if saved is not None and saved.settings == settings:
        model.attrs["onnx"] = saved
        return
    graph = _fp32_graph(model)
    if settings["precision"] == "int8":
        graph = _int8_graph(model, graph, settings["fp32_layers"])
    model.attrs["onnx"] = OnnxBackbone(with_settings(graph, settings))


def _fp32_graph(model: Model) -> bytes:
    return export_backbone(
        get_hf_model(model), type_ids=model.attrs["type_ids"], hidden_states=model.attrs["output_hidden_states"]
    )


def _int8_graph(model: Model, fp32: bytes, fp32_layers: Sequence[int]) -> bytes:
    return quantize_int8(fp32, layer_matmuls(fp32, fp32_layers, layer_scopes(get_hf_model(model))))


def choose_fp32_layers(model: Model, docs: Sequence[Doc], min_cosine: float, keep: Sequence[int] = ()) -> List[int]:
    """The transformer layers an int8 graph of this encoder keeps in fp32 so that
    its piece vectors on `docs` stay at a mean cosine of at least `min_cosine` to
    the torch fp32 ones: `keep` first, then layers by how much keeping each one
    alone in fp32 raises the cosine, until it is reached (all layers at worst).
    Dynamic int8 hurts some layers far more than others (outlier activations), so
    a few chosen layers recover most of the accuracy at little speed. The model
    is left as it was."""
    saved = {key: model.attrs[key] for key in ("onnx", "precision", "backend")}
    n_layers = int(get_hf_model(model).config.num_hidden_layers)
    try:
        model.attrs.update(onnx=None, precision="fp32", backend="torch")
        reference = _piece_vectors(model, docs)
        fp32 = _fp32_graph(model)

        def cosine(layers: Sequence[int]) -> float:
            model.attrs["onnx"] = OnnxBackbone(_int8_graph(model, fp32, layers))
            return float(np.mean(cosine_rows(_piece_vectors(model, docs), reference))) if len(reference) else 1.0

        chosen = sorted({layer % n_layers for layer in keep})
        if cosine(chosen) >= min_cosine:
            return chosen
        rest = [layer for layer in range(n_layers) if layer not in chosen]
        gains = {layer: cosine(chosen + [layer]) for layer in rest}
        for layer in sorted(rest, key=gains.get, reverse=True):
            chosen = sorted(chosen + [layer])
            if cosine(chosen) >= min_cosine:
                break
        return chosen
    finally:
        model.attrs.update(saved)


def _piece_vectors(model: Model, docs: Sequence[Doc]) -> np.ndarray:
    batch, _ = forward(model, docs, False)
    return torch.cat(batch.hidden).float().cpu().numpy() if batch.hidden else np.zeros((0, model.get_dim("nO")))


def n_hidden_states(model: Model) -> int:
    """The loaded transformer's hidden states: the embeddings and every layer."""
    return int(get_hf_model(model).config.num_hidden_layers) + 1


def get_hf_model(model: Model):
    if not model.shims:
        raise NotInitializedError(
            "the encoder has no weights yet: call nlp.initialize() (or load a saved pipeline) first"
        )
    return model.shims[0].module


def forward(model: Model, docs: Sequence[Doc], is_train: bool):
    if is_train and model.attrs["backend"] != "torch":
        raise SpacyMlmError(
            f"this encoder runs an exported ONNX graph (backend = \"{model.attrs['backend']}\", precision = "
            f"\"{model.attrs['precision']}\") and is inference only: train with backend = \"torch\" and "
            "export the trained pipeline"
        )
    hf_model = get_hf_model(model)
    tokenizer: PieceTokenizer = model.attrs["tokenizer"]
    docs = list(docs)
    pieces = tokenizer(docs)
    alignments = _align(docs, pieces)
    trains = is_train and any(p.requires_grad for p in hf_model.parameters())
    hf_model.train(is_train)
    keep_layers = model.attrs["output_hidden_states"] and not is_train
    # inference_mode is fastest but its tensors can't become autograd leaves.
    context = torch.enable_grad() if trains else torch.no_grad() if is_train else torch.inference_mode()
    attention = _training_attention(model, hf_model)
    row_length = model.attrs["pack_row_length"]
    packed = is_train and row_length > 0 and not keep_layers and packing_verified(hf_model)
    with context:
        window_rows, window_layers, window_pooled = _run(model, hf_model, pieces, keep_layers, attention,
                                                         row_length if packed else 0)
    hidden, cls, layers, pooled = _unpack(pieces, window_rows, window_layers, window_pooled)
    if not is_train:
        return EncoderBatch(docs, pieces, alignments, hidden, cls, layers, pooled), _no_backprop
    # Leaves for the listeners; gradients accumulate in their .grad.
    flat = torch.cat(hidden) if hidden else window_rows[:0]
    flat_leaf = flat.detach().requires_grad_(True)
    cls_leaf = cls.detach().requires_grad_(True)
    pooled_leaf = None if pooled is None else pooled.detach().requires_grad_(True)
    sizes = [len(h) for h in hidden]
    leaves = (flat_leaf, cls_leaf) if pooled_leaf is None else (flat_leaf, cls_leaf, pooled_leaf)
    batch = EncoderBatch(
        docs, pieces, alignments, list(torch.split(flat_leaf, sizes)), cls_leaf, pooled=pooled_leaf, leaves=leaves
    )

    def backprop(_: EncoderBatch) -> List[Doc]:
        if trains:
            grads = [g if g is not None else torch.zeros_like(t) for t, g in ((flat_leaf, flat_leaf.grad), (cls_leaf, cls_leaf.grad))]
            outputs = [flat, cls]
            if pooled_leaf is not None and pooled_leaf.grad is not None:  # only a "pooler" listener reads it
                outputs.append(pooled)
                grads.append(pooled_leaf.grad)
            with attention():  # a layer that gradient checkpointing runs again runs as in the forward pass
                torch.autograd.backward(outputs, grads)
        return []

    return batch, backprop


def _no_backprop(_):
    return []


def _align(docs: Sequence[Doc], pieces: Sequence[DocPieces]) -> List[Alignment]:
    # to_array, not a loop over Token objects: a third of the time on 100k-token docs
    bounds = [doc.to_array([IDX, LENGTH]).astype(np.int64).reshape(-1, 2) for doc in docs]
    return align_texts([(b[:, 0], b[:, 0] + b[:, 1]) for b in bounds], [(p.starts, p.ends) for p in pieces])


def _training_attention(model: Model, hf_model) -> Callable[[], ContextManager]:
    """The attention a pass runs in, as a context to enter: training on a CPU,
    the family's plain attention, whose dropout is cheaper there (attention.py).
    Entered for the backward pass too: under gradient checkpointing backward
    runs layers again, which must run the class of the forward pass (SDPA
    there would draw other dropout masks: other gradients, or a
    `CheckpointError` for the tensors it saves otherwise)."""
    device = next(hf_model.parameters()).device
    if model.attrs["plain_attention"] and hf_model.training and device.type == "cpu":
        return functools.partial(plain_attention, hf_model)
    return contextlib.nullcontext


def _run(model: Model, hf_model, pieces: List[DocPieces], keep_layers: bool,
         attention: Callable[[], ContextManager], row_length: int = 0):
    """Run every window (within `attention`); return all non-padding rows
    in window order, the layers' rows likewise (or None) and one pooled row
    per window (None for a model without a pooler). `row_length` > 0: windows
    share rows of about that many pieces (`window_packing.py`), as training passes do
    where verified; 0: one window a row."""
    windows = [w for p in pieces for w in p.windows]
    lengths = np.array([len(w.input_ids) for w in windows], dtype=np.int64)
    budget = model.attrs["max_batch_pieces"]
    device = next(hf_model.parameters()).device
    pad_id = model.attrs["tokenizer"].hf.pad_token_id or 0
    backbone = model.attrs["onnx"] or hf_model
    bf16 = model.attrs["precision"] == "bf16"
    if bf16 and device.type == "cpu" and not cpu_bf16_is_faster():
        warn_slow_bf16('precision = "bf16" set: use precision = "fp32", or backend = "onnx" with precision = "int8"')
    packed = row_length > 0
    if packed:
        # no row longer than the position table: some families size buffers by it (RoBERTa's type ids)
        rows = packed_rows(lengths, row_length, position_limit(hf_model))
        loads = np.array([lengths[row].sum() for row in rows], dtype=np.int64)
        passes = [[rows[r] for r in chunk] for chunk in length_batches(loads, budget)]
    else:
        passes = [[[w] for w in chunk] for chunk in length_batches(lengths, budget)]
    offset = position_offset(hf_model) if packed else 0
    rows_by_window: List[torch.Tensor] = [None] * len(windows)  # type: ignore
    layers_by_window: List[torch.Tensor] = [None] * len(windows)  # type: ignore
    pooled_by_window: List[torch.Tensor] = [None] * len(windows)  # type: ignore
    # One autocast region for all the passes, not one per pass: autocast keeps its bfloat16 copy
    # of each trained weight until the region ends, so a step casts every weight once (and its
    # backward casts each weight's gradient, summed over the passes, back once) however many
    # length-batches it runs; per pass, the casts cost as much as the bf16 matmuls save.
    with attention(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        for rows in passes:
            arrays, places = pass_inputs(rows, windows, lengths, pad_id, packed=packed, offset=offset)
            if not model.attrs["type_ids"]:
                del arrays["token_type_ids"]
            inputs = {name: torch.from_numpy(value).to(device) for name, value in arrays.items()}
            out = backbone(**inputs, output_hidden_states=keep_layers, return_dict=True)
            last = out.last_hidden_state.float()
            pooler_output = getattr(out, "pooler_output", None)
            for w, (row, start) in places.items():
                rows_by_window[w] = last[row, start : start + lengths[w]]
                if pooler_output is not None and not packed:
                    pooled_by_window[w] = pooler_output[row].float()
                if keep_layers:
                    layers_by_window[w] = torch.stack([h[row, : lengths[w]].float() for h in out.hidden_states])
            if pooler_output is not None and packed:
                firsts = torch.stack([out.last_hidden_state[row, start] for row, start in places.values()])
                for w, pooled in zip(places, pooled_rows(hf_model, firsts)):
                    pooled_by_window[w] = pooled.float()
    width = int(hf_model.config.hidden_size)
    window_rows = torch.cat(rows_by_window) if windows else torch.zeros((0, width), device=device)
    window_layers = torch.cat(layers_by_window, dim=1) if keep_layers and windows else None
    has_pooler = getattr(hf_model, "pooler", None) is not None
    window_pooled = (torch.stack(pooled_by_window) if windows else window_rows.new_zeros((0, width))) if has_pooler else None
    return window_rows, window_layers, window_pooled


def _unpack(
    pieces: List[DocPieces], window_rows: torch.Tensor, window_layers: Optional[torch.Tensor],
    window_pooled: Optional[torch.Tensor],
):
    """Per-doc piece rows (each from its owner window), first-window [CLS] rows,
    per-doc layers (or None) and first-window pooled rows (or None)."""
    window_offsets = []
    offset = 0
    for p in pieces:
        starts = []
        for w in p.windows:
            starts.append(offset)
            offset += len(w.input_ids)
        window_offsets.append(np.asarray(starts, dtype=np.int64))
    gather = [offs[p.owner] + p.owner_position for p, offs in zip(pieces, window_offsets)]
    sizes = [len(g) for g in gather]
    index = torch.from_numpy(np.concatenate(gather) if gather else np.zeros(0, np.int64)).to(window_rows.device)
    # index_select: on a CPU a fraction of the time of indexing with a tensor
    hidden = list(torch.split(window_rows.index_select(0, index), sizes))
    cls_index = torch.from_numpy(np.asarray([offs[0] for offs in window_offsets], dtype=np.int64)).to(window_rows.device)
    cls = window_rows.index_select(0, cls_index)
    layers = None
    if window_layers is not None:
        layers = list(torch.split(window_layers.index_select(1, index), sizes, dim=1))
    pooled = None
    if window_pooled is not None:
        first_windows = np.cumsum([0] + [len(p.windows) for p in pieces[:-1]]) if pieces else np.zeros(0)
        pooled = window_pooled[torch.from_numpy(first_windows.astype(np.int64)).to(window_rows.device)]
    return hidden, cls, layers, pooled
