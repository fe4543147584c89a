"""`spacy_mlm distill` end to end on tiny teachers: the student learns the
teacher's outputs, keeps the layers it names, averages an ensemble, resumes
exactly, and is an ordinary pipeline (saved, loaded, serialized, n_process=2,
optimize --precision int8, evaluate-ner)."""
import json

import numpy as np
import pytest
import spacy
import torch
from typer.testing import CliRunner

from spacy_mlm.cli import app
from spacy_mlm.distillation import loop as distill_loop
from spacy_mlm.distillation.config import load_distillation_config
from spacy_mlm.distillation.loop import distill
from spacy_mlm.distillation.soft_targets import tag_kl
from spacy_mlm.distillation.student import build_student, every_kth_layer, layer_student
from spacy_mlm.distillation.teachers import Teachers
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.models.encoder import get_hf_model
from spacy_mlm.models.torch_head import torch_module
from spacy_mlm.testing import SAMPLE_TEXT

from .conftest import NER, distill_config, train_teacher

ALL_WIDTHS = {"encoder": None, "intermediate_size": None, "attention_heads": None}  # [distillation.student]
HELD_OUT = ["Anna Lopez flew to Geneva .", "Peter Berg works in Concord .", "The bank in Oslo opened on Monday ."]


def run(tmp_path, teacher, texts, name="out", resume=False, **settings):
    config = load_distillation_config(distill_config(tmp_path / f"{name}.cfg", teacher, texts, **settings))
    return distill(config, tmp_path / name, resume=resume, quiet=True)


def kl_to_teacher(student_path, teacher_path, texts=HELD_OUT) -> float:
    """Mean per-token KL(teacher || student) of the tag distributions (temperature 1) on `texts`."""
    targets = Teachers([str(teacher_path)], "fp32", 1.0, hidden=False).outputs(texts)
    predicted = Teachers([str(student_path)], "fp32", 1.0, hidden=False).outputs(texts)
    total = [tag_kl(t["ner"], p["ner"].clamp(min=1e-30).log(), torch.ones(len(t["ner"])), 1.0)
             for t, p in zip(targets, predicted)]
    return float(torch.stack(total).mean())


def state(path):
    """Every torch weight of a saved student pipeline, by name."""
    nlp = spacy.load(path)
    weights = {f"encoder.{k}": v for k, v in get_hf_model(nlp.get_pipe("encoder").model).state_dict().items()}
    for name in nlp.pipe_names[1:]:
        weights.update({f"{name}.{k}": v for k, v in torch_module(nlp.get_pipe(name).model).state_dict().items()})
    return weights


def test_every_kth_layer_keeps_the_top():
    assert every_kth_layer(6, 2) == [1, 3, 5]
    assert every_kth_layer(6, 3) == [2, 5]
    assert every_kth_layer(4, 1) == [0, 1, 2, 3]


def test_layer_student_copies_the_named_layers(ner_teacher):
    teacher = get_hf_model(spacy.load(ner_teacher).get_pipe("encoder").model)
    student = layer_student(teacher, [0, 3])
    assert student.config.num_hidden_layers == 2
    for i, kept in enumerate([0, 3]):
        theirs, ours = teacher.encoder.layer[kept].state_dict(), student.encoder.layer[i].state_dict()
        assert list(ours) == list(theirs)
        for key in ours:
            assert torch.equal(ours[key], theirs[key]), (i, key)
    assert not torch.equal(student.encoder.layer[1].attention.self.query.weight,
                           teacher.encoder.layer[1].attention.self.query.weight)
    assert torch.equal(student.embeddings.word_embeddings.weight, teacher.embeddings.word_embeddings.weight)
    with pytest.raises(SpacyMlmError, match="the teacher has layers 0 to 3"):
        layer_student(teacher, [1, 4])


def test_the_student_does_not_keep_the_teachers_calibration(ner_teacher, tmp_path):
    calibrated = tmp_path / "calibrated_teacher"
    nlp = spacy.load(ner_teacher)
    nlp.get_pipe("ner").cfg.update(temperature=0.7, score_scaling=[1.3, -0.2])
    nlp.to_disk(calibrated)
    student = build_student(str(calibrated), {**ALL_WIDTHS, "layers": [1]}, tmp_path / "student")
    assert student.get_pipe("ner").cfg["temperature"] == 1.0
    assert student.get_pipe("ner").cfg["score_scaling"] == [1.0, 0.0]
    assert spacy.load(calibrated).get_pipe("ner").cfg["temperature"] == pytest.approx(0.7)  # the teacher is as it was


