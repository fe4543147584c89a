"""No command overwrites by accident (`spacy_mlm.util.outputs`): its own inputs,
a file where it writes a directory (or the reverse), or a path that is not an
earlier output of the same command; and one run per output at a time."""
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_mlm.cli import app
from spacy_mlm.testing import SAMPLE_TEXT
from spacy_mlm.util.outputs import OUTPUT_MARKER, OutputRefused, claim_output, output_lock


def snapshot(root: Path):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def planted(tmp_path):
    """Inputs and bystanders of every kind a command could be given."""
    (tmp_path / "data.conll").write_text("Anna B-PER\nworks O\n\nBerlin B-LOC\n", encoding="utf8")
    (tmp_path / "a.txt").write_text("one corpus line that is long enough to read\n", encoding="utf8")
    (tmp_path / "b.txt").write_text("a second corpus the user meant as input\n", encoding="utf8")
    (tmp_path / "my.cfg").write_text("[nlp]\n# edited by hand\n", encoding="utf8")
    (tmp_path / "notes.json").write_text('{"mine": true}', encoding="utf8")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model_type": "bert"}', encoding="utf8")
    (tmp_path / "pipe").mkdir()
    (tmp_path / "pipe" / "config.cfg").write_text("[nlp]\n", encoding="utf8")
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 not really")
    return tmp_path


