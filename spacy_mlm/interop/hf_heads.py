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
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch

from ..errors import ModelLoadError, SpacyMlmError
from ..models.hf import ROBERTA_LIKE, _load
from ..tagging.schemes import OUTSIDE, make_tag_labels, normalize_scheme, split_tag
from ..tasks import SEQUENCE_CLASSIFIER, TOKEN_CLASSIFIER, hf_tasks
from ..training.precision import AUTO

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
# import-hf's --task names (spacy_mlm.tasks.TASKS: the rows with a Hugging Face head) ...
TASKS = tuple(hf_tasks())
# ... and init-config's task (and component) for each
TEMPLATE_TASKS = {name: task.name for name, task in hf_tasks().items()}
# Prefixes of tags (BILUO's L and U are BIOES's E and S) and what their presence says.
_LETTERS = {"B": "B", "I": "I", "E": "E", "S": "S", "L": "E", "U": "S"}
# How transformers' text-classification pipeline reads a config's problem_type.
MULTI_LABEL = "multi_label_classification"
# The most labels config.json's id2label / label2id may have: a bound on what a
# directory makes us read and build (a real classifier has far fewer).
MAX_LABELS = 10_000


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
                f"('O' or '<B|I|E|S|L|U>-<TYPE>'): its labels are {_listed(labels, 20)}",
            )
    prefixes = {split_tag(tag)[0] for tag in tags}
    found = "BIOES" if prefixes & {"E", "S"} else "BIO" if "B" in prefixes else "IO"
    scheme = found if scheme is None else normalize_scheme(scheme)
    types = sorted({split_tag(tag)[1] for tag in tags if tag != OUTSIDE})
    expected = make_tag_labels(types, scheme)
    if sorted(tags) != sorted(expected):
        problems = [(sorted(set(expected) - set(tags)), "missing"), (sorted(set(tags) - set(expected)), "not in it"),
                    (sorted(tag for tag, count in Counter(tags).items() if count > 1), "repeated")]
        raise ModelLoadError(
            where,
            f"config.json's id2label {_listed(labels, 20)} is not the {scheme} tag set of the types "
            f"{_listed(types, 20)}: " + ", ".join(f"{_listed(found, 20)} {what}" for found, what in problems if found),
        )
    return scheme, types, [tags.index(tag) for tag in expected]


# -- import -------------------------------------------------------------------------
def _listed(items: Sequence, most: int = 5) -> str:
    """Up to `most` of `items` for a message, and how many there are in all."""
    shown = ", ".join(map(repr, items[:most]))
    return f"[{shown}]" if len(items) <= most else f"[{shown}, ... ({len(items):,} in all)]"


def _unique_keys(pairs: List[Tuple[str, object]]) -> dict:
    """json's object hook: a key twice in one object is an error (json keeps the
    last silently, so an id2label with an id twice would lose a label)."""
    repeated = [key for key, count in Counter(key for key, _ in pairs).items() if count > 1]
    if repeated:
        raise SpacyMlmError(f"an object has the key {repeated[0]!r} more than once")
    return dict(pairs)


def _read_config(path: Path) -> dict:
    import json

    if not (path / "config.json").is_file():
        problem = "has no config.json: not a Hugging Face model directory" if path.is_dir() else "no such directory"
        raise ModelLoadError(path, f"{problem} (a fine-tuned *{TOKEN_CLASSIFIER} or *{SEQUENCE_CLASSIFIER} is expected)")
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf8"), object_pairs_hook=_unique_keys)
    except (OSError, ValueError) as err:
        raise ModelLoadError(path / "config.json", f"cannot be read ({err})") from None
    config = config if isinstance(config, dict) else {}
    check_label_maps(config, path / "config.json")
    return config