@pytest.mark.parametrize("crf", [False, True])
def test_the_students_kl_to_the_teacher_falls(deep_model_dir, texts_file, tmp_path, crf):
    teacher = train_teacher(deep_model_dir, tmp_path / "teacher", "ner", crf=crf, updates=30)
    build_student(str(teacher), {**ALL_WIDTHS, "layers": [3]}, tmp_path / "start").to_disk(tmp_path / "start/model")
    # 60 steps: at 30 the KL had fallen to 0.1-0.5 of the start over seeds 0-2, at 60 to 0.03-0.14
    after = run(tmp_path, teacher, texts_file, "after", max_steps=60, temperature=1.0, **{"student.layers": [3]})
    texts = texts_file.read_text().splitlines()
    assert kl_to_teacher(after, teacher, texts) < 0.3 * kl_to_teacher(tmp_path / "start/model", teacher, texts)
    assert spacy.load(after).get_pipe("ner").model.attrs["crf"] is crf


def test_several_teachers_give_the_mean(deep_model_dir, ner_teacher, tmp_path):
    other = train_teacher(deep_model_dir, tmp_path / "other", "ner", seed=1, crf=True)
    both = Teachers([str(ner_teacher), str(other)], "fp32", 2.0, hidden=True).outputs(HELD_OUT)
    first = Teachers([str(ner_teacher)], "fp32", 2.0, hidden=True).outputs(HELD_OUT)
    second = Teachers([str(other)], "fp32", 2.0, hidden=True).outputs(HELD_OUT)
    for mean, a, b in zip(both, first, second):
        assert not torch.allclose(a["ner"], b["ner"], atol=1e-3)
        for key in ("ner", "hidden"):
            torch.testing.assert_close(mean[key], (a[key] + b[key]) / 2, atol=1e-6, rtol=1e-5)


def test_teachers_with_other_labels_are_refused(deep_model_dir, ner_teacher, tmp_path):
    textcat = train_teacher(deep_model_dir, tmp_path / "textcat", "textcat")
    with pytest.raises(SpacyMlmError, match="other components or labels"):
        Teachers([str(ner_teacher), str(textcat)], "fp32", 1.0, hidden=False)


