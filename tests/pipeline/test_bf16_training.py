"""Fine-tuning with precision = "bf16" follows fp32 within bfloat16's rounding:
NER with a CRF, a text classifier and a pair classifier, a few steps each from
the same seed. Only the transformer's forward runs in bfloat16 (autocast); the
heads, their losses, the CRF and the optimizer's moments stay float32, and so
do the weights a trained pipeline saves."""
import warnings

import numpy as np
import pytest
import spacy
import torch
from safetensors.torch import load_file
from spacy.training import Example

import spacy_mlm
from spacy_mlm.models.torch_shim import TorchShim

STEPS = 10
NER_DATA = [
    ("Anna Berg works in Oslo.", [(0, 9, "PER"), (19, 23, "LOC")]),
    ("Peter Grant flew to Paris last week.", [(0, 11, "PER"), (20, 25, "LOC")]),
    ("Maria Lopez lives in Berlin.", [(0, 11, "PER"), (21, 27, "LOC")]),
]
CAT_DATA = [
    ("What a wonderful and moving story.", "POS"),
    ("The film was dull and far too long.", "NEG"),
    ("A wonderful film.", "POS"),
]
PAIRS = [
    ("The cat sleeps on the warm stone wall.", "A cat is resting.", "entailment"),
    ("A man is playing a guitar.", "Nobody is playing music.", "contradiction"),
    ("Children play football in the park.", "It is Saturday.", "neutral"),
]


def ner_examples(nlp):
    return [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in NER_DATA]


def cat_examples(nlp):
    labels = sorted({label for _, label in CAT_DATA})
    return [Example.from_dict(nlp.make_doc(text), {"cats": {l: float(l == label) for l in labels}})
            for text, label in CAT_DATA]


def pair_examples(nlp):
    labels = sorted({label for *_, label in PAIRS})
    return [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {l: float(l == label) for l in labels}})
            for a, b, label in PAIRS]


TASKS = {
    "ner_crf": ("mlm_ner", {"model": {"crf": True}}, ner_examples),
    "textcat": ("mlm_textcat", {}, cat_examples),
    "pairs": ("mlm_textcat", {"model": {"tok2vec": {"pooling": "pair_mean"}}}, pair_examples),
}


def train(model_dir, task, precision):
    """(nlp, per-step losses, the weights before the first step) after STEPS updates from seed 0."""
    factory, config, make_examples = TASKS[task]
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir), "precision": precision}})
    nlp.add_pipe(factory, name="head", config=config)
    examples = make_examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    start = weights(nlp)
    history = []
    with warnings.catch_warnings():  # a CPU without native bf16 warns; it still computes the same
        warnings.filterwarnings("ignore", message='precision = "bf16" on a CPU without')
        for _ in range(STEPS):
            losses = {}
            nlp.update(examples, sgd=optimizer, losses=losses, drop=0.1)
            history.append(losses["head"])
    return nlp, history, start


def torch_modules(nlp):
    """(component name, shim) of every torch module in the pipeline."""
    return [(name, shim) for name, pipe in nlp.pipeline for node in pipe.model.walk()
            for shim in node.shims if isinstance(shim, TorchShim)]


def weights(nlp):
    """Every trained weight of the pipeline, by component, flattened into one vector."""
    out = {}
    for name, shim in torch_modules(nlp):
        parts = [p.detach().flatten() for p in shim.module.parameters() if p.requires_grad]
        out[name] = torch.cat(parts).clone()
    return out


@pytest.fixture(scope="module", params=sorted(TASKS))
def runs(request, tiny_model_dir):
    task = request.param
    return task, {precision: train(tiny_model_dir, task, precision) for precision in ("fp32", "bf16")}


def test_bf16_follows_fp32_within_rounding(runs):
    task, by_precision = runs
    (exact_nlp, exact, start), (fast_nlp, fast, fast_start) = by_precision["fp32"], by_precision["bf16"]
    assert exact != fast, "bf16 ran exactly as fp32: autocast did not run"
    np.testing.assert_allclose(fast, exact, rtol=0.03, err_msg=f"{task}: losses per step")
    # it learns: with dropout on six examples a single step's loss is noisy, so the means of the
    # first and the last three steps
    assert np.mean(exact[-3:]) < np.mean(exact[:3]) and np.mean(fast[-3:]) < np.mean(fast[:3])
    exact_weights, fast_weights = weights(exact_nlp), weights(fast_nlp)
    for name, before in start.items():
        assert torch.equal(before, fast_start[name])  # the same starting point
        # Adam moves a weight whose gradient is near 0 by about lr either way, so a few
        # weights differ by ~lr; the update as a whole is bf16's to within rounding
        moved = (exact_weights[name] - before).norm()
        apart = (fast_weights[name] - exact_weights[name]).norm()
        assert apart < 0.1 * moved, f"{task}: {name}'s bf16 update is {apart / moved:.2f} of fp32's away from it"


