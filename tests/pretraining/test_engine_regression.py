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



def test_the_schedule_is_hugging_faces_and_reads_its_checkpointed_state():
    """The engine's warmup-linear rates equal transformers' (the old loop's) bit
    for bit, and a scheduler state the old loop checkpointed loads."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from spacy_mlm.engine.optimizer import warmup_linear

    def rates(make, steps=12, load=None):
        optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=3e-4)
        schedule = make(optimizer)
        if load is not None:
            schedule.load_state_dict(load)
        out = []
        for _ in range(steps):
            out.append(schedule.get_last_lr()[0])
            optimizer.step()
            schedule.step()
        return out, schedule.state_dict()

    theirs, state = rates(lambda o: get_linear_schedule_with_warmup(o, 3, 10), steps=5)
    ours, _ = rates(lambda o: warmup_linear(o, 3, 10), steps=5)
    assert ours == theirs and theirs[0] == 0.0 and theirs[3] == 3e-4
    resumed, _ = rates(lambda o: warmup_linear(o, 3, 10), steps=6, load=state)
    assert resumed == rates(lambda o: get_linear_schedule_with_warmup(o, 3, 10), steps=11)[0][5:]
