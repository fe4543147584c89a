"""Hugging Face fine-tuned classifiers in and out of spaCy pipelines.

`import_hf` turns a local `*ForTokenClassification` or `*ForSequenceClassification`
directory into a pipeline of `mlm_encoder` plus `mlm_ner` or `mlm_textcat` whose
head holds the directory's trained classifier, so it predicts at once and can be
trained further; `export_hf` writes such a directory from a pipeline trained
here. Both directions use one table of where each model family keeps its head
(`SEQUENCE_HEADS`): our `ClassifierHead` is the same computation as each of them
with their weights, given the listener's pooling and the hidden layer's
activation:

* BERT: the backbone's pooler (dense + tanh over [CLS]) then `classifier`:
  pooling "pooler", no hidden layer.
* RoBERTa, XLM-R, CamemBERT: `classifier.dense` + tanh + `classifier.out_proj`
  on <s>: pooling "cls", a tanh hidden layer. ELECTRA: the same with GELU.
* DeBERTa(-v2): the ContextPooler (`pooler.dense` + `pooler_hidden_act`) then
  `classifier`: pooling "cls", a hidden layer with that activation.
* DistilBERT: `pre_classifier` + ReLU + `classifier` on [CLS].

Token classifiers are one linear layer on each piece in every family; ours reads
each spaCy token's first piece, what transformers' pipeline with
`aggregation_strategy="first"` reads for each of its words. Tags are reordered
into our order (`make_tag_labels`), and the scheme is read from the tag names.
"""
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import torch

from ..errors import ModelLoadError, SpacyMlmError
from ..models.hf import ROBERTA_LIKE, _load
from ..tagging.schemes import OUTSIDE, make_tag_labels, normalize_scheme, split_tag

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
TASKS = ("ner", "textcat", "pairs")
TOKEN_SUFFIX, SEQUENCE_SUFFIX = "ForTokenClassification", "ForSequenceClassification"
# Prefixes of tags (BILUO's L and U are BIOES's E and S) and what their presence says.
_LETTERS = {"B": "B", "I": "I", "E": "E", "S": "S", "L": "E", "U": "S"}
# How transformers' text-classification pipeline reads a config's problem_type.
MULTI_LABEL = "multi_label_classification"


@dataclass(frozen=True)
class SequenceHead:
    """Where a family's sequence-classification head lives in the task model's
    state dict, and how it reads the encoder: `pooling` of the listener, the
    hidden layer (None: none) and its activation, and the output layer."""

    pooling: str
    hidden: Optional[str]
    activation: Optional[str]
    output: str


_ROBERTA_HEAD = SequenceHead("cls", "classifier.dense", "tanh", "classifier.out_proj")
_CONTEXT_POOLER = SequenceHead("cls", "pooler.dense", "pooler_hidden_act", "classifier")
SEQUENCE_HEADS: Dict[str, SequenceHead] = {
    "bert": SequenceHead("pooler", None, None, "classifier"),
    **{family: _ROBERTA_HEAD for family in ROBERTA_LIKE},
    "electra": SequenceHead("cls", "classifier.dense", "gelu", "classifier.out_proj"),
    "deberta": _CONTEXT_POOLER,
    "deberta-v2": _CONTEXT_POOLER,
    "distilbert": SequenceHead("cls", "pre_classifier", "relu", "classifier"),
}
TOKEN_OUTPUT = "classifier"  # every family's token-classification layer
SUPPORTED_ACTIVATIONS = ("relu", "tanh", "gelu")


def head_activation(head: SequenceHead, config) -> Optional[str]:
    """The hidden layer's activation; DeBERTa's is a config setting."""
    if head.activation != "pooler_hidden_act":
        return head.activation
    return getattr(config, "pooler_hidden_act", "gelu")