def test_resume_after_an_interruption_continues_exactly(ner_teacher, texts_file, tmp_path, monkeypatch):
    settings = dict(max_steps=6, checkpoint_every=2, hidden_weight=0.5, cache_teacher=True,
                    **{"student.layers": [1, 3]})
    whole = run(tmp_path, ner_teacher, texts_file, "whole", **settings)
    calls = {"n": 0}
    real = distill_loop.student_gradients

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:  # in step 4, after the checkpoint of step 2 and one more step
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(distill_loop, "student_gradients", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, ner_teacher, texts_file, "parts", **settings)
    monkeypatch.setattr(distill_loop, "student_gradients", real)
    with pytest.raises(SpacyMlmError, match="already has checkpoints"):
        run(tmp_path, ner_teacher, texts_file, "parts", **settings)
    with pytest.raises(SpacyMlmError, match="distillation.temperature: 2.0 -> 3.0"):
        run(tmp_path, ner_teacher, texts_file, "parts", resume=True, **{**settings, "temperature": 3.0})
    resumed = run(tmp_path, ner_teacher, texts_file, "parts", resume=True, **settings)
    a, b = state(whole), state(resumed)
    assert list(a) == list(b)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert not torch.equal(a["encoder.encoder.layer.0.attention.self.query.weight"],
                           state(ner_teacher)["encoder.encoder.layer.1.attention.self.query.weight"])
    history = [json.loads(line) for line in (tmp_path / "parts" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in history] == [1, 2, 3, 4, 5, 6]


def test_textcat_and_gold_data(deep_model_dir, texts_file, tmp_path):
    from spacy.tokens import DocBin
    from spacy.training import Example

    teacher = train_teacher(deep_model_dir, tmp_path / "teacher", "textcat")
    nlp = spacy.load(teacher)
    gold = [Example.from_dict(nlp.make_doc(text), {"cats": {"POS": 1.0, "NEG": 0.0}}).reference
            for text in SAMPLE_TEXT[:4]]
    DocBin(docs=gold, store_user_data=True).to_disk(tmp_path / "gold.spacy")
    student = run(tmp_path, teacher, texts_file, "out", gold=str(tmp_path / "gold.spacy"), max_steps=4,
                  **{"student.layers": [3]})
    history = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert any("textcat_gold" in row for row in history) and all("textcat_soft" in row for row in history)
    cats = spacy.load(student)("A man is playing a guitar.").cats
    assert set(cats) == {"POS", "NEG"} and abs(sum(cats.values()) - 1) < 1e-5


def test_labelled_docs_keep_their_tokens(ner_teacher, texts_file, tmp_path):
    """A .spacy Doc without spacing (CoNLL's) keeps its words as the student's
    tokens (spaCy's Corpus); the teachers must read those tokens too."""
    from spacy.tokens import Doc, DocBin

    words = ["Anna", "Berg", "works", "on", "state-of-the-art", "tools", "in", "Oslo", "."]
    doc = Doc(spacy.blank("en").vocab, words=words, ents=["B-PER", "I-PER"] + ["O"] * 5 + ["B-LOC", "O"])
    assert len(spacy.blank("en").make_doc(doc.text)) != len(words)
    DocBin(docs=[doc] * 4).to_disk(tmp_path / "gold.spacy")
    student = run(tmp_path, ner_teacher, texts_file, "out", gold=str(tmp_path / "gold.spacy"), max_steps=3,
                  batch_size=8, **{"student.layers": [3]})
    history = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert any("ner_gold" in row for row in history)
    assert spacy.load(student)("Anna Berg works in Oslo.").has_annotation("ENT_IOB")


def test_the_student_is_an_ordinary_pipeline(ner_teacher, texts_file, tmp_path):
    runner = CliRunner()
    config = distill_config(tmp_path / "d.cfg", ner_teacher, texts_file, **{"student.keep_every": 2})
    result = runner.invoke(app, ["distill", str(config), str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    student = spacy.load(tmp_path / "out" / "model")
    assert get_hf_model(student.get_pipe("encoder").model).config.num_hidden_layers == 2
    texts = [text for text, _ in NER] + HELD_OUT
    expected = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in student.pipe(texts)]
    again = spacy.blank("en").from_config(student.config).from_bytes(student.to_bytes())
    assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in again.pipe(texts)] == expected
    two = [[(e.start, e.end, e.label_) for e in doc.ents] for doc in student.pipe(texts, n_process=2, batch_size=2)]
    assert two == expected

    result = runner.invoke(app, ["optimize", str(tmp_path / "out" / "model"), str(tmp_path / "int8")])
    assert result.exit_code == 0, result.output
    conll = tmp_path / "dev.conll"
    conll.write_text("\n\n".join("\n".join(f"{w} O" for w in text.split()) for text in HELD_OUT) + "\n")
    for model in ("model", "int8"):
        path = tmp_path / "out" / model if model == "model" else tmp_path / model
        result = runner.invoke(app, ["evaluate-ner", str(path), str(conll), "--output", str(tmp_path / f"{model}.json")])
        assert result.exit_code == 0, result.output
        assert json.loads((tmp_path / f"{model}.json").read_text())["tp"] == 0
    result = runner.invoke(app, ["distill", str(config), str(tmp_path / "out"), "--quiet"])
    assert result.exit_code != 0 and "already has checkpoints" in result.output
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    result = runner.invoke(app, ["distill", str(config), str(tmp_path / "mine"), "--quiet"])
    assert result.exit_code != 0 and "not an earlier output of spacy_mlm distill" in result.output


def test_config_errors_name_the_setting(ner_teacher, texts_file, tmp_path):
    with pytest.raises(SpacyMlmError, match="unknown setting distillation.temprature"):
        load_distillation_config(distill_config(tmp_path / "a.cfg", ner_teacher, texts_file, temprature=2.0))
    with pytest.raises(SpacyMlmError, match="temperature must be above 0"):
        load_distillation_config(distill_config(tmp_path / "b.cfg", ner_teacher, texts_file, temperature=0.0))
    with pytest.raises(SpacyMlmError, match=r"give layers \(kept from the teacher\) or encoder, not both"):
        load_distillation_config(distill_config(tmp_path / "c.cfg", ner_teacher, texts_file,
                                                **{"student.layers": [0], "student.encoder": "x"}))


def test_another_encoder_needs_the_teachers_tokenizer(ner_teacher, texts_file, tmp_path):
    from spacy_mlm.testing import make_tiny_bert

    other = make_tiny_bert(tmp_path / "other", texts=["completely different words here"] * 3, num_layers=1)
    with pytest.raises(SpacyMlmError, match="vocabulary"):
        run(tmp_path, ner_teacher, texts_file, "out", **{"student.encoder": str(other)})
    same = make_tiny_bert(tmp_path / "same", num_layers=1, seed=3)  # the default vocabulary, as the teacher's
    student = run(tmp_path, ner_teacher, texts_file, "ok", max_steps=2, **{"student.encoder": str(same)})
    assert np.isfinite(kl_to_teacher(student, ner_teacher))


def test_the_shipped_config_is_what_init_config_writes(tmp_path):
    from pathlib import Path

    from spacy_mlm.training.config_templates import SHIPPED_DISTILLATION, render_shipped

    shipped = Path(__file__).resolve().parents[2] / "configs" / SHIPPED_DISTILLATION
    assert shipped.read_text(encoding="utf8") == render_shipped(SHIPPED_DISTILLATION)
    result = CliRunner().invoke(app, ["init-config", str(tmp_path / "d.cfg"), "--task", "distill"])
    assert result.exit_code == 0, result.output
    section = load_distillation_config(tmp_path / "d.cfg")["distillation"]
    assert section["temperature"] == 2.0 and section["student"]["keep_every"] == 2


def test_an_int8_teacher_runs_on_onnx_runtime(ner_teacher):
    teachers = Teachers([str(ner_teacher)], "int8", 2.0, hidden=False)
    encoder = teachers.pipelines[0].get_pipe("encoder").model
    assert (encoder.attrs["backend"], encoder.attrs["precision"]) == ("onnx", "int8")
    int8 = teachers.outputs(HELD_OUT)
    fp32 = Teachers([str(ner_teacher)], "fp32", 2.0, hidden=False).outputs(HELD_OUT)
    for a, b in zip(int8, fp32):
        torch.testing.assert_close(a["ner"].sum(dim=-1), torch.ones(len(a["ner"])), atol=1e-5, rtol=0)
        assert (a["ner"] - b["ner"]).abs().max() < 0.1


def test_the_teacher_cache_is_read_and_named_by_the_teachers_files(ner_teacher, texts_file, tmp_path, monkeypatch):
    import shutil

    from spacy_mlm.distillation import teachers as teachers_module

    teacher = shutil.copytree(ner_teacher, tmp_path / "teacher")
    run(tmp_path, teacher, texts_file, "first", max_steps=2, cache_teacher=True, **{"student.layers": [3]})
    cached = list((tmp_path / "first" / "teacher_cache").glob("*/step-*.safetensors"))
    assert len(cached) == 2
    computed = []
    real = teachers_module.Teachers.outputs
    monkeypatch.setattr(teachers_module.Teachers, "outputs",
                        lambda self, inputs: computed.append(len(inputs)) or real(self, inputs))
    shutil.copytree(tmp_path / "first" / "teacher_cache", tmp_path / "second" / "teacher_cache")
    run(tmp_path, teacher, texts_file, "second", max_steps=2, cache_teacher=True, **{"student.layers": [3]})
    assert computed == []  # the same teacher, texts and settings: every output from the cache
    (teacher / "ner" / "cfg").write_text((teacher / "ner" / "cfg").read_text() + " ")  # the teacher changed
    shutil.rmtree(tmp_path / "third", ignore_errors=True)
    shutil.copytree(tmp_path / "first" / "teacher_cache", tmp_path / "third" / "teacher_cache")
    run(tmp_path, teacher, texts_file, "third", max_steps=2, cache_teacher=True, **{"student.layers": [3]})
    assert computed == [4, 4]
