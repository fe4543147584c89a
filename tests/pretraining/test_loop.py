import json
import logging
from collections import Counter

import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.engine.checkpoint import load_training_state
from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.data import MaskingSettings
from spacy_mlm.pretraining.loop import pretrain
from spacy_mlm.pretraining.masking import word_index
from spacy_mlm.testing import SAMPLE_TEXT

from .conftest import tiny_overrides


def run(tmp_path, corpus, source, name="out", resume=False, **extra):
    config = load_pretraining_config(None, tiny_overrides(corpus, source, **extra))
    out = tmp_path / name
    pretrain(config, out, resume=resume)
    return out, [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_run_writes_model_checkpoints_curves_and_learns(pretrained_dir):
    history = [json.loads(line) for line in (pretrained_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [row for row in history if "eval_loss" in row]
    assert [row["step"] for row in evals] == [0, 10, 20]
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"] - 0.3
    assert evals[-1]["eval_perplexity"] == pytest.approx(np.exp(evals[-1]["eval_loss"]), rel=1e-6)
    assert np.mean([r["loss"] for r in history[-5:]]) < np.mean([r["loss"] for r in history[1:6]])
    assert (pretrained_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in (pretrained_dir / "checkpoints").glob("step-*")) == ["step-00000010", "step-00000020"]
    assert (pretrained_dir / "config.cfg").exists()
    state = load_training_state(pretrained_dir / "checkpoints" / "step-00000020")  # tensors and plain values only
    assert state["step"] == 20 and state["history"] == history and isinstance(state["rng"][0]["cpu"], torch.Tensor)
    assert state["rng"][0]["cuda"] is None  # a CPU run has no CUDA generator state
    lrs = [row["lr"] for row in history if "lr" in row]
    assert lrs[0] == pytest.approx(5e-3) and lrs[-1] == pytest.approx(0.0)  # warmup 1, then linear decay to 0


def test_output_loads_in_transformers_spacy_transformers_and_our_encoder(pretrained_dir):
    import spacy

    model_dir = pretrained_dir / "model"
    mlm = AutoModelForMaskedLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert mlm.get_output_embeddings().weight is mlm.get_input_embeddings().weight
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        assert any(key.startswith("cls.predictions.transform") for key in f.keys())
    enc = tokenizer("the pond lies in a quiet wood", return_tensors="pt")
    assert mlm(**enc).logits.shape[-1] == len(tokenizer)

    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {
        "@architectures": "spacy-transformers.TransformerModel.v3", "name": str(model_dir),
        "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 24, "stride": 16}}})
    nlp.initialize()
    doc = nlp("The pond lies in a quiet wood.")
    assert doc._.trf_data.tensors[0].shape[-1] == mlm.config.hidden_size

    import spacy_mlm  # noqa: F401

    ours = spacy.blank("en")
    ours.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir)}})
    ours.initialize()
    doc = ours("The pond lies in a quiet wood.")
    assert doc._.mlm_encoding.token_vectors().shape == (len(doc), mlm.config.hidden_size)


def test_accumulation_gives_the_same_steps(tmp_path, corpus_file, still_model_dir):
    _, one = run(tmp_path, corpus_file, still_model_dir, "one", **{"pretraining.eval_every": 0})
    _, two = run(tmp_path, corpus_file, still_model_dir, "two", **{"pretraining.eval_every": 0, "pretraining.grad_accumulation_steps": 2})
    np.testing.assert_allclose([r["loss"] for r in one], [r["loss"] for r in two], rtol=1e-4)


def test_history_has_every_step_however_seldom_the_loop_reads_the_sums(tmp_path, corpus_file, still_model_dir):
    """The step sums stay on the model's device and are read every log_every
    steps (or to evaluate, checkpoint, stop): the rows are the same as reading every step."""
    settings = {"pretraining.eval_every": 0, "pretraining.checkpoint_every": 0, "pretraining.max_steps": 7}
    _, every = run(tmp_path, corpus_file, still_model_dir, "every", **settings)
    _, seldom = run(tmp_path, corpus_file, still_model_dir, "seldom", **{**settings, "pretraining.log_every": 3})
    assert [row["step"] for row in seldom] == list(range(1, 8))
    assert seldom == every
    assert len({row["loss"] for row in seldom}) == 7  # each row its own step's sums


