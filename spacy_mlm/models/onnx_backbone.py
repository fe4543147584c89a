"""The encoder's transformer as an ONNX graph run by ONNX Runtime (CPU inference).

`export_backbone` traces the torch model with torch's TorchScript exporter
(opset 17, batch and sequence axes dynamic) into a graph whose inputs are the
ones `models/encoder.py` feeds the torch model (input_ids, attention_mask and,
for models that read them, token_type_ids) and whose outputs are the ones it
reads: the top layer, the pooled [CLS] row when the model has a pooler, and all
hidden states stacked when the encoder keeps every layer. `quantize_int8`
turns the graph's weight matrix products into dynamic int8 ones (int8 weights
per channel, activations quantized per batch), leaving chosen transformer layers
in fp32 when int8 costs too much accuracy there. `OnnxBackbone` runs a graph
with the call signature of a Hugging Face model, so the encoder's forward uses
either in the same way.

The graph is not passed through ONNX Runtime's offline transformer optimizer
(`onnxruntime.transformers.optimizer`): its fused Attention / QAttention
kernels ran slower than the unfused graph on MiniLM at one thread, at fp32 and
at int8 (docs/ARCHITECTURE.md, "Encoder speed"); the session's
own graph optimizations (ORT_ENABLE_ALL) still run when a graph loads, all but
the SkipLayerNormalization fusion (`DISABLED_FUSIONS`), slower here too.

A graph is data: ONNX Runtime runs only its own built-in operators on it (no
custom-op library is registered and nothing is unpickled), so a saved pipeline's
`.onnx` file cannot run code. The settings a graph was made with are stored in
its metadata, so a pipeline loaded under other settings re-exports instead of
silently running the wrong graph.

onnx and onnxruntime are the optional extra `spacy-mlm[onnx]`; without them
every entry point here raises a SpacyMlmError that says how to install them.
"""
import io
import json
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch

from ..errors import ModelLoadError, SpacyMlmError
from ..util.io import atomic_write_bytes
from ..util.logs import quiet_logger

ONNX_FILE = "backbone.onnx"
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
LAST, POOLED, LAYERS = "last_hidden_state", "pooler_output", "hidden_states"
# metadata_props key holding the settings the graph was exported with
SETTINGS_KEY = "spacy_mlm_settings"
# session graph optimizations left out: ONNX Runtime's fused SkipLayerNormalization kernel ran slower
# than the Add and LayerNormalization it replaces (bench/onnx_session.py, one thread: int8 MiniLM graphs
# 1.15-1.26x as fast without it with AVX-512, 1.06-1.12x with AVX2 only; fp32 graphs the same either way)
DISABLED_FUSIONS = ("SkipLayerNormFusion",)
# how graphs are made (exporter, quantized ops); a saved graph of another format
# is made again from the saved weights when the pipeline loads
GRAPH_FORMAT = 1


def require_onnxruntime():
    """The onnxruntime module, or a SpacyMlmError naming the extra to install."""
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as err:
        raise SpacyMlmError(
            f"the ONNX backend needs onnx and onnxruntime ({err}): pip install spacy-mlm[onnx]"
        ) from None
    return onnxruntime


@dataclass
class BackboneOutput:
    """What the encoder reads from a Hugging Face model's output, as torch tensors."""

    last_hidden_state: torch.Tensor
    pooler_output: Optional[torch.Tensor]
    hidden_states: Optional[Tuple[torch.Tensor, ...]]


class _ExportedOutputs(torch.nn.Module):
    """The HF model with positional inputs and a flat tuple of outputs, as the exporter needs."""

    def __init__(self, model: torch.nn.Module, type_ids: bool, pooled: bool, layers: bool):
        super().__init__()
        self.model = model
        self.type_ids, self.pooled, self.layers = type_ids, pooled, layers

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        extra = {"token_type_ids": token_type_ids} if self.type_ids else {}
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=self.layers, return_dict=True, **extra
        )
        outputs = [out.last_hidden_state]
        if self.pooled:
            outputs.append(out.pooler_output)
        if self.layers:
            outputs.append(torch.stack(out.hidden_states))
        return tuple(outputs)