def check_label_maps(config: dict, where: Path) -> None:
    """config.json's `id2label` and `label2id` (as json reads them), checked
    before any weight is read, each error naming the file: at most `MAX_LABELS`
    labels (the count said, the labels not printed), id2label's ids exactly
    0..n-1, its names strings and each used once (a repeated name would give
    the component fewer labels than the weights have rows). label2id must map
    strings to integer ids; where it is not id2label turned round, a warning
    says so and id2label is read, as transformers' pipelines read it."""
    maps = {name: config.get(name) for name in ("id2label", "label2id")}
    for name, mapping in maps.items():
        if mapping is not None and not isinstance(mapping, dict):
            raise ModelLoadError(where, f"{name} must be an object, got {type(mapping).__name__}")
        if mapping is not None and len(mapping) > MAX_LABELS:
            raise ModelLoadError(where, f"{name} has {len(mapping):,} labels; at most {MAX_LABELS:,} are imported")
    id2label, label2id = maps["id2label"], maps["label2id"]
    if id2label is not None:
        ids = {}
        for key, label in id2label.items():
            if not re.fullmatch(r"-?[0-9]+", key):
                raise ModelLoadError(where, f"id2label's key {key!r} is no integer id")
            if not isinstance(label, str):
                raise ModelLoadError(where, f"id2label's label of id {key} is {label!r}, not a string")
            ids.setdefault(int(key), []).append(label)
        expected = range(len(id2label))
        missing, outside = sorted(set(expected) - set(ids)), sorted(set(ids) - set(expected))
        if missing or outside:
            raise ModelLoadError(
                where, f"id2label's ids must be 0..{len(id2label) - 1} for its {len(id2label):,} labels: "
                + "; ".join(part for part in (f"{_listed(missing)} missing" * bool(missing),
                                              f"{_listed(outside)} outside that range" * bool(outside)) if part))
        names = Counter(id2label.values())
        repeated = sorted(label for label, count in names.items() if count > 1)
        if repeated:
            raise ModelLoadError(
                where, f"id2label names {_listed(repeated)} more than once ({repeated[0]!r}: ids "
                f"{_listed([int(k) for k, v in id2label.items() if v == repeated[0]])}): each class needs a name "
                "of its own")
    if label2id is not None:
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in label2id.values()):
            raise ModelLoadError(where, "label2id must map each label to an integer id")
        if id2label is not None and label2id != {label: int(i) for i, label in id2label.items()}:
            logger.warning("%s: label2id is not id2label turned round; id2label is read, as transformers' pipelines "
                           "read it", where)


def choose_task(path: Path, task: Optional[str], asked_by: str = "--task") -> str:
    """The task of a directory: the row of `spacy_mlm.tasks.TASKS` whose head is
    its architecture (token or sequence classification), a sequence classifier
    with an "entailment" label being the pair (NLI) one; `task` must be one whose
    head is that architecture when given (`asked_by` names who asked, for the error)."""
    config = _read_config(path)
    architectures = config.get("architectures") or []
    heads = {suffix for a in architectures for suffix in (TOKEN_CLASSIFIER, SEQUENCE_CLASSIFIER) if a.endswith(suffix)}
    if task is not None and task not in TASKS:
        raise SpacyMlmError(f"--task must be one of {', '.join(TASKS)}, not {task!r}")
    if len(heads) != 1:
        raise ModelLoadError(
            path / "config.json",
            f"architectures is {architectures}: expected one *{TOKEN_CLASSIFIER} or *{SEQUENCE_CLASSIFIER} (a "
            "fine-tuned classifier; a base or masked-LM model has no head to import: load it with mlm_encoder and "
            "train one)",
        )
    (head,) = heads
    fitting = {name: row for name, row in hf_tasks().items() if row.hf_architecture == head}
    if task is None:
        names = [str(label).lower() for label in (config.get("id2label") or {}).values()]
        pairs = any(n.startswith("entail") for n in names)
        return next(name for name, row in fitting.items() if len(fitting) == 1 or bool(row.pairs) == pairs)
    if task not in fitting:
        raise ModelLoadError(path / "config.json",
                             f"{asked_by} {task} does not fit the architecture {architectures[0]}")
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


