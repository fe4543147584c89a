"""Word-embedding rows stepped as they are used (models/row_adamw.py) give the
update of dense AdamW: the same weights, predictions and saved weights, with
decoupled weight decay, the global-norm clip, layer-wise learning-rate decay,
rows first touched at different steps and rows never touched."""
import pytest
import spacy
import torch
from spacy.training import Example
from thinc.api import Adam, registry

import spacy_mlm  # noqa: F401
from spacy_mlm.models.encoder import get_hf_model
from spacy_mlm.models.row_adamw import RowAdamW, use_sparse_word_gradients
from spacy_mlm.models.torch_stepper import TorchStepper, layer_lr_scales
from spacy_mlm.testing import FAMILIES, make_tiny_family

LR = [0.05, 0.03, 0.02, 0.04, 0.01, 0.02]  # a schedule: the decay factor changes from step to step
L2, CLIP, DECAY = 0.1, 0.5, 0.8
# rows first touched at steps 1, 2, 4; rows 40.. never; row 0 is padding (no gradient, looked up)
STEP_IDS = [[[1, 2, 3, 0]], [[2, 5, 6, 6]], [[1, 2, 3, 0]], [[7, 8, 9, 1]], [[5, 5, 5, 5]], [[9, 10, 1, 2]]]


class Tiny(torch.nn.Module):
    """Named like a transformer: word embeddings, two layers, a head."""

    def __init__(self, sparse: bool):
        super().__init__()
        torch.manual_seed(0)
        self.embeddings = torch.nn.ModuleDict({"word_embeddings": torch.nn.Embedding(50, 8, padding_idx=0,
                                                                                    sparse=sparse)})
        self.encoder = torch.nn.ModuleDict({"layer": torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))})
        self.head = torch.nn.Linear(8, 1)

    def forward(self, ids):
        x = self.embeddings["word_embeddings"](ids)
        for layer in self.encoder["layer"]:
            x = torch.tanh(layer(x))
        return self.head(x)


def optimizer(lr=LR, l2=L2):
    return registry.resolve({"o": {"@optimizers": "spacy_mlm.LayerDecayAdam.v2", "learn_rate": lr, "L2": l2,
                                   "grad_clip": CLIP, "layer_decay": DECAY}})["o"]


def dense_adamw(module):
    """torch's AdamW with the layers' learning rates, after clip_grad_norm_."""
    names = [n for n, _ in module.named_parameters()]
    scales = layer_lr_scales(names, DECAY)
    adamw = torch.optim.AdamW([{"params": [p], "lr": LR[0] * s} for p, s in zip(module.parameters(), scales)],
                              betas=(0.9, 0.999), eps=1e-8, weight_decay=L2)

    def step(i):
        torch.nn.utils.clip_grad_norm_(list(module.parameters()), CLIP)
        for group, scale in zip(adamw.param_groups, scales):
            group["lr"] = LR[i] * scale
        adamw.step()
        adamw.zero_grad(set_to_none=True)

    return step


def test_rows_stepped_lazily_equal_dense_adamw(tmp_path):
    ours, dense = Tiny(sparse=True), Tiny(sparse=False)
    stepper, thinc_optimizer, dense_step = TorchStepper(), optimizer(), dense_adamw(dense)
    for i, ids in enumerate(STEP_IDS):
        for module in (ours, dense):
            module(torch.tensor(ids)).sum().backward()
        assert ours.embeddings["word_embeddings"].weight.grad.is_sparse
        stepper.step(ours, thinc_optimizer)
        thinc_optimizer.step_schedules()
        dense_step(i)
    lazy = stepper._rows[id(ours.embeddings["word_embeddings"].weight)]
    assert lazy.pending != 1.0 and len(lazy.rows) == 10  # rows 0-3, 5-10: the rest waits for its decay
    # a prediction reads rows never touched (40-49) and touched ones: the same outputs
    ours.eval(), dense.eval()
    probe = torch.arange(50)[None, :]
    with torch.no_grad():
        torch.testing.assert_close(ours(probe), dense(probe), rtol=0, atol=1e-6)
    for (name, p), q in zip(ours.named_parameters(), dense.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=1e-6, msg=name)
    assert not torch.equal(ours.embeddings["word_embeddings"].weight[40:], Tiny(sparse=True).embeddings[
        "word_embeddings"].weight[40:]), "rows never touched kept their start: no weight decay"


