"""The shared masked-LM encoder as a spaCy pipeline component ("mlm_encoder").

Like spaCy's `tok2vec`, it runs once per batch and hands its output to the
components listening to it (see `models/listener.py`), so several heads
fine-tune one transformer. It sets `doc._.mlm_encoding` at prediction time.
"""
from typing import Callable, Dict, Iterable, List, Optional

import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_get_examples
from spacy.util import ensure_path
from thinc.api import Config, Model, Optimizer

from ..models.hf import load_backbone, save_backbone
from ..models.listener import EncoderListener
from ..models.onnx_backbone import ONNX_FILE, OnnxBackbone
from ..models.encoder import _set_backbone, get_hf_model, n_hidden_states, set_inference_graph, to_doc_encodings
from ..models.encoding import ENCODING_ATTR, STORE_ENCODINGS, DocEncoding, install_encoding_extension
from ..errors import ModelLoadError
from ..tokenization.context import check_context, install_context_extension
from ..tokenization.pair import PAIR_READINGS, install_pair_extension
from ..util.io import atomic_write_text, directory_from_bytes, directory_to_bytes
from ..util.save import check_saved_cfg
from ..util.settings import check_settings, one_of

FORMAT_VERSION = 1

DEFAULT_ENCODER_MODEL = """
[model]
@architectures = "spacy_mlm.HFEncoder.v2"
path = null
window = 0
overlap = 128
trainable_layers = -1
output_hidden_states = false
max_batch_pieces = 16384
backend = "torch"
precision = "fp32"
fp32_layers = []
"""
DEFAULT_ENCODER_CONFIG = Config().from_str(DEFAULT_ENCODER_MODEL)


@Language.factory(
    "mlm_encoder",
    assigns=[f"doc._.{ENCODING_ATTR}"],
    default_config={
        "model": DEFAULT_ENCODER_CONFIG["model"], "context": "none", "context_pieces": 64, "store_encoding": "host",
        "pairs": "joint",
    },
)
def make_mlm_encoder(nlp: Language, name: str, model: Model, context: str, context_pieces: int,
                     store_encoding: str, pairs: str) -> "MLMEncoder":
    """A transformer encoder (BERT, RoBERTa, XLM-R, DistilBERT...) shared by the
    components that listen to it. `model.path` names a local Hugging Face directory.
    Weights load in `nlp.initialize()`, or from the saved pipeline in `spacy.load`.

    context: "none" reads each Doc on its own; "document" reads each sentence of a
        Doc (`token.is_sent_start`) in a window of its own with up to
        `context_pieces` pieces of its document on either side: the Doc's other
        sentences and `doc._.mlm_context` (see `tokenization/context.py`); vectors
        are only ever taken for the Doc's own pieces.
    store_encoding: what `doc._.mlm_encoding` keeps once every listener
        (`mlm_vectors`' and `mlm_senses'` too) has read it: "host" (the hidden
        states moved to the CPU: a GPU process that keeps its Docs keeps its GPU
        memory flat), "device" (left on the model's device, no copy) or "none"
        (set to None: Docs carry no hidden states).
        Entities, cats and vectors are the same whatever it is.
    pairs: how a pair Doc (`doc._.mlm_pair_start`) is read: "joint" (`[CLS] A [SEP]
        B [SEP]`, what a pair classifier reads) or "apart" (each side as a text of
        its own: the vectors of two separately processed Docs, what `mlm_senses`
        compares)."""
    install_encoding_extension()
    install_pair_extension()
    install_context_extension()
    return MLMEncoder(nlp.vocab, model, name=name, context=context, context_pieces=context_pieces,
                      store_encoding=store_encoding, pairs=pairs)


