"""Pipelines for contextual vectors: a blank `mlm_encoder` -> `mlm_vectors`
pipeline over a Hugging Face directory, an mlm_vectors component added to or
reconfigured in a saved pipeline, and docs run up to that component (what its
transform is fitted on). Used by the `wic` and `fit-transform` commands and
the similarity benchmarks; above `pipeline/`, whose components it assembles."""
from pathlib import Path
from typing import Iterable, Optional, Sequence, Tuple, Union

import spacy
from spacy.language import Language
from spacy.tokens import Doc

from .errors import ModelLoadError, SpacyMlmError
from .pipeline.encoder import MLMEncoder
from .pipeline.vectors import MLMVectors


def make_vectors_pipeline(
    model_path: Union[str, Path],
    *,
    lang: str = "en",
    pooling: str = "mean",
    layer: int = -1,
    n_layers: int = 1,
    steps: Sequence[str] = (),
    n_components: int = 2,
    all_layers: Optional[bool] = None,
) -> Language:
    """A blank pipeline `mlm_encoder` -> `mlm_vectors` over a plain Hugging Face
    directory, initialized (weights loaded). The encoder keeps every layer's
    output when the layer choice or the transform ("remove_static") needs it, or
    when `all_layers` says so."""
    if all_layers is None:
        all_layers = not (layer == -1 and n_layers == 1) or "remove_static" in steps
    nlp = spacy.blank(lang)
    nlp.add_pipe(
        "mlm_encoder",
        config={"model": {"@architectures": "spacy_mlm.HFEncoder.v2", "path": str(model_path), "output_hidden_states": all_layers}},
    )
    nlp.add_pipe("mlm_vectors", config=vectors_config(pooling, layer, n_layers, steps, n_components))
    nlp.initialize()
    return nlp


def vectors_config(
    pooling: str = "mean", layer: int = -1, n_layers: int = 1, steps: Sequence[str] = (), n_components: int = 2
) -> dict:
    """An mlm_vectors component config (the sense key keeps its default)."""
    return {
        "pooling": pooling,
        "layer": layer,
        "n_layers": n_layers,
        "transform": {"@misc": "spacy_mlm.VectorTransform.v1", "steps": list(steps), "n_components": n_components},
    }


def find_vectors_component(nlp: Language) -> Optional[str]:
    names = [name for name, pipe in nlp.pipeline if isinstance(pipe, MLMVectors)]
    return names[0] if names else None


def docs_before(nlp: Language, component: str, texts: Iterable[Union[str, Doc]], batch_size: int = 64) -> Iterable[Doc]:
    """Docs run lazily through the pipeline up to (not including) `component`,
    e.g. to fit that component's transform on the encoder's raw output."""
    docs: Iterable[Doc] = (nlp.make_doc(t) if isinstance(t, str) else t for t in texts)
    for _, proc in nlp.pipeline[: nlp.pipe_names.index(component)]:
        docs = proc.pipe(docs, batch_size=batch_size) if hasattr(proc, "pipe") else map(proc, docs)
    return docs


def configure_vectors_component(nlp: Language, **overrides) -> str:
    """Name of the pipeline's mlm_vectors component. With no overrides an
    existing one is kept as it is (fitted state included); otherwise it is
    replaced by one whose config is the old one updated with `overrides`
    (pooling, layer, n_layers, steps, n_components), unfitted. A pipeline
    without one gets one after its last mlm_encoder."""
    name = find_vectors_component(nlp)
    if name is not None and not overrides:
        return name
    saved = {}
    if name is not None:
        old = nlp.config["components"][name]
        saved = {k: old[k] for k in ("pooling", "layer", "n_layers")}
        saved.update(steps=list(old["transform"]["steps"]), n_components=old["transform"]["n_components"])
    config = vectors_config(**{**saved, **overrides})
    if name is not None:
        nlp.replace_pipe(name, "mlm_vectors", config=config)
        return name
    encoders = [n for n, pipe in nlp.pipeline if isinstance(pipe, MLMEncoder)]
    if not encoders:
        raise SpacyMlmError("the pipeline has no mlm_encoder component to take contextual vectors from")
    nlp.add_pipe("mlm_vectors", after=encoders[-1], config=config)
    return "mlm_vectors"


def load_vectors_pipeline(model: Union[str, Path], **overrides) -> Tuple[Language, str]:
    """A saved spaCy pipeline directory (config.cfg; an mlm_vectors component is
    added or reconfigured, see `configure_vectors_component`) or a plain Hugging
    Face directory (config.json; see `make_vectors_pipeline`). Returns the
    pipeline and its mlm_vectors component's name."""
    model = Path(model)
    if (model / "config.cfg").is_file():
        nlp = spacy.load(model)
        return nlp, configure_vectors_component(nlp, **overrides)
    if (model / "config.json").is_file():
        return make_vectors_pipeline(model, **overrides), "mlm_vectors"
    raise ModelLoadError(model, "neither a spaCy pipeline (config.cfg) nor a Hugging Face model directory (config.json)")
