"""The ONNX Runtime backend of HFEncoder.v2: export, int8, save/load, refusals."""
import builtins
from collections import Counter

import numpy as np
import pytest
import spacy
from spacy.training import Example
from spacy.util import fix_random_seed

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.models import encoder as encoder_module
from spacy_mlm.models import onnx_backbone
from spacy_mlm.util.vectors import cosine_rows
from spacy_mlm.testing import make_tiny_roberta

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

TEXTS = ["Anna Berg works for the Northwind Company in Oslo.", "The river bank was muddy.", ""]
LONG = " ".join(["the pond lies in a quiet wood near the town"] * 12)  # several 64-position windows
NER_DATA = [
    ("Anna Berg works for the Northwind Company in Oslo .", [(0, 9, "PER"), (24, 41, "ORG"), (45, 49, "LOC")]),
    ("Peter Grant flew from Paris to Berlin on Monday .", [(0, 11, "PER"), (22, 27, "LOC"), (31, 37, "LOC")]),
]


def encoder_nlp(path, **model_cfg):
    nlp = spacy.blank("en")
    cfg = {"@architectures": "spacy_mlm.HFEncoder.v2", "path": str(path), **model_cfg}
    nlp.add_pipe("mlm_encoder", config={"model": cfg})
    nlp.initialize()
    return nlp


def encodings(nlp, texts=(*TEXTS, LONG)):
    return [doc._.mlm_encoding for doc in nlp.pipe(texts)]


@pytest.fixture(scope="module")
def torch_encodings(tiny_model_dir):
    return encodings(encoder_nlp(tiny_model_dir, output_hidden_states=True))


def test_onnx_fp32_equals_torch(tiny_model_dir, torch_encodings):
    nlp = encoder_nlp(tiny_model_dir, backend="onnx", output_hidden_states=True)
    for ours, ref in zip(encodings(nlp), torch_encodings):
        np.testing.assert_allclose(ours.hidden, ref.hidden, atol=1e-4)
        np.testing.assert_allclose(ours.cls, ref.cls, atol=1e-4)
        np.testing.assert_allclose(ours.layers, ref.layers, atol=1e-4)


def test_onnx_fp32_equals_torch_for_a_model_without_type_ids(tmp_path):
    path = make_tiny_roberta(tmp_path / "roberta")
    ref = encodings(encoder_nlp(path), TEXTS[:2])
    for ours, theirs in zip(encodings(encoder_nlp(path, backend="onnx"), TEXTS[:2]), ref):
        np.testing.assert_allclose(ours.hidden, theirs.hidden, atol=1e-4)


def _cosine(a, b):
    return float((a * b).sum(-1).mean() / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)).mean())


def test_int8_is_close_to_fp32_and_keeps_chosen_layers(tiny_model_dir, torch_encodings):
    int8 = encoder_nlp(tiny_model_dir, backend="onnx", precision="int8")
    for ours, ref in zip(encodings(int8), torch_encodings):
        if len(ref.hidden):
            assert _cosine(ours.hidden, ref.hidden) > 0.98
    graph = int8.get_pipe("mlm_encoder").model.attrs["onnx"].graph
    kept = encoder_nlp(tiny_model_dir, backend="onnx", precision="int8", fp32_layers=[-1])
    kept_graph = kept.get_pipe("mlm_encoder").model.attrs["onnx"].graph

    # fp32 MatMul nodes per layer: only the attention products (no weights) when
    # quantized, also the six weight products in the layer kept in fp32
    def fp32_matmuls(g, layer):
        return len(onnx_backbone.layer_matmuls(g, [layer], ["/encoder/layer.0/", "/encoder/layer.1/"]))

    assert fp32_matmuls(graph, 0) == fp32_matmuls(graph, 1) == fp32_matmuls(kept_graph, 0) == 2
    assert fp32_matmuls(kept_graph, 1) == 8
    assert Counter(node.op_type for node in onnx.load_from_string(graph).graph.node)["MatMulInteger"] == 12


def test_calibration_keeps_the_layers_that_int8_hurts_most(tiny_model_dir):
    nlp = encoder_nlp(tiny_model_dir)
    model = nlp.get_pipe("mlm_encoder").model
    docs = [nlp.make_doc(t) for t in (*TEXTS, LONG)]
    before = dict(model.attrs)
    assert encoder_module.choose_fp32_layers(model, docs, min_cosine=0.0, keep=[-1]) == [1]
    one = encoder_module.choose_fp32_layers(model, docs, min_cosine=_all_int8_cosine(model, docs) + 1e-6)
    assert len(one) >= 1  # the all-int8 cosine is just short: a layer is kept
    assert model.attrs == before  # still the torch fp32 encoder it was