def test_a_source_without_mlm_head_starts_the_same_with_the_same_seed(tmp_path, corpus_file, still_model_dir):
    """Like the packaged MiniLM: the head HF initialises at load time comes from the seed."""
    from transformers import AutoModel

    headless = tmp_path / "headless"
    AutoModel.from_pretrained(str(still_model_dir)).save_pretrained(str(headless))
    AutoTokenizer.from_pretrained(str(still_model_dir)).save_pretrained(str(headless))
    torch.manual_seed(1)
    _, first = run(tmp_path, corpus_file, headless, "first", **{"pretraining.eval_every": 4})
    torch.manual_seed(2)  # whatever ran before in the process
    _, second = run(tmp_path, corpus_file, headless, "second", **{"pretraining.eval_every": 4})
    assert [r["loss"] for r in first if "loss" in r] == [r["loss"] for r in second if "loss" in r]
    assert [r.get("eval_loss") for r in first] == [r.get("eval_loss") for r in second]


def test_head_only_steps_train_a_new_head_before_the_encoder(tmp_path, corpus_file, still_model_dir):
    """A source without an MLM head (as MiniLM): during head_only_steps the
    encoder and its (tied) embeddings keep the source's weights while the new
    head learns; after them the encoder trains too."""
    from transformers import AutoModel

    from spacy_mlm.models.hf import load_mlm_model

    headless = tmp_path / "headless"
    AutoModel.from_pretrained(str(still_model_dir)).save_pretrained(str(headless))
    AutoTokenizer.from_pretrained(str(still_model_dir)).save_pretrained(str(headless))
    out, _ = run(tmp_path, corpus_file, headless, **{"pretraining.head_only_steps": 2,
                                                          "pretraining.eval_every": 0})
    torch.manual_seed(0)  # the run's seed: the head it started from
    start = load_mlm_model(str(headless)).model.state_dict()
    after_head = AutoModelForMaskedLM.from_pretrained(out / "checkpoints" / "step-00000002" / "model").state_dict()
    final = AutoModelForMaskedLM.from_pretrained(out / "model").state_dict()
    encoder = [k for k in start if k.startswith("bert.")]
    head = [k for k in start if k.startswith("cls.predictions.transform")]
    assert encoder and head and "bert.embeddings.word_embeddings.weight" in encoder
    assert all(torch.equal(after_head[k], start[k]) for k in encoder)
    assert all(not torch.equal(after_head[k], start[k]) for k in head if k.endswith("weight"))
    assert not torch.equal(final["bert.encoder.layer.0.attention.self.query.weight"],
                           start["bert.encoder.layer.0.attention.self.query.weight"])
    assert not torch.equal(final["bert.embeddings.word_embeddings.weight"], start["bert.embeddings.word_embeddings.weight"])


@pytest.mark.parametrize("objective", ["mlm", "rtd"])
def test_bf16_runs_under_autocast_and_saves_fp32_weights(tmp_path, corpus_file, still_model_dir, objective):
    """precision = "bf16": the same steps as fp32 up to bfloat16 rounding, and
    the saved model (weights, and so every checkpoint) stays float32."""
    extra = {"pretraining.objective": objective, "pretraining.eval_every": 4}
    _, fp32 = run(tmp_path, corpus_file, still_model_dir, "fp32", **extra)
    out, bf16 = run(tmp_path, corpus_file, still_model_dir, "bf16", **extra, **{"pretraining.precision": "bf16"})
    assert [r["step"] for r in bf16] == [r["step"] for r in fp32]
    assert all(np.isfinite(r["loss"]) for r in bf16 if "loss" in r)
    first = next(r for r in fp32 if r["step"] == 1)
    assert next(r for r in bf16 if r["step"] == 1)["loss"] == pytest.approx(first["loss"], rel=0.05)
    assert bf16[-1]["eval_loss"] == pytest.approx(fp32[-1]["eval_loss"], rel=0.1)
    assert bf16[-1]["eval_loss"] != fp32[-1]["eval_loss"]  # autocast was on
    from safetensors import safe_open

    with safe_open(str(out / "model" / "model.safetensors"), "pt") as weights:
        assert {weights.get_tensor(key).dtype for key in weights.keys()} == {torch.float32}


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "unigram"])
def test_from_scratch_trains_a_tokenizer(tmp_path, corpus_file, kind):
    out, history = run(tmp_path, corpus_file, None, **{"pretraining.scratch.tokenizer": kind, "pretraining.max_steps": 2})
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    assert tokenizer.mask_token is not None and 50 < len(tokenizer) <= 300
    model = AutoModelForMaskedLM.from_pretrained(out / "model")
    assert model.config.vocab_size == len(tokenizer)
    assert len(history) == 3 and all(np.isfinite(r.get("loss", 0)) for r in history)