# -- tag schemes --------------------------------------------------------------------
def read_tag_scheme(id2label: Dict[int, str], where: PathLike,
                    scheme: Optional[str] = None) -> Tuple[str, List[str], List[int]]:
    """(scheme, entity types, order) of a token classifier's labels: order[i] is
    the directory's id of our tag i (`make_tag_labels(types, scheme)`). BIO and
    IOB1 use the same tags (B- and I-) and cannot be told apart by them: they
    are read as BIO unless `scheme` says IOB1 (both decode alike unconstrained,
    which is how an import decodes by default; the scheme decides what training
    teaches and what constrained decoding allows). Labels that are no tags,
    or tags that are not exactly one scheme's set, are errors."""
    labels = [id2label[i] for i in range(len(id2label))]
    tags = []
    for i, label in enumerate(labels):
        prefix, _, kind = label.partition("-")
        if label == OUTSIDE:
            tags.append(OUTSIDE)
        elif prefix in _LETTERS and kind:
            tags.append(f"{_LETTERS[prefix]}-{kind}")
        else:
            raise ModelLoadError(
                where,
                f"config.json's id2label has {label!r} (id {i}), which is no tag of BIO, IOB1, BIOES/BILUO or IO "
                f"('O' or '<B|I|E|S|L|U>-<TYPE>'): all labels are {labels}",
            )
    prefixes = {split_tag(tag)[0] for tag in tags}
    found = "BIOES" if prefixes & {"E", "S"} else "BIO" if "B" in prefixes else "IO"
    scheme = found if scheme is None else normalize_scheme(scheme)
    types = sorted({split_tag(tag)[1] for tag in tags if tag != OUTSIDE})
    expected = make_tag_labels(types, scheme)
    if sorted(tags) != sorted(expected):
        problems = [f"{sorted(set(expected) - set(tags))} missing", f"{sorted(set(tags) - set(expected))} not in it",
                    f"{sorted({tag for tag in tags if tags.count(tag) > 1})} repeated"]
        raise ModelLoadError(
            where,
            f"config.json's id2label {labels} is not the {scheme} tag set of the types {types}: "
            + ", ".join(problem for problem in problems if not problem.startswith("[]")),
        )
    return scheme, types, [tags.index(tag) for tag in expected]


# -- import -------------------------------------------------------------------------
def _read_config(path: Path) -> dict:
    import json

    if not (path / "config.json").is_file():
        problem = "has no config.json: not a Hugging Face model directory" if path.is_dir() else "no such directory"
        raise ModelLoadError(path, f"{problem} (a fine-tuned *{TOKEN_SUFFIX} or *{SEQUENCE_SUFFIX} is expected)")
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf8"))
    except (OSError, ValueError) as err:
        raise ModelLoadError(path / "config.json", f"cannot be read ({err})") from None
    return config if isinstance(config, dict) else {}


def choose_task(path: Path, task: Optional[str]) -> str:
    """The task of a directory: its architecture's kind (token or sequence
    classification), a sequence classifier with an "entailment" label being a
    pair (NLI) model; `task` must agree with the architecture when given."""
    config = _read_config(path)
    architectures = config.get("architectures") or []
    kinds = {"ner" if a.endswith(TOKEN_SUFFIX) else "textcat" for a in architectures
             if a.endswith((TOKEN_SUFFIX, SEQUENCE_SUFFIX))}
    if task is not None and task not in TASKS:
        raise SpacyMlmError(f"--task must be one of {', '.join(TASKS)}, not {task!r}")
    if len(kinds) != 1:
        raise ModelLoadError(
            path / "config.json",
            f"architectures is {architectures}: expected one *{TOKEN_SUFFIX} or *{SEQUENCE_SUFFIX} (a fine-tuned "
            "classifier; a base or masked-LM model has no head to import: load it with mlm_encoder and train one)",
        )
    (kind,) = kinds
    if task is None:
        names = [str(label).lower() for label in (config.get("id2label") or {}).values()]
        return "pairs" if kind == "textcat" and any(n.startswith("entail") for n in names) else kind
    if (task == "ner") != (kind == "ner"):
        raise ModelLoadError(path / "config.json", f"--task {task} does not fit the architecture {architectures[0]}")
    return task