def test_saving_writes_decayed_rows_and_loading_replaces_them(tmp_path):
    ours, dense = Tiny(sparse=True), Tiny(sparse=False)
    stepper, thinc_optimizer, dense_step = TorchStepper(), optimizer(), dense_adamw(dense)
    for i, ids in enumerate(STEP_IDS[:3]):
        for module in (ours, dense):
            module(torch.tensor(ids)).sum().backward()
        stepper.step(ours, thinc_optimizer)
        thinc_optimizer.step_schedules()
        dense_step(i)
    saved = {k: v.clone() for k, v in ours.state_dict().items()}  # no forward since the last step
    for key, value in dense.state_dict().items():
        torch.testing.assert_close(saved[key], value, rtol=0, atol=1e-6, msg=key)
    # loading weights into a module with decay pending: the loaded rows are not decayed again
    for i, ids in enumerate(STEP_IDS[3:], start=3):
        ours(torch.tensor(ids)).sum().backward()
        stepper.step(ours, thinc_optimizer)
        thinc_optimizer.step_schedules()
    ours.load_state_dict(saved)
    with torch.no_grad():
        torch.testing.assert_close(ours(torch.arange(50)[None, :]), dense(torch.arange(50)[None, :]),
                                   rtol=0, atol=1e-6)


def test_l2_added_to_the_gradient_steps_every_row_densely():
    """With L2 in the gradient (not decoupled) every row changes at every step: no row state."""
    module = Tiny(sparse=True)
    stepper = TorchStepper()
    module(torch.tensor([[1, 2]])).sum().backward()
    stepper.step(module, Adam(learn_rate=0.01, L2=0.1, L2_is_weight_decay=False, grad_clip=0.0, use_averages=False))
    assert stepper._rows == {}
    weight = module.embeddings["word_embeddings"].weight
    assert not torch.equal(weight[40:], Tiny(sparse=True).embeddings["word_embeddings"].weight[40:])


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_gets_row_gradients_unless_its_embedding_is_tied(family, tmp_path):
    from transformers import AutoModel, AutoModelForMaskedLM

    path = make_tiny_family(family, tmp_path / family)
    model = AutoModel.from_pretrained(str(path))
    if family == "modernbert":
        model.config.reference_compile = None  # may compile its embeddings on a GPU: left dense
        assert not use_sparse_word_gradients(model)
        model.config.reference_compile = False
    assert use_sparse_word_gradients(model)
    model.train()
    model(input_ids=torch.tensor([[2, 5, 6, 3]])).last_hidden_state.sum().backward()
    grad = model.get_input_embeddings().weight.grad
    assert grad.is_sparse and set(grad.coalesce().indices()[0].tolist()) <= {2, 5, 6, 3}
    mlm = AutoModelForMaskedLM.from_pretrained(str(path))
    if mlm.get_output_embeddings() is not None and mlm.get_output_embeddings().weight is mlm.get_input_embeddings().weight:
        assert not use_sparse_word_gradients(mlm)  # tied to the MLM head: dense


# ---- a pipeline: NER with a CRF and a text classifier, rows stepped lazily against dense AdamW


NER = [("Anna Berg works in Oslo.", [(0, 9, "PER"), (19, 23, "LOC")]),
       ("Peter Grant flew to Paris last week.", [(0, 11, "PER"), (20, 25, "LOC")])]