def test_next_sentence_and_whole_word(tmp_path, tiny_model_dir, monkeypatch):
    """The batches the run masks: every word's pieces are chosen together (some
    words of several pieces among them), and they hold sentence pairs, some of
    them random (NSP label 1), with a second segment; the NSP loss is logged."""
    # plural words ("cats": cat ##s) split into pieces in the tiny vocab, the sample text's words do not
    plural = [" ".join(word.rstrip(".") + "s" for word in line.split()) for line in SAMPLE_TEXT]
    corpus_file = tmp_path / "plural.txt"
    corpus_file.write_text("\n\n".join("\n".join(plural[i:i + 4]) for i in range(0, len(plural), 4)), encoding="utf8")
    batches = []
    apply = MaskingSettings.apply

    def recording(self, batch, rng):
        batches.append((batch, apply(self, batch, rng)))
        return batches[-1][1]

    monkeypatch.setattr(MaskingSettings, "apply", recording)
    out, history = run(tmp_path, corpus_file, tiny_model_dir, **{
        "pretraining.next_sentence": True, "pretraining.masking.whole_word": True, "pretraining.max_steps": 2})
    chosen_words = Counter()  # how many pieces each chosen word had
    for batch, masked in batches:
        words, content = word_index(batch.word_starts), ~batch.special_mask.astype(bool)
        for row in range(len(words)):
            for word in np.unique(words[row][content[row]]):
                chosen = masked.chosen[row][content[row] & (words[row] == word)]
                assert chosen.all() or not chosen.any(), (row, word, chosen)
                chosen_words[len(chosen)] += bool(chosen.all())
    assert sum(n for pieces, n in chosen_words.items() if pieces > 1) > 0, chosen_words
    labels = np.concatenate([batch.nsp_labels for batch, _ in batches])
    assert set(labels.tolist()) == {0, 1} and all(batch.token_type_ids.any() for batch, _ in batches)
    assert np.isfinite(history[-1]["nsp_loss"]) and history[-1]["nsp_loss"] > 0
    assert (out / "model" / "nsp_head.safetensors").exists()


def test_several_languages_log_their_shares(tmp_path, corpus_file, tiny_model_dir, caplog):
    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(json.dumps({"text": f"The cat sleeps.\nDay {i}."}) for i in range(6)), encoding="utf8")
    settings = tiny_overrides(corpus_file, tiny_model_dir, **{"pretraining.max_steps": 1, "pretraining.eval_every": 0})
    del settings["paths.train"]
    settings["pretraining.corpus.train"] = {"en": str(corpus_file), "xx": str(small)}
    with caplog.at_level(logging.INFO):
        pretrain(load_pretraining_config(None, settings), tmp_path / "multi")
    line = next(r.getMessage() for r in caplog.records if "data share" in r.getMessage())
    assert "en:" in line and "xx:" in line and "sampled" in line


def test_refuses_to_overwrite_and_rejects_bad_settings(tmp_path, corpus_file, tiny_model_dir):
    run(tmp_path, corpus_file, tiny_model_dir, **{"pretraining.max_steps": 2, "pretraining.eval_every": 0})
    with pytest.raises(SpacyMlmError, match="--resume"):
        run(tmp_path, corpus_file, tiny_model_dir, **{"pretraining.max_steps": 2})
    with pytest.raises(SpacyMlmError, match="exceeds"):
        run(tmp_path, corpus_file, tiny_model_dir, "long", **{"pretraining.max_length": 1000})
    with pytest.raises(SpacyMlmError, match="divisible"):
        run(tmp_path, corpus_file, tiny_model_dir, "odd", **{"pretraining.batch_size": 7, "pretraining.grad_accumulation_steps": 2})


def test_max_time_stops_and_checkpoints(tmp_path, corpus_file, tiny_model_dir):
    out, history = run(tmp_path, corpus_file, tiny_model_dir, **{"pretraining.max_steps": 1000, "pretraining.max_time": 1e-9,
                                                                  "pretraining.checkpoint_every": 500})
    assert history[-1]["step"] == 1
    assert (out / "checkpoints" / "step-00000001").exists()
