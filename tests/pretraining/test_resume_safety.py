"""`--resume` continues the same run or refuses: other settings or data are
listed and refused unless forced, a damaged newest checkpoint (or one with a
planted pickle payload) is skipped for the one before, what killed runs left
behind is removed, and the CUDA random state is kept with the CPU one."""
import logging
import shutil
from pathlib import Path

import pytest
import torch

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.engine.checkpoint import STATE_FILE, checkpoints, restore_rng_state, rng_state
from spacy_mlm.engine.process_group import ProcessGroup
from spacy_mlm.pretraining.config import load_pretraining_config
from spacy_mlm.pretraining.loop import pretrain
from spacy_mlm.util.io import remove_left_overs

from ..reliability.payloads import LeavesAMarker
from .conftest import read_history, tiny_overrides


@pytest.fixture(scope="module")
def base_settings(corpus_file, tiny_model_dir):
    return tiny_overrides(corpus_file, tiny_model_dir, **{
        "pretraining.max_steps": 4, "pretraining.checkpoint_every": 2, "pretraining.eval_every": 2})


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, base_settings):
    out = tmp_path_factory.mktemp("finished") / "run"
    pretrain(load_pretraining_config(None, base_settings), out)
    return out


@pytest.fixture
def run_copy(finished_run, tmp_path):
    target = tmp_path / "run"
    shutil.copytree(finished_run, target)
    return target


def resume(out, settings, force=False, **changes):
    return pretrain(load_pretraining_config(None, {**settings, **changes}), out, resume=True, force=force)


CHANGES = {
    "batch_size": ({"pretraining.batch_size": 4}, "pretraining.batch_size: 8 -> 4"),
    "seed": ({"pretraining.seed": 7}, "pretraining.seed: 0 -> 7"),
    "masking": ({"pretraining.masking.rate": 0.3}, "pretraining.masking.rate: 0.15 -> 0.3"),
    "sequence_length": ({"pretraining.max_length": 24}, "pretraining.max_length: 32 -> 24"),
    "learning_rate": ({"pretraining.optimizer.learning_rate": 0.01}, "pretraining.optimizer.learning_rate"),
    "next_sentence": ({"pretraining.next_sentence": True}, "pretraining.next_sentence: false -> true"),
    "objective": ({"pretraining.objective": "rtd"}, "pretraining.objective: \"mlm\" -> \"rtd\""),
}


@pytest.mark.parametrize("case", list(CHANGES))
def test_resume_refuses_a_run_with_other_settings(run_copy, base_settings, case):
    change, listed = CHANGES[case]
    before = {name: (run_copy / name).read_bytes() for name in ("config.cfg", "metrics.jsonl")}
    with pytest.raises(SpacyMlmError, match="change the run") as info:
        resume(run_copy, base_settings, **change)
    assert listed in str(info.value) and "--force" in str(info.value)
    assert {name: (run_copy / name).read_bytes() for name in before} == before  # nothing rewritten


def test_resume_refuses_another_corpus_and_a_corpus_edited_in_place(base_settings, corpus_file, tmp_path):
    corpus = tmp_path / "corpus.txt"
    shutil.copy(corpus_file, corpus)
    settings = {**base_settings, "paths.train": str(corpus), "pretraining.max_steps": 2}
    pretrain(load_pretraining_config(None, settings), tmp_path / "run")
    other = tmp_path / "other.txt"
    other.write_text(corpus.read_text(encoding="utf8").replace("pond", "lake"), encoding="utf8")
    with pytest.raises(SpacyMlmError, match=r"pretraining.corpus.train: \S*corpus.txt\" -> \S*other.txt"):
        resume(tmp_path / "run", settings, **{"paths.train": str(other)})
    shutil.copy(other, corpus)  # the run's own path, other content
    with pytest.raises(SpacyMlmError, match="the train documents differ from the run's"):
        resume(tmp_path / "run", settings)


def test_longer_runs_and_other_reporting_are_not_another_run(run_copy, base_settings):
    resume(run_copy, base_settings, **{"pretraining.max_steps": 6, "pretraining.log_every": 3,
                                       "pretraining.eval_every": 3, "pretraining.keep_checkpoints": 3})
    assert [row["step"] for row in read_history(run_copy) if "loss" in row] == [1, 2, 3, 4, 5, 6]


def test_force_resumes_and_keeps_the_runs_own_config(run_copy, base_settings, caplog):
    original = (run_copy / "config.cfg").read_text(encoding="utf8")
    with caplog.at_level(logging.WARNING):
        pretrain(load_pretraining_config(None, {**base_settings, "pretraining.seed": 7, "pretraining.max_steps": 5}),
                 run_copy, resume=True, force=True)
    assert "--force: resuming with pretraining.seed: 0 -> 7" in caplog.text
    assert (run_copy / "config.before-step-00000004.cfg").read_text(encoding="utf8") == original
    assert "seed = 7" in (run_copy / "config.cfg").read_text(encoding="utf8")


