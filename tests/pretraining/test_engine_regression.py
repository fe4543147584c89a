"""The engine (spacy_mlm/engine/) trains as the loops it replaced did: the first
steps' losses and the final weights of pretraining (masked LM with a frozen
encoder first, NSP, replaced-token detection with disentangled embeddings,
gradient accumulation), in one process and in two, equal the values recorded
from the old code (pretraining/loop.py with its own AdamW, Hugging Face's
warmup schedule and torch DDP, commit d6ab127) on the tiny BERT with the same
seed (the two-process run: test_distributed.py). Recorded on one CPU; compared
within fp32's spread for any other."""
import numpy as np
import pytest
from safetensors.torch import load_file

from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.loop import pretrain

from .conftest import read_history, tiny_overrides

# per step: the logged losses; then the final held-out loss and (sum, sum of squares) of every saved weight
RECORDED = {
    "mlm": ({"pretraining.head_only_steps": 2}, ["loss"],
            [[5.0107318333217075], [5.047781056371228], [4.990016542632004], [4.99170290190598],
             [4.981067403157552], [4.994868469238281]],
            4.949572476473722, (188.8461392376811, 201.73204807738273)),
    "nsp": ({"pretraining.next_sentence": True}, ["loss", "nsp_loss"],
            [[5.029085332697088, 0.6894403100013733], [5.087763578995414, 0.6468189358711243],
             [4.98813906582919, 0.7175719738006592], [5.012587547302246, 0.810443103313446],
             [4.9796905517578125, 0.6868464946746826], [5.010370669157608, 0.7167125344276428]],
            5.0081066555447045, (189.42429382226175, 201.76695231123918)),
    "rtd": ({"pretraining.objective": "rtd", "pretraining.rtd.embedding_sharing": "disentangled"}, ["loss", "rtd_loss"],
            [[4.037144524710519, 0.691798557744962], [4.501030757509429, 0.6918072970408313],
             [3.964318637190194, 0.6881962449337955], [4.166025095972522, 0.6858111790248326],
             [4.0317438761393225, 0.6842528334609023], [4.3551788330078125, 0.6827184442888227]],
            4.295130642977628, (155.60421322913828, 169.25230848412457)),
    "accumulated": ({"pretraining.grad_accumulation_steps": 2}, ["loss"],
                    [[5.004950932094029], [5.052171378300108], [4.980216716897899], [4.974564124797952],
                     [4.961508178710938], [4.988567097981771]],
                    4.941220023415306, (188.058967228453, 201.7768491912573)),
}
# 2 processes (torchrun, the old DDP), the tiny BERT without dropout, head_only_steps = 2, 5 steps:
# test_distributed.py's run, which compares with these
RECORDED_TWO_PROCESSES = ([5.011203220912388, 5.048476646686423, 4.99518137964709, 4.990282256027748, 4.9731689453125],
                          4.964514298872515, (188.74055429889128, 201.7232494040032))


def weight_sums(model_dir):
    tensors = load_file(str(model_dir / "model.safetensors")).values()
    return sum(float(t.double().sum()) for t in tensors), sum(float(t.double().pow(2).sum()) for t in tensors)


def assert_recorded(output_dir, losses, eval_loss, sums, keys=("loss",)):
    history = read_history(output_dir)
    np.testing.assert_allclose([[row[k] for k in keys] for row in history if "loss" in row], losses, rtol=1e-5)
    np.testing.assert_allclose(history[-1]["eval_loss"], eval_loss, rtol=1e-5)
    total, squares = weight_sums(output_dir / "model")
    # the sum of squares moves by ~1e-4 where one step's rate or decay differs; fp32 across CPUs by far less
    np.testing.assert_allclose(squares, sums[1], rtol=1e-5)
    np.testing.assert_allclose(total, sums[0], atol=1e-3)


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_pretraining_as_the_old_loop(tmp_path, corpus_file, tiny_model_dir, case):
    extra, keys, losses, eval_loss, sums = RECORDED[case]
    settings = tiny_overrides(corpus_file, tiny_model_dir, **{
        "pretraining.max_steps": 6, "pretraining.eval_every": 3, "pretraining.checkpoint_every": 3, **extra})
    pretrain(load_pretraining_config(None, settings), tmp_path, quiet=True)
    assert_recorded(tmp_path, losses, eval_loss, sums, keys)



def test_the_engine_steps_as_torchs_adamw_under_hugging_faces_schedule_and_resumes_its_checkpoints():
    """The engine's step (TorchStepper at the warmup-linear rate, decay on
    matrices only, the clip as clip_grad_norm_ rounds it) gives what the old
    loop's fused AdamW under transformers' schedule gave, bit for bit, with
    the clip active and not; and a checkpoint that loop wrote (AdamW's and
    LambdaLR's state dicts) resumes into the same next steps."""
    import copy

    import torch
    from transformers import get_linear_schedule_with_warmup

    from spacy_mlm.engine.trainer import Objective, Trainer

    settings = {"learning_rate": 3e-3, "beta1": 0.9, "beta2": 0.98, "eps": 1e-6, "weight_decay": 0.01,
                "warmup_steps": 3}

    def module():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.LayerNorm(5), torch.nn.Linear(5, 2))

    class Squares(Objective):  # gradients large enough at some steps for the clip to act
        def __init__(self, model):
            self.model = model

        def batches(self, step):
            return [torch.randn(4, 6, generator=torch.Generator().manual_seed(step)) * (1 + 3 * (step % 2))]

        def loss(self, batch):
            return self.model(batch).pow(2).sum(), None

    def old_loop(model, steps, state=None):
        params = [p for p in model.parameters() if p.requires_grad]
        adamw = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.01},
                                   {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                                  lr=3e-3, betas=(0.9, 0.98), eps=1e-6, fused=True)
        schedule = get_linear_schedule_with_warmup(adamw, 3, 10)
        if state is not None:
            adamw.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["scheduler"])
        objective = Squares(model)
        for step in steps:
            objective.backward(objective.batches(step)[0])
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            adamw.step()
            schedule.step()
            adamw.zero_grad(set_to_none=True)
        return {"optimizer": adamw.state_dict(), "scheduler": schedule.state_dict()}

    old, new = module(), module()
    old_state = old_loop(old, range(4))
    trainer = Trainer(new, settings, 10, 1.0)
    rates = []
    for step in range(4):
        rates.append(trainer.rate)
        trainer.step(Squares(new), step)
    assert rates == [0.0, 1e-3, 2e-3, 3e-3]
    for a, b in zip(old.parameters(), new.parameters()):
        assert torch.equal(a, b)
    # the old loop's checkpoint, resumed by the engine, against the old loop going on (a copy:
    # a loaded state dict shares its tensors with the optimizer, which steps them in place)
    saved = copy.deepcopy(old_state)
    old_loop(old, range(4, 8), old_state)
    resumed = Trainer(new, settings, 10, 1.0)
    resumed.load_state(saved)
    assert resumed.rate == 3e-3 * (6 / 7)
    for step in range(4, 8):
        resumed.step(Squares(new), step)
    for a, b in zip(old.parameters(), new.parameters()):
        assert torch.equal(a, b)
