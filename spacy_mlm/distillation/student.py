"""The student: the teacher's pipeline with a smaller encoder.

Its encoder is either the teacher's transformer with only some layers kept, each
with its weights (DistilBERT's initialisation from BERT: every other layer), or
another local encoder that reads text exactly as the teacher's does (the same
vocabulary and the same pieces for the same text: the soft targets are per
token, and the hidden-state loss per piece). Its components are the teacher's:
the same config, labels and head weights (so the student starts as the teacher's
heads over a shallower encoder, not from random heads). The encoder is saved as
a plain Hugging Face directory inside the output (`student_encoder/model`),
which the student's config names. Either can be narrowed to fewer feed-forward
units and heads per layer (`pruning`).
"""
import copy
import logging
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import spacy
from spacy.language import Language
from transformers import AutoModel, PreTrainedModel

from ..errors import ModelLoadError, SpacyMlmError
from ..models.dropout import use_int16_mask_dropout
from ..models.encoder import get_hf_model
from ..models.families import family_layout
from ..models.hf import load_backbone, save_backbone
from ..scoring.calibration import NO_SCALING
from ..testing import SAMPLE_TEXT
from .pruning import narrow

logger = logging.getLogger(__name__)

STUDENT_ENCODER = "student_encoder"


def encoder_name(config) -> str:
    """The name of the pipeline's one mlm_encoder component (from its config)."""
    names = [name for name, settings in config["components"].items() if settings.get("factory") == "mlm_encoder"]
    if len(names) != 1:
        raise SpacyMlmError(f"distillation needs a pipeline with one mlm_encoder component, found {len(names)}")
    return names[0]


def load_pipeline(path: str, precision: str = "fp32", overrides: Optional[Dict] = None) -> Language:
    """A trained pipeline with its encoder run as `precision` (fp32 and bf16 by
    torch, int8 by ONNX Runtime): a teacher, or (fp32) the student's start."""
    from thinc.api import Config

    if not (Path(path) / "config.cfg").is_file():
        raise ModelLoadError(path, "is not a saved spaCy pipeline (no config.cfg): a teacher is a trained pipeline")
    name = encoder_name(Config().from_disk(Path(path) / "config.cfg", interpolate=False))
    backend = "onnx" if precision == "int8" else "torch"
    settings = {f"components.{name}.model.{key}": value
                for key, value in {"backend": backend, "precision": precision, "fp32_layers": []}.items()}
    return spacy.load(path, config={**settings, **(overrides or {})})


def every_kth_layer(n_layers: int, k: int) -> List[int]:
    """Every k-th layer counted down from the top one (6 layers, k = 2: 1, 3, 5):
    the top layer stays, so the copied heads read what they were trained on."""
    return sorted(range(n_layers - 1, -1, -k))


def layer_student(teacher: PreTrainedModel, layers: Sequence[int]) -> PreTrainedModel:
    """A model of the teacher's family and sizes with `len(layers)` layers, the
    i-th a copy of the teacher's layer `layers[i]`, and every other weight
    (embeddings, pooler, final norm) the teacher's."""
    teacher_layers = family_layout(teacher).layers
    n = len(teacher_layers)
    if len({id(layer) for layer in teacher_layers}) != n:
        raise SpacyMlmError(f"the teacher ({teacher.config.model_type}) shares its layers' weights: keeping some of "
                            "them is not a smaller model; give [distillation.student] encoder instead")
    bad = [layer for layer in layers if not 0 <= layer < n]
    if bad or not layers:
        raise SpacyMlmError(f"[distillation.student] layers {list(layers)}: the teacher has layers 0 to {n - 1}")
    config = copy.deepcopy(teacher.config)
    config.num_hidden_layers = len(layers)
    student = AutoModel.from_config(config)
    if getattr(student, "pooler", None) is not None and getattr(teacher, "pooler", None) is None:
        student.pooler = None  # the teacher has none trained (load_backbone drops a missing one)
    teacher_names = {id(module): name for name, module in teacher.named_modules()}
    student_names = {id(module): name for name, module in student.named_modules()}
    renames = [(student_names[id(s)] + ".", teacher_names[id(teacher_layers[t])] + ".")
               for s, t in zip(family_layout(student).layers, layers)]
    weights = teacher.state_dict()
    state = {}
    for key in student.state_dict():
        source = next((t + key[len(s):] for s, t in renames if key.startswith(s)), key)
        if source not in weights:
            raise SpacyMlmError(f"the student's weight {key} has no counterpart {source} in the teacher")
        state[key] = weights[source].detach().clone()
    student.load_state_dict(state, strict=True)
    use_int16_mask_dropout(student)
    return student


