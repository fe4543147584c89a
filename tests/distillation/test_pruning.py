"""Narrowing a student (`[distillation.student] intermediate_size, attention_heads`):
what adds nothing is what goes, the narrowed model reloads with its widths,
families that cannot be narrowed are refused by name, and a narrowed student
is an ordinary pipeline down to its int8 copy."""
import pytest
import spacy
import torch
from typer.testing import CliRunner

from spacy_mlm.cli import app
from spacy_mlm.distillation.pruning import narrow
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.models.encoder import get_hf_model
from spacy_mlm.models.hf import load_backbone, save_backbone
from spacy_mlm.testing import SAMPLE_TEXT, make_tiny_family

from .conftest import distill_config

HELD_OUT = ["Anna Lopez flew to Geneva .", "Peter Berg works in Concord on Monday ."]
# family -> (layers, the feed-forward map out of the intermediate width, the attention output projection)
NAMES = {
    "bert": ("encoder.layer", "output.dense", "attention.output.dense"),
    "roberta": ("encoder.layer", "output.dense", "attention.output.dense"),
    "distilbert": ("transformer.layer", "ffn.lin2", "attention.out_lin"),
}


def outputs(model, tokenizer, texts=HELD_OUT):
    with torch.no_grad():
        return model.eval()(**tokenizer(texts, padding=True, return_tensors="pt")).last_hidden_state


@pytest.fixture(scope="module", params=sorted(NAMES))
def family_dir(request, tmp_path_factory):
    return request.param, make_tiny_family(request.param, tmp_path_factory.mktemp(request.param))


def test_units_and_heads_that_add_nothing_are_the_ones_removed(family_dir):
    """Zero a layer's output columns of some feed-forward units and of one head:
    they add nothing to the layer's output, so they (and only they) are removed,
    and the narrowed model computes exactly what the whole one did."""
    family, path = family_dir
    model, tokenizer = load_backbone(path)
    layers_name, down_name, output_name = NAMES[family]
    silent_units = [[0, 5, 9, 33, 40, 63], [1, 2, 3, 50, 51, 60]]
    silent_heads = [1, 0]
    with torch.no_grad():
        for index, layer in enumerate(model.get_submodule(layers_name)):
            layer.get_submodule(down_name).weight[:, silent_units[index]] = 0
            projection = layer.get_submodule(output_name).weight
            width = projection.shape[1] // 2
            projection[:, silent_heads[index] * width:(silent_heads[index] + 1) * width] = 0
    before = outputs(model, tokenizer)
    inner = model.get_submodule(layers_name)[0].get_submodule(down_name).in_features
    removed = narrow(model, tokenizer, SAMPLE_TEXT, intermediate_size=inner - 6, attention_heads=1)
    assert removed == {"units": silent_units, "heads": [[1], [0]]}
    attribute = "hidden_dim" if family == "distilbert" else "intermediate_size"
    assert getattr(model.config, attribute) == inner - 6
    assert model.config.pruned_heads == {0: [1], 1: [0]}
    torch.testing.assert_close(outputs(model, tokenizer), before, atol=1e-5, rtol=1e-5)


def test_the_units_kept_are_those_that_add_the_most(family_dir):
    """Scale some units' output columns up a hundredfold: they add the most and stay."""
    family, path = family_dir
    model, tokenizer = load_backbone(path)
    layers_name, down_name, _ = NAMES[family]
    loud = [4, 17, 30, 45]
    with torch.no_grad():
        for layer in model.get_submodule(layers_name):
            layer.get_submodule(down_name).weight[:, loud] *= 100
    inner = model.get_submodule(layers_name)[0].get_submodule(down_name).in_features
    removed = narrow(model, tokenizer, SAMPLE_TEXT, intermediate_size=4, attention_heads=None)
    for lost in removed["units"]:
        assert sorted(set(range(inner)) - set(lost)) == loud


def test_a_narrowed_model_saves_and_reloads_with_its_widths(family_dir, tmp_path):
    family, path = family_dir
    model, tokenizer = load_backbone(path)
    narrow(model, tokenizer, SAMPLE_TEXT, intermediate_size=16, attention_heads=1)
    expected = outputs(model, tokenizer)
    save_backbone(model, tokenizer, tmp_path / "narrow")
    again, tokenizer = load_backbone(tmp_path / "narrow")
    assert sum(p.numel() for p in again.parameters()) == sum(p.numel() for p in model.parameters())
    torch.testing.assert_close(outputs(again, tokenizer), expected, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("family,units,heads,message", [
    ("albert", 16, None, "shares its layers' weights"),
    ("modernbert", 16, None, "no one plain feed-forward pair"),
    ("deberta-v2", None, 1, "cannot prune the heads of a deberta-v2 model"),
    ("mpnet", None, 1, "cannot prune the heads of a mpnet model"),  # HF's prune_heads leaves it unable to run
    ("bert", 65, None, "intermediate_size = 65: the student's feed-forward width is 64"),
    ("bert", None, 3, "attention_heads = 3: the student's layers have 2 heads"),
])
def test_what_cannot_be_narrowed_is_refused_by_name(family, units, heads, message, tmp_path):
    model, tokenizer = load_backbone(make_tiny_family(family, tmp_path / family))
    with pytest.raises(SpacyMlmError, match=message):
        narrow(model, tokenizer, SAMPLE_TEXT, intermediate_size=units, attention_heads=heads)


def test_narrowing_needs_texts(family_dir):
    model, tokenizer = load_backbone(family_dir[1])
    with pytest.raises(SpacyMlmError, match="there are none"):
        narrow(model, tokenizer, [], intermediate_size=16, attention_heads=None)


def test_a_narrowed_student_is_an_ordinary_pipeline(ner_teacher, texts_file, tmp_path):
    runner = CliRunner()
    config = distill_config(tmp_path / "d.cfg", ner_teacher, texts_file, max_steps=3,
                            **{"student.layers": [1, 3], "student.intermediate_size": 24,
                               "student.attention_heads": 1})
    result = runner.invoke(app, ["distill", str(config), str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    student = spacy.load(tmp_path / "out" / "model")
    hf = get_hf_model(student.get_pipe("encoder").model)
    assert (hf.config.num_hidden_layers, hf.config.intermediate_size) == (2, 24)
    assert {layer: len(heads) for layer, heads in hf.config.pruned_heads.items()} == {0: 1, 1: 1}
    expected = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in student.pipe(HELD_OUT)]
    again = spacy.blank("en").from_config(student.config).from_bytes(student.to_bytes())
    assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in again.pipe(HELD_OUT)] == expected
    result = runner.invoke(app, ["optimize", str(tmp_path / "out" / "model"), str(tmp_path / "int8")])
    assert result.exit_code == 0, result.output
    int8 = spacy.load(tmp_path / "int8")
    assert all(doc.has_annotation("ENT_IOB") for doc in int8.pipe(HELD_OUT))