class MLMEncoder(TrainablePipe):
    def __init__(self, vocab, model: Model, name: str = "mlm_encoder", *, context: str = "none",
                 context_pieces: int = 64, store_encoding: str = "host", pairs: str = "joint"):
        check_context(context, context_pieces)
        check_settings("mlm_encoder", store_encoding=(store_encoding, one_of(*STORE_ENCODINGS)),
                       pairs=(pairs, one_of(*PAIR_READINGS)))
        self.pairs = pairs
        self.store_encoding = store_encoding
        self.vocab = vocab
        self.model = model
        self.name = name
        self.context, self.context_pieces = context, context_pieces
        self.listener_map: Dict[str, List[EncoderListener]] = {}
        self.cfg: Dict = {}
        # An update whose gradient has not come back from the listeners yet, and
        # the optimizer step asked for meanwhile (see finish_update).
        self._awaiting_backprop = False
        self._deferred_sgd: Optional[Optimizer] = None

    # -- listeners (same protocol as spaCy's Tok2Vec) --------------------------
    @property
    def listeners(self) -> List[EncoderListener]:
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> List[str]:
        return list(self.listener_map.keys())

    def add_listener(self, listener: EncoderListener, component_name: str) -> None:
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)
        if self.model.has_dim("nO"):
            listener.set_width(self.model.get_dim("nO"), n_hidden_states(self.model))

    def _loaded(self) -> None:
        """Once the transformer is in: the tokenizer reads in this component's
        context and pairs so, and the listeners take the width."""
        self.model.attrs["tokenizer"].set_context(self.context, self.context_pieces)
        self.model.attrs["tokenizer"].pairs = self.pairs
        self._tell_listeners_the_width()

    def _tell_listeners_the_width(self) -> None:
        """Listeners take the loaded encoder's width (and number of hidden
        states), so no config has to state it."""
        for listener in self.listeners:
            listener.set_width(self.model.get_dim("nO"), n_hidden_states(self.model))

    def remove_listener(self, listener: EncoderListener, component_name: str) -> bool:
        if component_name in self.listener_map and listener in self.listener_map[component_name]:
            self.listener_map[component_name].remove(listener)
            if not self.listener_map[component_name]:
                del self.listener_map[component_name]
            return True
        return False

    def find_listeners(self, component) -> None:
        names = ("*", self.name)
        if isinstance(getattr(component, "model", None), Model):
            for node in component.model.walk():
                if isinstance(node, EncoderListener) and node.upstream_name in names:
                    self.add_listener(node, component.name)

    # -- prediction -------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]) -> List[DocEncoding]:
        docs = list(docs)
        if not docs:
            return []
        batch, _ = self.model(docs, is_train=False)
        return to_doc_encodings(batch, self.model.attrs["tokenizer"])

    def set_annotations(self, docs: Iterable[Doc], encodings: List[DocEncoding]) -> None:
        readers = self.listeners
        for doc, encoding in zip(docs, encodings):
            doc._.set(ENCODING_ATTR, encoding)
            if self.store_encoding != "device":
                encoding.await_readers(doc, readers, self.store_encoding)

    # -- training ---------------------------------------------------------------
    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        if losses is None:
            losses = {}
        docs = [eg.predicted for eg in examples]
        losses.setdefault(self.name, 0.0)
        if not docs:
            return losses
        self._apply_deferred_step()
        batch, bp_batch = self.model.begin_update(docs)
        self._awaiting_backprop = bool(self.listeners)

        def accumulate_gradient(_: None) -> None:
            """Listeners already added their gradient to the shared leaves."""

        def backprop(_: None) -> None:
            # like tok2vec, report the squared norm of the gradient reaching the encoder
            losses[self.name] += sum(float((leaf.grad**2).sum()) for leaf in batch.leaves if leaf.grad is not None)
            bp_batch(batch)
            if sgd is not None:
                self._deferred_sgd = sgd
            self._apply_deferred_step()

        batch_id = EncoderListener.get_batch_id(docs)
        for listener in self.listeners[:-1]:
            listener.receive(batch_id, batch, accumulate_gradient)
        if self.listeners:
            self.listeners[-1].receive(batch_id, batch, backprop)
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        """`Language.update(sgd=...)` calls this right after the encoder's own
        `update`, before the listening components have run and sent their
        gradient back; stepping then would apply each batch's gradient one step
        late (and the last one never). So while a backprop is outstanding the
        step waits for it. (`spacy train` calls finish_update after every
        component's update, when nothing is outstanding.)"""
        if self._awaiting_backprop:
            self._deferred_sgd = sgd
            return
        super().finish_update(sgd)

    def _apply_deferred_step(self) -> None:
        sgd, self._deferred_sgd = self._deferred_sgd, None
        self._awaiting_backprop = False
        if sgd is not None:
            super().finish_update(sgd)

    def get_loss(self, examples, scores):
        return None, None

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None) -> None:
        validate_get_examples(get_examples, "MLMEncoder.initialize")
        self.model.initialize()
        self._loaded()

    def add_label(self, label: str) -> int:
        raise NotImplementedError(f"the '{self.name}' component has no labels")

    # -- serialization ------------------------------------------------------------
    def to_disk(self, path, *, exclude=tuple()) -> None:
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        hf_model = get_hf_model(self.model)
        save_backbone(hf_model, self.model.attrs["tokenizer"].hf, path / "model")
        if self.model.attrs["onnx"] is not None:
            self.model.attrs["onnx"].save(path / ONNX_FILE)
        atomic_write_text(path / "cfg", srsly.json_dumps({"format_version": FORMAT_VERSION, **self.cfg}))

    def from_disk(self, path, *, exclude=tuple()) -> "MLMEncoder":
        path = ensure_path(path)
        cfg_path = path / "cfg"
        if not cfg_path.exists():
            raise ModelLoadError(path, "not a saved mlm_encoder component (no cfg file)")
        try:
            cfg = srsly.read_json(cfg_path)
        except ValueError as err:
            raise ModelLoadError(cfg_path, f"is not valid JSON ({err})") from None
        check_saved_cfg(cfg_path, cfg, "mlm_encoder", FORMAT_VERSION, {})
        _set_backbone(self.model, *load_backbone(path / "model"))
        # the saved graph when it fits the config, so loading does not export again
        graph_path = path / ONNX_FILE
        saved = OnnxBackbone.load(graph_path) if self.model.attrs["backend"] == "onnx" and graph_path.exists() else None
        set_inference_graph(self.model, saved)
        self._loaded()
        return self

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        return directory_to_bytes(self.to_disk)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "MLMEncoder":
        directory_from_bytes(bytes_data, self.from_disk, "mlm_encoder component")
        return self