def check_same_tokenizer(teacher_tokenizer, tokenizer, path: str) -> None:
    """The other encoder must read text into the teacher's pieces: the same
    vocabulary, and the same pieces for sample texts (casing, accents)."""
    if teacher_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ModelLoadError(path, f"its tokenizer's vocabulary ({len(tokenizer)} entries) is not the teacher's "
                                   f"({len(teacher_tokenizer)}): a student must read text into the teacher's pieces")
    if teacher_tokenizer(SAMPLE_TEXT)["input_ids"] != tokenizer(SAMPLE_TEXT)["input_ids"]:
        raise ModelLoadError(path, "its tokenizer has the teacher's vocabulary but splits text otherwise "
                                   "(lower-casing or accent stripping differ): a student must read as the teacher does")


def build_student(teacher_path: str, student_settings: Dict, output_dir: Path, texts: Sequence[str] = (),
                  staging: Optional[Path] = None) -> Language:
    """The student pipeline (fp32, torch), its encoder written to
    `output_dir/student_encoder/model` (or `staging`/model); narrowed
    (`pruning.narrow`) by what its layers do over `texts`."""
    nlp = load_pipeline(teacher_path)
    name = encoder_name(nlp.config)
    encoder = nlp.get_pipe(name)
    teacher_hf = get_hf_model(encoder.model)
    teacher_tokenizer = encoder.model.attrs["tokenizer"].hf
    if student_settings["encoder"] is not None:
        model, tokenizer = load_backbone(student_settings["encoder"])
        check_same_tokenizer(teacher_tokenizer, tokenizer, student_settings["encoder"])
        if model.config.hidden_size != teacher_hf.config.hidden_size:
            raise SpacyMlmError(
                f"{student_settings['encoder']}: hidden size {model.config.hidden_size}, the teacher's is "
                f"{teacher_hf.config.hidden_size}; the student starts from the teacher's heads, which need its width")
    else:
        layers = student_settings["layers"]
        if layers is None:
            layers = every_kth_layer(int(teacher_hf.config.num_hidden_layers), student_settings["keep_every"])
        model, tokenizer = layer_student(teacher_hf, layers), teacher_tokenizer
    removed = narrow(model, tokenizer, texts, student_settings["intermediate_size"],
                     student_settings["attention_heads"])
    for what, per_layer in removed.items():
        logger.info("Student narrowed: %s %s out of its layers", "/".join(str(len(lost)) for lost in per_layer), what)
    staging = output_dir / STUDENT_ENCODER if staging is None else staging
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    shutil.copyfile(Path(teacher_path) / name / "cfg", staging / "cfg")
    save_backbone(model, tokenizer, staging / "model")
    encoder.from_disk(staging)  # the component's own loader: backbone, tokenizer, listeners' widths
    nlp.get_pipe_config(name)["model"]["path"] = str(staging / "model")
    _uncalibrated(nlp)
    return nlp


def _uncalibrated(nlp: Language) -> None:
    """The teacher's fitted calibration (temperature, entity score scaling) set
    back to none in the student's components: it was fitted to the teacher's
    scores and says nothing of the student's (`spacy_mlm calibrate` fits the
    student's own on a dev set)."""
    for _, pipe in nlp.pipeline:
        cfg = getattr(pipe, "cfg", None)
        if isinstance(cfg, dict):
            if "temperature" in cfg:
                cfg["temperature"] = 1.0
            if "score_scaling" in cfg:
                cfg["score_scaling"] = list(NO_SCALING)