DAMAGE = {
    "state_truncated": lambda ckpt, marker: (ckpt / STATE_FILE).write_bytes((ckpt / STATE_FILE).read_bytes()[:100]),
    "state_with_payload": lambda ckpt, marker: torch.save({"step": 4, "payload": LeavesAMarker(marker)}, ckpt / STATE_FILE),
    "weights_truncated": lambda ckpt, marker: (ckpt / "model" / "model.safetensors").write_bytes(b"\x00" * 64),
    "run_record_garbage": lambda ckpt, marker: (ckpt / "run.json").write_text("{oops"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_newest_checkpoint_is_skipped_for_the_one_before(run_copy, base_settings, damage, tmp_path, caplog):
    marker = tmp_path / "payload_ran"
    newest = checkpoints(run_copy / "checkpoints")[-1]
    assert newest.name == "step-00000004"
    DAMAGE[damage](newest, marker)
    with caplog.at_level(logging.INFO):
        resume(run_copy, base_settings)
    assert "step-00000004 cannot be resumed from, skipping it" in caplog.text
    assert "Resumed from" in caplog.text and "step-00000002 at step 2" in caplog.text
    assert not marker.exists()  # the pickled call never ran
    assert [row["step"] for row in read_history(run_copy) if "loss" in row] == [1, 2, 3, 4]


def test_no_loadable_checkpoint_is_an_error_listing_each(run_copy, base_settings):
    for ckpt in checkpoints(run_copy / "checkpoints"):
        (ckpt / STATE_FILE).write_bytes(b"")
    with pytest.raises(SpacyMlmError, match="no checkpoint in .* can be resumed from: .*step-00000004.*step-00000002"):
        resume(run_copy, base_settings)


def test_what_killed_runs_left_is_removed_or_moved_back(run_copy, base_settings):
    ckpts = run_copy / "checkpoints"
    left = [run_copy / ".metrics.jsonl.k2j_3x9a.tmp", run_copy / ".curves.png.abc123de.tmp",
            ckpts / ".latest.zz9y8x7w.tmp"]
    for path in left:
        path.write_text("half")
    (ckpts / ".step-00000006.q1w2e3r4.tmp").mkdir()  # a checkpoint killed mid-write
    shutil.copytree(ckpts / "step-00000002", ckpts / ".step-00000002.old-4242")  # replaced, not yet removed
    shutil.move(str(run_copy / "model"), str(run_copy / ".model.old-4243"))  # killed between the two renames
    (run_copy / ".keep.me").write_text("not ours")
    resume(run_copy, base_settings)
    names = {p.name for p in run_copy.iterdir()} | {p.name for p in ckpts.iterdir()}
    assert not {n for n in names if n.endswith(".tmp") or ".old-" in n}, names
    assert (run_copy / "model" / "config.json").exists() and (run_copy / ".keep.me").exists()


def test_remove_left_overs_moves_back_a_directory_whose_replacement_never_came(tmp_path):
    (tmp_path / ".model.old-17").mkdir()
    (tmp_path / ".model.old-17" / "weights").write_text("w")
    assert remove_left_overs(tmp_path) == []
    assert (tmp_path / "model" / "weights").read_text() == "w"


class FakeCuda:
    """torch.cuda's RNG calls, recorded (no GPU here)."""

    def __init__(self):
        self.set_calls = []

    def get_rng_state(self, device):
        return torch.full((16,), device.index, dtype=torch.uint8)

    def set_rng_state(self, state, device):
        self.set_calls.append((state.tolist(), device))


def test_the_cuda_random_state_is_saved_and_restored_with_the_cpu_one(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(torch.cuda, "get_rng_state", fake.get_rng_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", fake.set_rng_state)
    gpu = torch.device("cuda", 1)
    saved = rng_state(gpu)
    assert saved["cuda"].tolist() == [1] * 16 and torch.equal(saved["cpu"], torch.get_rng_state())
    expected = torch.rand(3)
    torch.manual_seed(123)
    restore_rng_state(saved, gpu)
    assert fake.set_calls == [([1] * 16, gpu)] and torch.equal(torch.rand(3), expected)
    cpu_state = rng_state(torch.device("cpu"))
    assert cpu_state["cuda"] is None
    restore_rng_state(cpu_state, torch.device("cpu"))
    assert len(fake.set_calls) == 1  # nothing set on a GPU for a CPU run


def test_a_checkpoint_from_before_cuda_states_restores_its_cpu_state(monkeypatch, caplog):
    fake = FakeCuda()
    monkeypatch.setattr(torch.cuda, "set_rng_state", fake.set_rng_state)
    old_style = torch.get_rng_state()
    expected = torch.rand(2)
    with caplog.at_level(logging.WARNING):
        restore_rng_state(old_style, torch.device("cuda", 0))
    assert torch.equal(torch.rand(2), expected) and fake.set_calls == []
    assert "no CUDA random state" in caplog.text


def test_a_scratch_tokenizer_killed_while_saved_leaves_none_to_reuse(tmp_path, monkeypatch, corpus_file):
    """The next run would have taken a half-written OUTPUT/tokenizer/ for the trained one."""
    from spacy_mlm.pretraining import loop

    class DiesWhileSaving:
        def save_pretrained(self, path):
            (Path(path) / "tokenizer.json").write_text('{"half":')
            raise KeyboardInterrupt  # as a kill would stop it

    monkeypatch.setattr(loop, "train_tokenizer", lambda *args: DiesWhileSaving())
    cfg = load_pretraining_config(None, {"paths.train": str(corpus_file)})["pretraining"]
    with pytest.raises(KeyboardInterrupt):
        loop.get_model(cfg, tmp_path, {"all": [["A line."]]}, ProcessGroup())
    assert not (tmp_path / "tokenizer").exists() and not list(tmp_path.glob(".tokenizer.*"))