CASES = {
    "convert_onto_its_input": ("convert-conll {d}/data.conll {d}/data.conll", "is also an input"),
    "convert_onto_its_input_other_spelling": ("convert-conll {d}/data.conll {d}/./model/../data.conll", "is also an input"),
    "convert_over_a_foreign_file": ("convert-conll {d}/data.conll {d}/a.txt", "not an output of spacy_mlm convert-conll"),
    "convert_onto_a_directory": ("convert-conll {d}/data.conll {d}/photos", "is an existing directory"),
    "sense_tune_two_corpora": ("sense-tune {d}/model {d}/a.txt {d}/b.txt", "is an existing file, but sense-tune writes a directory"),
    "sense_tune_into_its_model": ("sense-tune {d}/model {d}/a.txt {d}/model/out", "lies inside an input"),
    "sense_tune_over_a_foreign_dir": ("sense-tune {d}/model {d}/a.txt {d}/photos", "not an earlier output"),
    "init_config_over_an_edited_config": ("init-config {d}/my.cfg --task ner --encoder {d}/model", "replaces a file only with --force"),
    "init_pretrain_config_over_a_file": ("init-pretrain-config {d}/my.cfg", "replaces a file only with --force"),
    "init_config_onto_its_encoder": ("init-config {d}/model --task ner --encoder {d}/model", "is also an input"),
    "fit_transform_onto_its_corpus": ("fit-transform {d}/model {d}/a.txt {d}/a.txt", "is also an input"),
    "fit_transform_onto_its_model": ("fit-transform {d}/pipe {d}/a.txt {d}/pipe", "is also an input"),
    "fit_transform_around_its_inputs": ("fit-transform {d}/model {d}/a.txt {d}", "holds an input"),
    "export_encoder_onto_its_pipeline": ("export-encoder {d}/pipe {d}/pipe", "is also an input"),
    "export_encoder_over_a_foreign_dir": ("export-encoder {d}/pipe {d}/photos", "not an earlier output"),
    "optimize_onto_its_pipeline": ("optimize {d}/pipe {d}/pipe", "is also an input"),
    "optimize_over_a_file": ("optimize {d}/pipe {d}/notes.json", "is an existing file"),
    "evaluate_into_a_file": ("evaluate {d}/pipe {d}/data.conll {d}/notes.json", "is an existing file"),
    "evaluate_into_its_data": ("evaluate {d}/pipe {d}/data.conll {d}/data.conll", "is also an input"),
    "evaluate_into_a_foreign_dir": ("evaluate {d}/pipe {d}/data.conll {d}/photos", "not an earlier output"),
    "evaluate_ner_output_onto_its_data": ("evaluate-ner {d}/pipe {d}/data.conll --output {d}/data.conll", "is also an input"),
    "evaluate_ner_over_a_foreign_json": ("evaluate-ner {d}/pipe {d}/data.conll --output {d}/notes.json", "not an output"),
    "pretrain_onto_its_config": ("pretrain {d}/my.cfg {d}/my.cfg", "is also an input"),
    "pretrain_into_its_corpus": ("pretrain {d}/my.cfg {d}/b.txt --paths.train {d}/b.txt", "is also an input"),
    "pretrain_into_a_foreign_dir": ("pretrain {d}/my.cfg {d}/photos --paths.train {d}/a.txt", "not an earlier output"),
    "demo_into_a_foreign_dir": ("demo --dir {d}/photos", "not an earlier output"),
    "apply_onto_its_input": ("apply {d}/pipe {d}/a.txt {d}/a.txt", "is also an input"),
    "apply_onto_its_input_with_force": ("apply {d}/pipe {d}/a.txt {d}/a.txt --force", "is also an input"),
    "apply_onto_its_pipeline": ("apply {d}/pipe {d}/a.txt {d}/pipe", "is also an input"),
    "apply_into_its_pipeline": ("apply {d}/pipe {d}/a.txt {d}/pipe/shards", "lies inside an input"),
    "apply_into_a_foreign_dir": ("apply {d}/pipe {d}/a.txt {d}/photos", "not an earlier output of spacy_mlm apply"),
    "import_hf_onto_its_model": ("import-hf {d}/model {d}/model", "is also an input"),
    "import_hf_into_its_model": ("import-hf {d}/model {d}/model/spacy", "lies inside an input"),
    "import_hf_over_a_foreign_dir": ("import-hf {d}/model {d}/photos", "not an earlier output of spacy_mlm import-hf"),
    "export_hf_onto_its_pipeline": ("export-hf {d}/pipe {d}/pipe --force", "is also an input"),
    "export_hf_into_its_pipeline": ("export-hf {d}/pipe {d}/pipe/hf", "lies inside an input"),
    "export_hf_over_a_foreign_dir": ("export-hf {d}/pipe {d}/photos", "not an earlier output of spacy_mlm export-hf"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_command_refuses_before_touching_anything(planted, name):
    command, expected = CASES[name]
    if name.startswith("pretrain"):
        (planted / "my.cfg").write_text("[pretraining]\n", encoding="utf8")
    before = snapshot(planted)
    result = CliRunner().invoke(app, command.format(d=planted).split())
    assert result.exit_code == 1, result.output
    assert expected in result.output, result.output
    assert snapshot(planted) == before  # every planted byte is still there, nothing was added


def test_an_earlier_output_is_replaced_and_force_replaces_a_foreign_file(planted):
    args = ["convert-conll", str(planted / "data.conll"), str(planted / "out.spacy")]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert CliRunner().invoke(app, args).exit_code == 0  # its own earlier output
    foreign = ["convert-conll", str(planted / "data.conll"), str(planted / "b.txt")]
    assert CliRunner().invoke(app, foreign).exit_code == 1
    assert CliRunner().invoke(app, foreign + ["--force"]).exit_code == 0
    assert (planted / "b.txt").read_bytes() == (planted / "out.spacy").read_bytes()
    assert not list(planted.glob(".*.lock"))


def test_force_never_writes_onto_an_input(planted):
    before = snapshot(planted)
    args = ["convert-conll", str(planted / "data.conll"), str(planted / "data.conll"), "--force"]
    assert CliRunner().invoke(app, args).exit_code == 1
    assert snapshot(planted) == before


def test_a_directory_output_is_marked_as_the_commands(tmp_path):
    with claim_output(tmp_path / "out", "export-encoder", directory=True) as out:
        out.mkdir()
        (out / "weights").write_bytes(b"1")
    assert (tmp_path / "out" / OUTPUT_MARKER).is_file()
    with claim_output(tmp_path / "out", "export-encoder", directory=True):
        pass  # its own
    with pytest.raises(OutputRefused, match="not an earlier output of spacy_mlm sense-tune"):
        with claim_output(tmp_path / "out", "sense-tune", directory=True):
            pass


def _pretrain_command(tmp_path, tiny_model_dir):
    (tmp_path / "c.cfg").write_text("[pretraining]\n")
    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("\n\n".join("\n".join(SAMPLE_TEXT[i:i + 4]) for i in range(0, 40, 2)), encoding="utf8")
    settings = ["--paths.train", str(corpus_file), "--paths.source", str(tiny_model_dir),
                "--pretraining.max_length", "32", "--pretraining.batch_size", "8", "--pretraining.max_steps", "60",
                "--pretraining.eval_every", "1000", "--pretraining.eval_sequences", "8",
                "--pretraining.checkpoint_every", "1000", "--pretraining.log_every", "1000", "-q"]
    return [sys.executable, "-m", "spacy_mlm", "pretrain", str(tmp_path / "c.cfg"), str(tmp_path / "out"), *settings]


def test_pretrain_refuses_an_output_another_run_is_writing_and_one_that_has_finished(tmp_path, tiny_model_dir):
    """While a run holds the output (its lock, taken here as `pretrain` takes it), another refuses,
    naming the holder, and writes nothing; once that run has finished, a new one refuses its checkpoints
    (without --resume). Deterministic: the holder is this process, not a race between two starts."""
    command, env = _pretrain_command(tmp_path, tiny_model_dir), dict(os.environ, OMP_NUM_THREADS="1")
    out = tmp_path / "out"
    with output_lock(out, "pretrain"):
        refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert refused.returncode == 1, refused
        assert f"another run is writing here (spacy_mlm pretrain, pid {os.getpid()})" in refused.stderr
        assert not out.exists()
    # the same command in this process, on a shorter budget: the lock is free again
    short = [*command[3:], "--pretraining.max_steps", "4"]
    done = CliRunner().invoke(app, short)
    assert done.exit_code == 0 and "model saved" in done.output, done.output
    again = CliRunner().invoke(app, short)
    assert again.exit_code == 1 and "already has checkpoints: pass --resume" in again.output, again.output


def test_two_pretrain_runs_at_once_one_refuses(tmp_path, tiny_model_dir):
    """Two real runs started together: one writes the model, the other refuses (which message
    depends on whether the first is still running when the second looks: both are refusals)."""
    command, env = _pretrain_command(tmp_path, tiny_model_dir), dict(os.environ, OMP_NUM_THREADS="1")
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = [(run.wait(timeout=300), *run.communicate()) for run in runs]
    assert sorted(rc for rc, _, _ in results) == [0, 1], results
    (_, out, _), (_, _, err) = sorted(results)
    assert "model saved" in out
    assert ("another run is writing here (spacy_mlm pretrain, pid" in err
            or "already has checkpoints: pass --resume" in err), err


def test_a_killed_run_does_not_block_the_next(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from spacy_mlm.util.outputs import output_lock\n"
         f"with output_lock({str(out)!r}, 'pretrain'):\n    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(OutputRefused, match="another run is writing here"):
        with output_lock(out, "pretrain"):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    deadline = time.time() + 5
    with output_lock(out, "pretrain"):  # the kernel dropped the dead process's lock
        assert time.time() < deadline
    assert not (tmp_path / ".out.lock").exists()


def test_a_pretraining_output_from_before_markers_is_still_pretrains(tmp_path):
    """`pretrain --resume` into a run made before outputs were marked needs no --force
    (which would also lift the check that the resumed run has the same settings)."""
    from spacy_mlm.cli.pretrain import is_pretraining_output

    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "config.cfg").write_text("[pretraining]\n")
    with claim_output(tmp_path / "run", "pretrain", directory=True, replaces_whole=False,
                      recognise=is_pretraining_output):
        pass
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"x")
    with pytest.raises(OutputRefused, match="not an earlier output of spacy_mlm pretrain"):
        with claim_output(tmp_path / "photos", "pretrain", directory=True, recognise=is_pretraining_output):
            pass