CATS = [("What a wonderful and moving story.", "POS"), ("The film was dull and far too long.", "NEG")]
UNSEEN = "Quiet rivers carry old stones past green hills and small villages."
PIPELINE_LR = [lr / 20 for lr in LR]
PIPELINE_STEPS = 4
# parameters whose gradient is 0 in exact arithmetic: softmax ignores a constant added to every key's score,
# so a self-attention key bias only ever gets rounding noise, which Adam normalises to a step of up to lr
ZERO_GRADIENT = ("attention.self.key.bias",)


def pipeline_examples(nlp, task):
    if task == "ner_crf":
        return [Example.from_dict(nlp.make_doc(t), {"entities": e}) for t, e in NER]
    return [Example.from_dict(nlp.make_doc(t), {"cats": {l: float(l == c) for l in ("NEG", "POS")}}) for t, c in CATS]


def train_pipeline(model_dir, task, sparse):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(model_dir)}})
    nlp.add_pipe("mlm_ner" if task == "ner_crf" else "mlm_textcat", name="head",
                 config={"model": {"crf": True}} if task == "ner_crf" else {})
    examples = pipeline_examples(nlp, task)
    nlp.initialize(lambda: examples)
    embedding = get_hf_model(nlp.get_pipe("mlm_encoder").model).get_input_embeddings()
    embedding.sparse = sparse
    # fine-tuning's learning rates: Adam turns a gradient's last-bit rounding (sums in another order) into
    # up to lr where it is near 0, so the weights' agreement scales with lr; a strong decay to see it at all
    sgd = optimizer(lr=PIPELINE_LR, l2=1.0)
    for i in range(PIPELINE_STEPS):  # the second example first at step 2
        nlp.update(examples[: 1 + (i >= 2)], sgd=sgd, losses={}, drop=0.0)
    return nlp, embedding


def encoder_weights(nlp):
    return dict(get_hf_model(nlp.get_pipe("mlm_encoder").model).named_parameters())


def assert_weights_agree(nlp, dense):
    """Every encoder weight as dense AdamW left it. Sparse rows and dense sums add in
    another order, so the last bits differ (1e-6 covers it at these learning rates);
    a zero-gradient parameter steps by rounding noise, on any CPU in its own way, so
    it is compared on the scale of the update (it moved no more than the steps allow)."""
    ours = encoder_weights(nlp)
    for name, q in encoder_weights(dense).items():
        atol = sum(PIPELINE_LR[:PIPELINE_STEPS]) if name.endswith(ZERO_GRADIENT) else 1e-6
        torch.testing.assert_close(ours[name].detach(), q.detach(), rtol=0, atol=atol, msg=name)


@pytest.mark.numerics
@pytest.mark.parametrize("task", ["ner_crf", "textcat"])
def test_a_pipeline_trains_saves_and_predicts_as_with_dense_adamw(tiny_model_dir, task, tmp_path):
    (ours, embedding), (dense, _) = train_pipeline(tiny_model_dir, task, True), train_pipeline(tiny_model_dir, task, False)
    [lazy] = ours.get_pipe("mlm_encoder").model.shims[0]._stepper._rows.values()
    assert lazy.pending != 1.0, "no decay pending: the word embeddings were not stepped by rows"
    ours.to_disk(tmp_path / "ours")  # with the decay of untouched rows pending
    assert_weights_agree(ours, dense)
    for nlp in (spacy.load(tmp_path / "ours"), ours):  # the saved pipeline, then ours, read rows never trained on
        doc, dense_doc = nlp(UNSEEN), dense(UNSEEN)
        assert [(e.text, e.label_) for e in doc.ents] == [(e.text, e.label_) for e in dense_doc.ents]
        assert doc.cats == pytest.approx(dense_doc.cats, abs=1e-6)
        torch.testing.assert_close(torch.as_tensor(doc.tensor), torch.as_tensor(dense_doc.tensor), rtol=0, atol=1e-5)
        assert_weights_agree(nlp, dense)