def export_backbone(hf_model: torch.nn.Module, *, type_ids: bool, hidden_states: bool) -> bytes:
    """The fp32 ONNX graph of `hf_model` (evaluation mode; its own mode is restored)."""
    require_onnxruntime()
    pooled = getattr(hf_model, "pooler", None) is not None
    wrapper = _ExportedOutputs(hf_model, type_ids, pooled, hidden_states)
    inputs = list(INPUTS if type_ids else INPUTS[:2])
    outputs = [LAST] + ([POOLED] if pooled else []) + ([LAYERS] if hidden_states else [])
    axes: Dict[str, Dict[int, str]] = {name: {0: "batch", 1: "sequence"} for name in inputs + [LAST]}
    axes[POOLED] = {0: "batch"}
    axes[LAYERS] = {1: "batch", 2: "sequence"}
    device = next(hf_model.parameters()).device
    # two rows, one padded, so the traced graph takes the attention-mask path
    ids = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 0]], device=device)
    example = (ids, (ids != 0).long(), torch.zeros_like(ids))[: len(inputs)]
    was_training = hf_model.training
    wrapper.eval()
    buffer = io.BytesIO()
    try:
        # the exporter's deprecation notice and tracer warnings about constants
        # that are constant for every input (the mask's 1.0, the vocabulary size)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            torch.onnx.export(
                wrapper,
                example,
                buffer,
                input_names=inputs,
                output_names=outputs,
                dynamic_axes={name: axes[name] for name in inputs + outputs},
                opset_version=OPSET,
                dynamo=False,
            )
    except Exception as err:  # the exporter raises many kinds for what it cannot trace
        family = getattr(hf_model.config, "model_type", type(hf_model).__name__)
        raise SpacyMlmError(
            f"'{family}': {type(hf_model).__name__} cannot be exported to ONNX ({type(err).__name__}: {err}); "
            'run this encoder with backend = "torch"'
        ) from None
    finally:
        hf_model.train(was_training)
    return buffer.getvalue()


def layer_matmuls(graph: bytes, layers: Sequence[int], scopes: Sequence[str]) -> List[str]:
    """Names of the fp32 MatMul nodes of the given transformer layers (negative
    counts from the top, -1 = the last), from the exporter's module-path node
    names: `scopes` holds each layer's (`families.layer_scopes`: the nodes of
    BERT's layer 3 are `.../encoder/layer.3/attention/self/query/MatMul`, of
    ModernBERT's `.../layers.3/...`; ALBERT's layers share one scope, so one
    kept in fp32 keeps them all)."""
    import onnx

    n_layers = len(scopes)
    wanted = set()
    for layer in layers:
        index = layer + n_layers if layer < 0 else layer
        if not 0 <= index < n_layers:
            raise SpacyMlmError(f"fp32_layers: layer {layer} does not exist in a {n_layers}-layer encoder")
        wanted.add(scopes[index])
    nodes = onnx.load_from_string(graph).graph.node
    return [n.name for n in nodes if n.op_type == "MatMul" and any(w in n.name for w in wanted)]


def quantize_int8(graph: bytes, keep_fp32: Sequence[str] = ()) -> bytes:
    """Dynamic int8 quantization of the graph's MatMuls with a weight (per-channel
    int8 weights: per-tensor ones ran no faster and moved the piece vectors further
    from fp32's, docs/ARCHITECTURE.md), except the nodes named in `keep_fp32`."""
    require_onnxruntime()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp, quiet_logger("root"):
        source, target = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        source.write_bytes(graph)
        quantize_dynamic(
            source,
            target,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=list(keep_fp32),
        )
        return target.read_bytes()


def with_settings(graph: bytes, settings: Dict) -> bytes:
    """The graph with `settings` (JSON) stored in its metadata."""
    import onnx

    proto = onnx.load_from_string(graph)
    del proto.metadata_props[:]
    entry = proto.metadata_props.add()
    entry.key, entry.value = SETTINGS_KEY, json.dumps(settings, sort_keys=True)
    return proto.SerializeToString()


class OnnxBackbone:
    """An ONNX Runtime session over an exported graph, called like the HF model
    it came from. Runs on the CPU with as many intra-op threads as torch uses."""

    def __init__(self, graph: bytes, source: Union[str, Path] = "<exported graph>"):
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"],
                                                disabled_optimizers=list(DISABLED_FUSIONS))
        except Exception as err:  # ORT raises its own exception classes for bad graphs
            raise ModelLoadError(source, f"not a loadable ONNX graph ({type(err).__name__}: {err})") from None
        self.graph = graph
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        meta = self.session.get_modelmeta().custom_metadata_map
        self.settings: Optional[Dict] = json.loads(meta[SETTINGS_KEY]) if SETTINGS_KEY in meta else None

    @classmethod
    def load(cls, path: Union[str, Path]) -> "OnnxBackbone":
        return cls(Path(path).read_bytes(), path)

    def save(self, path: Union[str, Path]) -> None:
        atomic_write_bytes(path, self.graph)

    def __reduce__(self):
        """Pickled as its graph (an ONNX Runtime session cannot be): a new session on unpickling."""
        return (OnnxBackbone, (self.graph,))

    def __call__(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: Optional[torch.Tensor] = None,
        output_hidden_states: bool = False, return_dict: bool = True,
    ) -> BackboneOutput:
        given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        feed = {name: given[name].cpu().numpy() for name in self.inputs}
        if output_hidden_states and LAYERS not in self.outputs:
            raise SpacyMlmError("this ONNX graph was exported without the hidden states of every layer")
        wanted = [name for name in self.outputs if name != LAYERS or output_hidden_states]
        values = dict(zip(wanted, self.session.run(wanted, feed)))
        device = input_ids.device
        layers = None
        if output_hidden_states:
            layers = tuple(torch.from_numpy(values[LAYERS]).to(device).unbind(0))
        return BackboneOutput(
            last_hidden_state=torch.from_numpy(values[LAST]).to(device),
            pooler_output=torch.from_numpy(values[POOLED]).to(device) if POOLED in values else None,
            hidden_states=layers,
        )