def _all_int8_cosine(model, docs):
    reference = encoder_module._piece_vectors(model, docs)
    model.attrs["onnx"] = onnx_backbone.OnnxBackbone(
        encoder_module._int8_graph(model, encoder_module._fp32_graph(model), [])
    )
    try:
        return float(np.mean(cosine_rows(encoder_module._piece_vectors(model, docs), reference)))
    finally:
        model.attrs["onnx"] = None


def test_bad_settings_are_refused(tiny_model_dir):
    with pytest.raises(SpacyMlmError, match="precision 'int8' is not available with backend 'torch'"):
        encoder_nlp(tiny_model_dir, precision="int8")
    with pytest.raises(SpacyMlmError, match="layer 5 does not exist in a 2-layer encoder"):
        encoder_nlp(tiny_model_dir, backend="onnx", precision="int8", fp32_layers=[5])


def _ner_pipeline(path, **encoder_cfg):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", name="encoder", config={"model": {"@architectures": "spacy_mlm.HFEncoder.v2", "path": str(path), **encoder_cfg}})
    nlp.add_pipe("mlm_ner", name="ner")
    examples = [Example.from_dict(nlp.make_doc(t), {"entities": ents}) for t, ents in NER_DATA]
    nlp.initialize(lambda: examples)
    return nlp, examples


def test_optimized_ner_pipeline_round_trip(tiny_model_dir, tmp_path, monkeypatch):
    nlp, examples = _ner_pipeline(tiny_model_dir)
    for _ in range(3):
        nlp.update(examples)
    nlp.to_disk(tmp_path / "torch")
    overrides = {"components.encoder.model.backend": "onnx", "components.encoder.model.precision": "int8"}
    optimized = spacy.load(tmp_path / "torch", config=overrides)  # no saved graph yet: exported here
    optimized.to_disk(tmp_path / "int8")
    assert (tmp_path / "int8" / "encoder" / onnx_backbone.ONNX_FILE).is_file()

    def no_export(*args, **kwargs):
        raise AssertionError("spacy.load exported the graph again")

    monkeypatch.setattr(encoder_module, "export_backbone", no_export)
    loaded = spacy.load(tmp_path / "int8")
    assert loaded.get_pipe("encoder").model.attrs["precision"] == "int8"
    texts = [t for t, _ in NER_DATA]
    for before, after in zip(optimized.pipe(texts), loaded.pipe(texts)):
        np.testing.assert_array_equal(before._.mlm_encoding.hidden, after._.mlm_encoding.hidden)
        assert [(e.start, e.end, e.label_) for e in before.ents] == [(e.start, e.end, e.label_) for e in after.ents]
    with pytest.raises(SpacyMlmError, match="inference only"):
        loaded.update(examples)


def test_training_an_onnx_encoder_is_refused(tiny_model_dir):
    nlp, examples = _ner_pipeline(tiny_model_dir, backend="onnx")
    with pytest.raises(SpacyMlmError, match=r'backend = "onnx", precision = "fp32"\) and is inference only'):
        nlp.update(examples)