def load_task_model(path: PathLike, task: str):
    """(task model, tokenizer, directory): a local *ForTokenClassification or
    *ForSequenceClassification with every checks of `models.hf` (local files, no
    own code, weights that fit) and a head the weights hold: transformers would
    start a missing one at random with only a warning."""
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    auto = AutoModelForTokenClassification if task == "ner" else AutoModelForSequenceClassification
    model, tokenizer, info, path = _load(path, auto)
    if info["missing_keys"]:
        raise ModelLoadError(
            path,
            f"the weights lack {len(info['missing_keys'])} tensors of the classifier that config.json describes (e.g. "
            f"{', '.join(info['missing_keys'][:3])}): not a fine-tuned classifier, or saved without its head",
        )
    model.eval()
    return model, tokenizer, path


def _params(model) -> Dict[str, torch.Tensor]:
    return {name: tensor.detach() for name, tensor in model.state_dict().items()}


def import_hf(model_dir: PathLike, task: Optional[str] = None, lang: str = "en", crf: bool = False,
              constrained: bool = False, scheme: Optional[str] = None):
    """A spaCy pipeline ("mlm_encoder" + "mlm_ner" or "mlm_textcat") holding the
    directory's fine-tuned model, ready to predict, to train and to save.

    task: "ner", "textcat" or "pairs" (sentence pairs: NLI, paraphrase); None
        reads it from config.json.
    crf: the tagger gets a CRF whose transitions start at zero (so it predicts as
        the directory's softmax does until trained).
    constrained: decode tags under the scheme's constraints; off by default, so
        that the tags are the directory's argmax, as transformers decides them.
    scheme: the tag scheme, where the tag names leave it open (IOB1 for a
        tagger with B- and I- tags that was trained on IOB1); None reads it from
        the names (B- and I- tags: BIO)."""
    import spacy
    from spacy.training import Example

    from ..tokenization.pair import make_pair_doc

    path = Path(model_dir)
    task = choose_task(path, task)
    if task != "ner" and (scheme is not None or crf or constrained):
        raise SpacyMlmError(f"scheme, crf and constrained are settings of a tagger; {path} is imported as {task}")
    model, _, path = load_task_model(path, task)
    config = model.config
    id2label = {int(i): str(label) for i, label in config.id2label.items()}
    nlp = spacy.blank(lang)
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(path.resolve())}})
    params = _params(model)
    if task == "ner":
        scheme, types, order = read_tag_scheme(id2label, path / "config.json", scheme)
        name = "mlm_ner"
        nlp.add_pipe(name, config={"scheme": scheme, "constrained": constrained,
                                   "model": {"crf": crf, "tok2vec": {"pooling": "first"}}})
        labels, sample = types, nlp.make_doc("a")
    else:
        head = _sequence_head(config, path)
        if getattr(config, "problem_type", None) == "regression":
            raise ModelLoadError(path / "config.json", "problem_type is regression: not a classifier")
        exclusive = getattr(config, "problem_type", None) != MULTI_LABEL and len(id2label) > 1
        name = "mlm_textcat"
        hidden = params[f"{head.hidden}.weight"].shape[0] if head.hidden else 0
        nlp.add_pipe(name, config={"model": {
            "@architectures": "spacy_mlm.ClassifierHead.v4", "exclusive_classes": exclusive, "hidden_width": hidden,
            "hidden_activation": head_activation(head, config) or "relu",
            "tok2vec": {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": head.pooling},
        }})
        labels = [id2label[i] for i in range(len(id2label))]
        sample = make_pair_doc(nlp, "a", "b") if task == "pairs" else nlp.make_doc("a")
    nlp.config["initialize"]["components"][name] = {"labels": labels}
    nlp.initialize(lambda: [Example(sample, sample)])
    component = nlp.get_pipe(name)
    with torch.no_grad():
        if task == "ner":
            _set_tagger_weights(component, params, order)
        else:
            _set_classifier_weights(component, params, head)
    return nlp


def training_config(nlp, pipeline: PathLike):
    """The config of `nlp` (an import saved at `pipeline`) with every component
    sourced from there, so that `spacy train` resumes the imported weights
    (a sourced component is not initialized again); the corpora are left to
    `--paths.train` / `--paths.dev`."""
    from thinc.api import Config

    config = Config(nlp.config).copy()
    for name in nlp.component_names:
        config["components"][name] = {"source": str(Path(pipeline).resolve())}
    config["initialize"]["components"] = {}
    return config


def _sequence_head(config, path: Path) -> SequenceHead:
    family = config.model_type
    if family not in SEQUENCE_HEADS:
        raise ModelLoadError(
            path / "config.json",
            f"model_type {family!r}: its sequence-classification head is not mapped (mapped: "
            f"{', '.join(SEQUENCE_HEADS)})",
        )
    head = SEQUENCE_HEADS[family]
    activation = head_activation(head, config)
    if activation is not None and activation not in SUPPORTED_ACTIVATIONS:
        raise ModelLoadError(
            path / "config.json",
            f"pooler_hidden_act is {activation!r}; the classifier head offers {', '.join(SUPPORTED_ACTIVATIONS)}",
        )
    return head


def _set_tagger_weights(component, params: Dict[str, torch.Tensor], order: List[int]) -> None:
    from ..models.tagger import tagger_head

    layer = tagger_head(component.model).output
    index = torch.tensor(order)
    layer.weight.copy_(params[f"{TOKEN_OUTPUT}.weight"][index])
    layer.bias.copy_(params[f"{TOKEN_OUTPUT}.bias"][index])


def _set_classifier_weights(component, params: Dict[str, torch.Tensor], head: SequenceHead) -> None:
    module = component.model.shims[0].module
    for layer, name in ((module.hidden, head.hidden), (module.output, head.output)):
        if name is not None:
            layer.weight.copy_(params[f"{name}.weight"])
            layer.bias.copy_(params[f"{name}.bias"])


# -- export -------------------------------------------------------------------------
def _exported_component(nlp, name: Optional[str]) -> str:
    """The mlm_ner or mlm_textcat to export: `name`, or the pipeline's only one."""
    heads = [pipe for pipe, _ in nlp.components if nlp.get_pipe_meta(pipe).factory in ("mlm_ner", "mlm_textcat")]
    if name is not None:
        if name not in heads:
            raise SpacyMlmError(f"--component {name!r} is not an mlm_ner or mlm_textcat of the pipeline (those: {heads})")
        return name
    if len(heads) != 1:
        raise SpacyMlmError(
            f"the pipeline has {len(heads)} mlm_ner/mlm_textcat components ({heads}): name the one to export "
            "with --component" if heads else "the pipeline has no mlm_ner or mlm_textcat component to export"
        )
    return heads[0]


def listened_encoder(nlp, name: str):
    """The mlm_encoder (enabled or not) that component `name` listens to."""
    for pipe, component in nlp.components:
        if nlp.get_pipe_meta(pipe).factory == "mlm_encoder" and name in component.listener_map:
            return component
    raise SpacyMlmError(f"'{name}' listens to no mlm_encoder of the pipeline")


def _task_model(auto, hf_model, labels: List[str], **config_settings):
    """A fresh `auto` model on a copy of the encoder's config, `labels` as its
    id2label, the encoder's weights in its backbone (a pooler the task model has
    no place for is left out; one it needs and the encoder lacks is an error)."""
    import copy

    config = copy.deepcopy(hf_model.config)
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    config.output_hidden_states = False
    for key, value in config_settings.items():
        setattr(config, key, value)
    model = auto.from_config(config)
    backbone = model.base_model.state_dict()
    state = {key: value for key, value in hf_model.state_dict().items() if key in backbone}
    missing = sorted(set(backbone) - set(state))
    if missing:
        raise SpacyMlmError(
            f"{type(model).__name__} needs {missing[:3]} in its encoder, which this pipeline's encoder does not have"
        )
    model.base_model.load_state_dict(state)
    config.architectures = [type(model).__name__]
    return model


def _token_classifier(component, hf_model, refuse_crf: bool):
    from transformers import AutoModelForTokenClassification

    from ..models.listener import PIECES
    from ..models.tagger import tagger_head

    listener = component.model.get_ref("tok2vec")
    pooling = listener.attrs["pooling"]
    reads_first = pooling == "first" or (pooling == PIECES and component.cfg["subword_decode"] == "first")
    if not reads_first:
        raise SpacyMlmError(
            f"'{component.name}' scores each token from its pieces' {pooling} (subword_decode "
            f"{component.cfg['subword_decode']!r}); a *ForTokenClassification scores pieces, which transformers' "
            "pipeline reads at each word's first piece: only pooling \"first\" (or the piece listener with "
            "subword_decode \"first\") exports"
        )
    head = tagger_head(component.model)
    if head.crf:
        message = (f"'{component.name}' is a CRF tagger: a *ForTokenClassification holds its emissions only, and "
                   "transformers decodes them without the CRF's transitions, so its entities can differ from ours")
        if refuse_crf:
            raise SpacyMlmError(message + " (export refused, as asked)")
        logger.warning(message)
    if component.cfg["scheme"] == "BIOES":
        logger.warning("transformers' token-classification pipeline groups B-/I- tags only: it splits BIOES "
                       "entities at their E-/S- tags, which our decoding reads")
    model = _task_model(AutoModelForTokenClassification, hf_model, component.tag_labels)
    with torch.no_grad():
        model.classifier.weight.copy_(head.output.weight)
        model.classifier.bias.copy_(head.output.bias)
    return model


def _sequence_classifier(component, hf_model):
    from transformers import AutoModelForSequenceClassification

    family = hf_model.config.model_type
    pooling = component.model.get_ref("tok2vec").attrs["pooling"]
    module = component.model.shims[0].module
    activation = component.model.attrs.get("hidden_activation", "relu") if module.hidden is not None else None
    ours = f"pooling {pooling!r}, " + (f"a {activation} hidden layer" if activation else "no hidden layer")
    head = SEQUENCE_HEADS.get(family)
    settings = {"problem_type": "single_label_classification" if component.exclusive_classes else MULTI_LABEL}
    expected = None if head is None else head.activation
    if expected == "pooler_hidden_act":  # DeBERTa's is a setting: ours becomes it
        expected = settings["pooler_hidden_act"] = activation or "gelu"
    width = int(hf_model.config.hidden_size)
    fits = head is not None and head.pooling == pooling and expected == activation and (
        module.hidden is None or module.hidden.out_features == width)
    if not fits:
        theirs = "not mapped" if head is None else (
            f"pooling {head.pooling!r}, " + (f"a {expected} hidden layer of the encoder's width ({width})"
                                             if head.hidden else "no hidden layer"))
        raise SpacyMlmError(
            f"'{component.name}' has {ours}; {family}'s *ForSequenceClassification head is {theirs}: transformers "
            "cannot represent this head (train one with that pooling and hidden layer to export it)"
        )
    model = _task_model(AutoModelForSequenceClassification, hf_model, list(component.labels), **settings)
    state = model.state_dict()
    for layer, name in ((module.hidden, head.hidden), (module.output, head.output)):
        if name is not None:
            state[f"{name}.weight"], state[f"{name}.bias"] = layer.weight.detach(), layer.bias.detach()
    model.load_state_dict(state)
    return model


def export_hf(nlp, output: PathLike, component: Optional[str] = None, refuse_crf: bool = False) -> str:
    """Write `component` (an mlm_ner or mlm_textcat; None: the only one) with the
    encoder it listens to as a Hugging Face *ForTokenClassification or
    *ForSequenceClassification directory (config.json with id2label, safetensors,
    tokenizer), atomically. Returns the architecture's name. A head transformers
    cannot represent (another pooling, hidden layer or activation than the
    family's head) is an error; a CRF exports its emissions with a warning, or
    is refused with `refuse_crf`."""
    from ..models.encoder import get_hf_model
    from ..models.hf import save_backbone

    name = _exported_component(nlp, component)
    pipe = nlp.get_pipe(name)
    encoder = listened_encoder(nlp, name)
    if encoder.context != "none":
        logger.warning("'%s' reads each sentence in its document's context; transformers reads each text alone",
                       encoder.name)
    hf_model = get_hf_model(encoder.model)
    if nlp.get_pipe_meta(name).factory == "mlm_ner":
        model = _token_classifier(pipe, hf_model, refuse_crf)
    else:
        model = _sequence_classifier(pipe, hf_model)
    model.eval()
    save_backbone(model, encoder.model.attrs["tokenizer"].hf, output)  # any model: config, safetensors, tokenizer
    return type(model).__name__