def _id2label(config) -> Dict[int, str]:
    return {int(i): str(label) for i, label in config.id2label.items()}


def _exclusive_classes(config, path: Path) -> bool:
    """Softmax (True) or a sigmoid per label, as transformers' text-classification
    pipeline reads `problem_type`; a regression head is no classifier."""
    problem_type = getattr(config, "problem_type", None)
    if problem_type == "regression":
        raise ModelLoadError(path / "config.json", "problem_type is regression: not a classifier")
    return problem_type != MULTI_LABEL and len(config.id2label) > 1


@dataclass(frozen=True)
class ImportedHead:
    """How a component is set up to hold a directory's fine-tuned head: what
    `import_hf` adds and what `init-config --from-hf` writes into its config
    (both through `component_config`'s settings). The weights and labels come
    later, in the component's `initialize(..., from_hf=DIR)` (`read_hf_head`).

    task: "ner", "textcat" or "pairs". Tagger: scheme, constrained, crf.
    Classifier: exclusive_classes, and the family's head (`SEQUENCE_HEADS`) as
    the listener's pooling and ClassifierHead.v4's hidden layer."""

    task: str
    scheme: Optional[str] = None
    constrained: bool = False
    crf: bool = False
    exclusive_classes: bool = True
    pooling: str = "first"
    hidden_width: int = 0
    hidden_activation: str = "relu"

    def component_config(self) -> dict:
        """The settings of the mlm_ner or mlm_textcat that holds this head."""
        if self.task == "ner":
            return {"scheme": self.scheme, "constrained": self.constrained,
                    "model": {"crf": self.crf, "tok2vec": {"pooling": self.pooling}}}
        return {"model": {
            "@architectures": "spacy_mlm.ClassifierHead.v4", "exclusive_classes": self.exclusive_classes,
            "hidden_width": self.hidden_width, "hidden_activation": self.hidden_activation,
            "tok2vec": {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": self.pooling},
        }}


def imported_head(model_dir: PathLike, task: Optional[str] = None, crf: bool = False, constrained: bool = False,
                  scheme: Optional[str] = None) -> ImportedHead:
    """The `ImportedHead` of a fine-tuned directory, from its config.json alone
    (the settings are `import_hf`'s)."""
    from transformers import AutoConfig

    from ..models.hf import LOCAL_ONLY

    path = Path(model_dir)
    task = choose_task(path, task)
    if task != "ner" and (scheme is not None or crf or constrained):
        raise SpacyMlmError(f"scheme, crf and constrained are settings of a tagger; {path} is imported as {task}")
    try:
        config = AutoConfig.from_pretrained(str(path), **LOCAL_ONLY)
    except Exception as err:  # transformers raises many kinds here
        raise ModelLoadError(path / "config.json", f"cannot be read ({type(err).__name__}: {err})") from None
    if task == "ner":
        scheme, _, _ = read_tag_scheme(_id2label(config), path / "config.json", scheme)
        return ImportedHead(task, scheme=scheme, constrained=constrained, crf=crf)
    head = _sequence_head(config, path)
    width = (getattr(config, "pooler_hidden_size", None) or config.hidden_size) if head.hidden else 0
    return ImportedHead(task, exclusive_classes=_exclusive_classes(config, path), pooling=head.pooling,
                        hidden_width=width, hidden_activation=head_activation(head, config) or "relu")


@dataclass(frozen=True)
class HFHead:
    """A directory's trained head as read for a component's initialize: the
    labels the component gets and the weights `copy_into` puts in its model
    (rows in our tag order for a tagger, `order`; the family's layers for a
    classifier, `sequence`)."""

    labels: List[str]
    params: Dict[str, torch.Tensor]
    order: Optional[List[int]] = None
    sequence: Optional[SequenceHead] = None

    def copy_into(self, component) -> None:
        """The weights into the component's (initialized) model."""
        with torch.no_grad():
            if self.sequence is None:
                _set_tagger_weights(component, self.params, self.order)
            else:
                _set_classifier_weights(component, self.params, self.sequence)


def read_hf_head(model_dir: PathLike, component, kind: str, labels: Optional[Sequence[str]] = None) -> HFHead:
    """The head of `model_dir` for `component` (kind "ner": an mlm_ner;
    "textcat": an mlm_textcat; not initialized yet: its `initialize(...,
    from_hf=model_dir)` asks), once the component is
    checked to be that head: a tagger reading each token's first piece in the
    directory's tag scheme, or a classifier with the family's pooling and hidden
    layer and its single- or multi-label output (`ImportedHead` gives those
    settings). `labels`, when given too, must be the directory's."""
    path = Path(model_dir)
    where = f"'{component.name}' (from_hf = {str(path)!r})"
    task = choose_task(path, kind, asked_by=f"{where} is a tagger:" if kind == "ner" else f"{where} is a classifier:")
    model, _, path = load_task_model(path, task)
    config, params = model.config, _params(model)
    id2label = _id2label(config)
    if kind == "ner":
        check_reads_first(component, "the directory's tagger scores each word's first piece")
        found, _, _ = read_tag_scheme(id2label, path / "config.json")
        scheme = component.cfg["scheme"]
        if found != scheme and (found, scheme) != ("BIO", "IOB1"):
            raise SpacyMlmError(f"{where} has scheme {scheme!r}; the directory's tags {sorted(id2label.values())} "
                                f"are {found}'s: set the component's scheme to {found!r}")
        _, found_labels, order = read_tag_scheme(id2label, path / "config.json", scheme)
        head = HFHead(found_labels, params, order=order)
    else:
        sequence = _sequence_head(config, path)
        width = params[f"{sequence.hidden}.weight"].shape[0] if sequence.hidden else 0
        check_sequence_head(component, config.model_type, sequence, head_activation(sequence, config), width,
                            "the component cannot start from this head: set its model to that (init-config "
                            "--from-hf writes such a config)")
        exclusive = _exclusive_classes(config, path)
        if exclusive != component.exclusive_classes:
            raise SpacyMlmError(
                f"{where} has exclusive_classes = {str(component.exclusive_classes).lower()}; the directory's "
                f"classifier is {'single' if exclusive else 'multi'}-label (problem_type "
                f"{getattr(config, 'problem_type', None)!r}): set exclusive_classes = {str(exclusive).lower()}"
            )
        head = HFHead([id2label[i] for i in range(len(id2label))], params, sequence=sequence)
    if labels is not None and set(labels) != set(head.labels):
        raise SpacyMlmError(f"{where}: labels {sorted(labels)} in [initialize.components.{component.name}] are not "
                            f"the directory's {sorted(head.labels)}: leave labels out, or make them match")
    return head


def import_hf(model_dir: PathLike, task: Optional[str] = None, lang: str = "en", crf: bool = False,
              constrained: bool = False, scheme: Optional[str] = None):
    """A spaCy pipeline ("mlm_encoder" + "mlm_ner" or "mlm_textcat") holding the
    directory's fine-tuned model, ready to predict, to train and to save. The
    component is set up by `imported_head` and initialized with `from_hf`, the
    one way a head is taken from a directory (a training config from
    `init-config --from-hf` does the same when spaCy initializes it).

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

    path = Path(model_dir).resolve()
    head = imported_head(path, task, crf=crf, constrained=constrained, scheme=scheme)
    nlp = spacy.blank(lang)
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(path)}})
    name = hf_tasks()[head.task].factory
    nlp.add_pipe(name, config=head.component_config())
    nlp.config["initialize"]["components"][name] = {"from_hf": str(path)}
    sample = make_pair_doc(nlp, "a", "b") if head.task == "pairs" else nlp.make_doc("a")
    nlp.initialize(lambda: [Example(sample, sample)])
    return nlp


def hf_training_config(model_dir: str, command: str, task: Optional[str] = None, crf: bool = False,
                       constrained: bool = False, scheme: Optional[str] = None, lang: str = "en", gpu: bool = False,
                       precision: str = AUTO, output: str = "config.cfg") -> str:
    """The `spacy train` config that fine-tunes `model_dir` further: init-config's
    config for its task ("pairs": nli) with `paths.encoder = model_dir`, the
    component set up as `imported_head` says, and `[initialize.components.NAME]
    from_hf = ${paths.encoder}`, so that spaCy's initialize takes the labels and
    head weights from the directory (`read_hf_head`) and step 0 predicts as
    the directory does. `command` is quoted in the header."""
    from ..training.config_templates import render_pipeline_config

    head = imported_head(model_dir, task, crf=crf, constrained=constrained, scheme=scheme)
    return render_pipeline_config(TEMPLATE_TASKS[head.task], model_dir, crf=crf, gpu=gpu, precision=precision,
                                  output=output, lang=lang, head=asdict(head), command=command)


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


def check_reads_first(component, why: str) -> None:
    """A tagger whose token scores are its first piece's, as a
    *ForTokenClassification's are read by transformers' pipeline; else an error
    ending in `why`."""
    from ..models.listener import PIECES

    pooling = component.model.get_ref("tok2vec").attrs["pooling"]
    reads_first = pooling == "first" or (pooling == PIECES and component.cfg["subword_decode"] == "first")
    if not reads_first:
        raise SpacyMlmError(
            f"'{component.name}' scores each token from its pieces' {pooling} (subword_decode "
            f"{component.cfg['subword_decode']!r}); {why}: only pooling \"first\" (or the piece listener with "
            "subword_decode \"first\") fits"
        )


def check_sequence_head(component, family: str, head: Optional[SequenceHead], activation: Optional[str],
                        width: int, consequence: str) -> None:
    """An error naming both sides unless the classifier `component` (initialized
    or not) is `family`'s *ForSequenceClassification `head`: the same pooling,
    and a hidden layer of `width` with `activation` where the family has one."""
    pooling = component.model.get_ref("tok2vec").attrs["pooling"]
    hidden = component.model.attrs["hidden_width"]
    ours_activation = component.model.attrs.get("hidden_activation", "relu") if hidden else None
    expected = (activation, width) if head is not None and head.hidden else (None, 0)
    if head is not None and (pooling, ours_activation, hidden) == (head.pooling, *expected):
        return
    ours = f"pooling {pooling!r}, " + (f"a {ours_activation} hidden layer of width {hidden}" if hidden
                                       else "no hidden layer")
    theirs = "not mapped" if head is None else (
        f"pooling {head.pooling!r}, " + (f"a {activation} hidden layer of width {width}" if head.hidden
                                         else "no hidden layer"))
    raise SpacyMlmError(f"'{component.name}' has {ours}; {family}'s *ForSequenceClassification head is {theirs}: "
                        f"{consequence}")


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
    exported = {row.factory for row in hf_tasks().values()}
    heads = [pipe for pipe, _ in nlp.components if nlp.get_pipe_meta(pipe).factory in exported]
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

    from ..models.tagger import tagger_head

    check_reads_first(component, "a *ForTokenClassification scores pieces, which transformers' pipeline reads at "
                                 "each word's first piece")
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
    module = component.model.shims[0].module
    head = SEQUENCE_HEADS.get(family)
    settings = {"problem_type": "single_label_classification" if component.exclusive_classes else MULTI_LABEL}
    activation = None if head is None else head.activation
    if activation == "pooler_hidden_act":  # DeBERTa's is a setting: ours becomes it
        ours = component.model.attrs.get("hidden_activation", "relu") if module.hidden is not None else "gelu"
        activation = settings["pooler_hidden_act"] = ours
    check_sequence_head(component, family, head, activation, int(hf_model.config.hidden_size),
                        "transformers cannot represent this head (train one with that pooling and hidden layer to "
                        "export it)")
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