def test_missing_extra_names_it(tiny_model_dir, monkeypatch):
    real_import = builtins.__import__

    def without_onnxruntime(name, *args, **kwargs):
        if name.split(".")[0] in ("onnx", "onnxruntime"):
            raise ImportError(f"No module named '{name}'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_onnxruntime)
    with pytest.raises(SpacyMlmError, match=r"pip install spacy-mlm\[onnx\]"):
        encoder_nlp(tiny_model_dir, backend="onnx")


def _optimize(*args):
    from typer.testing import CliRunner

    from spacy_mlm.cli import app

    result = CliRunner().invoke(app, ["optimize", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.output


def test_optimize_command_keeps_the_other_encoder_settings(tiny_model_dir, tmp_path):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    torch_bf16 = {"@architectures": "spacy_mlm.HFEncoder.v2", "path": str(tiny_model_dir), "precision": "bf16", "overlap": 64}
    nlp.add_pipe("mlm_encoder", name="encoder", config={"model": torch_bf16})
    nlp.add_pipe("mlm_ner", name="ner")
    nlp.initialize(lambda: [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in NER_DATA])
    nlp.to_disk(tmp_path / "bf16")
    sample = tmp_path / "sample.txt"
    sample.write_text("\n".join(TEXTS), encoding="utf8")
    output = _optimize(tmp_path / "bf16", tmp_path / "int8", "--keep-fp32-layers", "-1", "--sample", sample)
    assert "encoder: layers kept in fp32: -1" in output and "same_entities: 1.0000" in output
    model = spacy.load(tmp_path / "int8").config["components"]["encoder"]["model"]
    assert (model["@architectures"], model["backend"], model["precision"], model["fp32_layers"], model["overlap"]) == (
        "spacy_mlm.HFEncoder.v2", "onnx", "int8", [-1], 64)
    assert "int8" not in (tmp_path / "bf16" / "config.cfg").read_text()


def test_optimized_pair_classifier_round_trip(tiny_model_dir, tmp_path, monkeypatch):
    """An mlm_textcat over sentence pairs (segment ids) through `optimize
    --calibrate`: the saved graph takes the segment ids, loads without export and
    classifies pairs as the original does."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", name="encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat", name="nli")
    labels = ["entailment", "neutral", "contradiction"]
    pairs = [("A cat sleeps .", "A cat rests ."), ("A cat .", "A dog ."), ("It rains .", "It is dry .")]
    examples = [
        Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {l: float(l == label) for l in labels}})
        for (a, b), label in zip(pairs, labels)
    ]
    nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples)
    nlp.to_disk(tmp_path / "torch")
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS[:2]), encoding="utf8")
    # an unreachable cosine keeps every layer in fp32
    output = _optimize(tmp_path / "torch", tmp_path / "int8", "--calibrate", texts, "--min-cosine", "1.01")
    assert "encoder: layers kept in fp32: 0, 1" in output and "same_top_category: 1.0000" in output

    monkeypatch.setattr(encoder_module, "export_backbone", lambda *a, **k: pytest.fail("spacy.load exported again"))
    loaded = spacy.load(tmp_path / "int8")
    graph = loaded.get_pipe("encoder").model.attrs["onnx"]
    assert "token_type_ids" in graph.inputs and graph.settings["fp32_layers"] == [0, 1]
    expected = spacy_mlm.classify_pairs(nlp, pairs)
    for got, want in zip(spacy_mlm.classify_pairs(loaded, pairs), expected):
        assert got == pytest.approx(want, abs=1e-4)


def test_optimized_vectors_pipeline_keeps_every_layer(tiny_model_dir, tmp_path):
    """mlm_vectors reading a lower layer: `optimize --precision fp32` exports the
    hidden states of every layer and the token vectors stay torch's."""
    from spacy_mlm.vectors_pipeline import make_vectors_pipeline

    nlp = make_vectors_pipeline(tiny_model_dir, layer=0)
    nlp.to_disk(tmp_path / "vectors")
    output = _optimize(tmp_path / "vectors", tmp_path / "onnx", "--precision", "fp32")
    assert "encoder_cosine: 1.0000" in output and "layers kept in fp32" not in output
    loaded = spacy.load(tmp_path / "onnx")
    assert loaded.get_pipe("mlm_encoder").model.attrs["onnx"].settings["output_hidden_states"]
    for before, after in zip(nlp.pipe(TEXTS[:2]), loaded.pipe(TEXTS[:2])):
        np.testing.assert_allclose([t.vector for t in after], [t.vector for t in before], atol=1e-4)
        assert after[0].similarity(after[1]) == pytest.approx(before[0].similarity(before[1]), abs=1e-4)


def test_an_export_that_fails_names_the_family(tiny_model_dir, monkeypatch):
    def cannot_trace(*args, **kwargs):
        raise RuntimeError("unsupported operator")

    monkeypatch.setattr(onnx_backbone.torch.onnx, "export", cannot_trace)
    with pytest.raises(SpacyMlmError, match="'bert': BertModel cannot be exported to ONNX .*unsupported operator.*"
                                            "backend = \"torch\""):
        encoder_nlp(tiny_model_dir, backend="onnx")


def test_sessions_leave_add_and_layer_norm_unfused(tiny_model_dir, tmp_path, monkeypatch):
    """ONNX Runtime's SkipLayerNormalization kernel ran slower than the Add and
    LayerNormalization it fuses (bench/onnx_session.py), so the backbone's
    sessions leave them apart; the same int8 graph under every fusion does fuse them."""
    import onnxruntime as ort

    hf_model = encoder_module.get_hf_model(encoder_nlp(tiny_model_dir).get_pipe("mlm_encoder").model)
    graph = onnx_backbone.quantize_int8(onnx_backbone.export_backbone(hf_model, type_ids=True, hidden_states=False))
    real = ort.SessionOptions
    saved = tmp_path / "optimized.onnx"

    def saving_options():
        options = real()
        options.optimized_model_filepath = str(saved)
        return options

    monkeypatch.setattr(ort, "SessionOptions", saving_options)

    def fused_ops():
        return Counter(node.op_type for node in onnx.load(str(saved)).graph.node)

    onnx_backbone.OnnxBackbone(graph)
    ours = fused_ops()
    assert ours["SkipLayerNormalization"] == 0 and ours["LayerNormalization"] > 0
    options = saving_options()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    assert fused_ops()["SkipLayerNormalization"] > 0