def test_bf16_keeps_weights_and_optimizer_state_in_float32(runs, tmp_path):
    task, by_precision = runs
    nlp = by_precision["bf16"][0]
    modules = torch_modules(nlp)
    assert {name for name, _ in modules} == {"mlm_encoder", "head"}
    for name, shim in modules:
        for key, value in shim.module.state_dict().items():
            if value.is_floating_point():
                assert value.dtype == torch.float32, f"{task}: {name}.{key} is {value.dtype}"
        state = shim._stepper._torch.state
        moments = [t for per_param in state.values() for t in per_param.values() if t.dim() > 0]
        assert moments and all(t.dtype == torch.float32 for t in moments), f"{task}: {name}'s Adam moments"
    nlp.to_disk(tmp_path / "pipe")
    saved = load_file(tmp_path / "pipe" / "mlm_encoder" / "model" / "model.safetensors")
    assert saved and {t.dtype for t in saved.values() if t.is_floating_point()} == {torch.float32}
    loaded = spacy.load(tmp_path / "pipe")
    assert loaded.get_pipe("mlm_encoder").model.attrs["precision"] == "bf16"
    head = dict(torch_modules(loaded))["head"]
    assert {t.dtype for t in head.module.state_dict().values() if t.is_floating_point()} == {torch.float32}


def test_heads_and_losses_run_outside_autocast(tiny_model_dir, monkeypatch):
    """What a head and the CRF's loss compute is float32 in a bf16 pipeline:
    autocast covers the transformer's forward only."""
    from spacy_mlm.tagging import sequences as sequences_module

    nlp = train(tiny_model_dir, "ner_crf", "bf16")[0]
    seen = []

    def record(module, args, output):
        seen.append(("linear", torch.is_autocast_enabled("cpu"), output.dtype))

    def recorded_loss(*args, **kwargs):
        loss = sequence_loss(*args, **kwargs)
        seen.append(("crf loss", torch.is_autocast_enabled("cpu"), loss.dtype))
        return loss

    sequence_loss = sequences_module.sequence_loss
    monkeypatch.setattr(sequences_module, "sequence_loss", recorded_loss)
    head = dict(torch_modules(nlp))["head"].module
    handles = [m.register_forward_hook(record) for m in head.modules() if isinstance(m, torch.nn.Linear)]
    try:
        nlp.update(ner_examples(nlp), sgd=None, losses={})
    finally:
        for handle in handles:
            handle.remove()
    assert {what for what, *_ in seen} == {"linear", "crf loss"}
    assert all((on, dtype) == (False, torch.float32) for _, on, dtype in seen), seen


def test_bf16_casts_each_weight_once_a_step_over_all_length_batches(tiny_model_dir):
    """A batch of short and long texts runs in several passes (max_batch_pieces is
    small); autocast must cast each trained weight to bfloat16 once for all of
    them, not once a pass: per pass, the casts of the weights and of their
    gradients back cost about what the bf16 matmuls save."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from spacy_mlm.models.encoder import get_hf_model
    from spacy_mlm.tokenization.batching import length_batches

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir), "precision": "bf16",
                                                  "max_batch_pieces": 24}})
    nlp.add_pipe("mlm_textcat", name="head")
    examples = cat_examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    encoder = nlp.get_pipe("mlm_encoder").model
    tokenizer = encoder.attrs["tokenizer"]
    lengths = [len(w.input_ids) for p in tokenizer([eg.predicted for eg in examples]) for w in p.windows]
    assert len(length_batches(lengths, 24)) >= 2  # else the test shows nothing
    weights = {p.data_ptr(): name for name, p in get_hf_model(encoder).named_parameters() if p.dim() == 2}
    casts = []

    class RecordCasts(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.ops.aten._to_copy.default and kwargs.get("dtype") == torch.bfloat16:
                casts.append(weights.get(args[0].data_ptr()))
            return func(*args, **kwargs)

    with warnings.catch_warnings(), RecordCasts():
        warnings.filterwarnings("ignore", message='precision = "bf16" on a CPU without')
        nlp.update(examples, sgd=optimizer, losses={})
    cast_weights = [name for name in casts if name is not None]
    assert cast_weights and "embeddings.word_embeddings.weight" not in cast_weights
    assert len(cast_weights) == len(set(cast_weights)), sorted(cast_weights)
