"""`spacy_mlm apply` / `apply_pipeline`: shards in input order that hold what
`nlp.pipe` gives doc by doc, bad records (undecodable, too long) named by file
and line, an interrupted job resumed, a changed input or pipeline refused, a
damaged shard annotated again, on local processes and on a local 2-CPU Ray.
Killed drivers and workers: test_apply_crashes.py."""
import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

import spacy_mlm
import spacy_mlm.inference as inference
from spacy_mlm.cli import app
from spacy_mlm.errors import DataFormatError, SpacyMlmError
from spacy_mlm.inference.records import read_records
from spacy_mlm.inference.workers import WorkerFailed
from spacy_mlm.util.outputs import OutputRefused

from .conftest import TEXTS, assert_close_docs


def write_input(path: Path, bad: bool = False) -> Path:
    lines = [json.dumps({"text": text}) for text in TEXTS]
    if bad:
        lines[1:1] = ['{"text": "cut off', json.dumps({"text": 7})]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


def shard_docs(output_dir: Path, vocab):
    docs = []
    for shard in sorted(output_dir.glob("shard-*.spacy")):
        docs += [spacy_mlm.restore_vector_hooks(doc) for doc in DocBin().from_disk(shard).get_docs(vocab)]
    return docs


def reference(nlp, batch_size=64):
    """nlp.pipe's Docs, less the hidden states (the shards leave them out), in
    the batches a worker runs (a shard), compared within fp32's spread: a worker
    is another process, with one thread, so other kernels may run."""
    docs = list(nlp.pipe(TEXTS, batch_size=batch_size))
    for doc in docs:
        doc._.mlm_encoding = None
    return docs


@pytest.mark.numerics
def test_local_engine_writes_what_nlp_pipe_gives_in_input_order(saved_pipelines, tmp_path):
    summary = inference.apply_pipeline(saved_pipelines["crf"], write_input(tmp_path / "in.jsonl"), tmp_path / "out",
                                       shard_size=2, workers=2, quiet=True)  # two worker processes
    assert (summary.shards, summary.written, summary.skipped, summary.records) == (3, 3, 0, len(TEXTS))
    nlp = spacy.load(saved_pipelines["crf"])
    assert_close_docs(shard_docs(tmp_path / "out", nlp.vocab), reference(nlp, batch_size=2))  # a worker's batch: a shard


def test_bad_records_are_named_and_skipped_or_stop_the_job(saved_pipelines, tmp_path):
    path = write_input(tmp_path / "in.jsonl", bad=True)
    records, bad = read_records(path, on_bad_record="skip")
    assert [r.text for r in records] == TEXTS
    assert [(b.file, b.line) for b in bad] == [(str(path), 2), (str(path), 3)]
    assert "invalid JSON" in str(bad[0]) and "field 'text' must be a string, got int" in str(bad[1])
    with pytest.raises(DataFormatError, match=r"in.jsonl, line 2: invalid JSON"):
        inference.apply_pipeline(saved_pipelines["ner"], path, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_text_too_long_for_the_pipeline_and_an_undecodable_line_are_bad_records(saved_pipelines, tmp_path):
    """spaCy refuses a text over nlp.max_length (E088) with no file or line: it
    stopped the whole job, under skip too. A line that does not decode stopped it as well."""
    path = tmp_path / "in.txt"
    path.write_bytes(b"first text\n" + b"x " * 500_001 + b"\nbad \xff\xfe bytes\nlast text\n")
    summary = inference.apply_pipeline(saved_pipelines["ner"], path, tmp_path / "out", output_format="jsonl",
                                       on_bad_record="skip", quiet=True)
    assert summary.records == 2 and [(b.file, b.line) for b in summary.bad_records] == [(str(path), 2), (str(path), 3)]
    assert "the text is 1,000,002 characters long, over the pipeline's limit of 1,000,000" in str(summary.bad_records[0])
    assert "cannot decode as utf-8" in str(summary.bad_records[1])
    rows = [json.loads(line) for line in (tmp_path / "out" / "shard-00000.jsonl").read_text(encoding="utf8").splitlines()]
    assert [(row["line"], row["text"]) for row in rows] == [(1, "first text"), (4, "last text")]
    with pytest.raises(DataFormatError, match=r"in.txt, line 2: the text is 1,000,002 characters long"):
        inference.apply_pipeline(saved_pipelines["ner"], path, tmp_path / "stopped", quiet=True)
    path.write_bytes(b"first text\nbad \xff\xfe bytes\n")
    with pytest.raises(DataFormatError, match=r"in.txt, line 2: cannot decode as utf-8 .*pass the file's encoding"):
        inference.apply_pipeline(saved_pipelines["ner"], path, tmp_path / "stopped", quiet=True)
    summary = inference.apply_pipeline(saved_pipelines["ner"], path, tmp_path / "latin", output_format="jsonl",
                                       encoding="latin-1", quiet=True)
    rows = [json.loads(line) for line in (tmp_path / "latin" / "shard-00000.jsonl").read_text(encoding="utf8").splitlines()]
    assert [row["text"] for row in rows] == ["first text", "bad \xff\xfe bytes"]


def test_an_interrupted_job_resumes_where_it_stopped(saved_pipelines, tmp_path, monkeypatch):
    path, out = write_input(tmp_path / "in.jsonl"), tmp_path / "out"
    written = []
    real_write = inference.write_shard

    def write_then_die(target, data):
        if written:
            raise KeyboardInterrupt  # killed while writing the second shard
        written.append(target)
        real_write(target, data)

    monkeypatch.setattr(inference, "write_shard", write_then_die)
    with pytest.raises(KeyboardInterrupt):
        inference.apply_pipeline(saved_pipelines["crf"], path, out, shard_size=2, quiet=True)
    monkeypatch.undo()
    assert sorted(p.name for p in out.glob("shard-*")) == ["shard-00000.spacy", "shard-00000.spacy.sha256"]
    (out / ".shard-00001.spacy.x1y2.tmp").write_bytes(b"half a shard")  # what a kill -9 mid-write leaves
    before = (out / "shard-00000.spacy").stat().st_mtime_ns
    summary = inference.apply_pipeline(saved_pipelines["crf"], path, out, shard_size=2, quiet=True)
    assert (summary.written, summary.skipped, summary.records, summary.damaged) == (2, 1, 3, [])
    assert (out / "shard-00000.spacy").stat().st_mtime_ns == before
    nlp = spacy.load(saved_pipelines["crf"])
    assert_close_docs(shard_docs(out, nlp.vocab), reference(nlp, batch_size=2))
    with pytest.raises(SpacyMlmError, match=r"holds the output of another job: shard_size: 2 -> 3\. Pass --force"):
        inference.apply_pipeline(saved_pipelines["crf"], path, out, shard_size=3, quiet=True)


def test_a_damaged_shard_is_annotated_again(saved_pipelines, tmp_path):
    """A finished shard cut short (or edited) was taken as done by its name alone:
    the rerun said "already there" and the output no longer parsed."""
    path, out = write_input(tmp_path / "in.jsonl"), tmp_path / "out"
    inference.apply_pipeline(saved_pipelines["crf"], path, out, shard_size=2, quiet=True)
    shard = out / "shard-00001.spacy"
    shard.write_bytes(shard.read_bytes()[:-100])
    (out / "shard-00002.spacy.sha256").unlink()  # killed between the shard and its checksum
    kept = (out / "shard-00000.spacy").stat().st_mtime_ns
    summary = inference.apply_pipeline(saved_pipelines["crf"], path, out, shard_size=2, quiet=True)
    assert (summary.written, summary.skipped, summary.damaged) == (2, 1, ["shard-00001.spacy"])
    assert (out / "shard-00000.spacy").stat().st_mtime_ns == kept
    nlp = spacy.load(saved_pipelines["crf"])
    assert_close_docs(shard_docs(out, nlp.vocab), reference(nlp, batch_size=2))
    shard.write_bytes(b"edited")
    result = CliRunner().invoke(app, ["apply", str(saved_pipelines["crf"]), str(path), str(out), "--shard-size", "2",
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    assert "shard-00001.spacy did not match the checksum written with it: annotated again" in result.output
    assert (summary.shards, len(shard_docs(out, nlp.vocab))) == (3, len(TEXTS))


def test_an_input_edited_in_place_is_refused_and_force_starts_over(saved_pipelines, tmp_path):
    """The manifest held the input's path and record count only: an input edited
    in place (same count) resumed, and the shards mixed the old text and the new."""
    path, out = write_input(tmp_path / "in.jsonl"), tmp_path / "out"
    inference.apply_pipeline(saved_pipelines["ner"], path, out, shard_size=2, output_format="jsonl", quiet=True)
    (out / "shard-00002.jsonl").unlink()
    path.write_text(path.read_text(encoding="utf8").replace("Berlin", "Bergen"), encoding="utf8")
    with pytest.raises(SpacyMlmError, match=f"holds the output of another job: input file {path} changed"):
        inference.apply_pipeline(saved_pipelines["ner"], path, out, shard_size=2, output_format="jsonl", quiet=True)
    assert sorted(p.name for p in out.glob("shard-*.jsonl")) == ["shard-00000.jsonl", "shard-00001.jsonl"]
    summary = inference.apply_pipeline(saved_pipelines["ner"], path, out, shard_size=2, output_format="jsonl",
                                       quiet=True, force=True)
    assert (summary.written, summary.skipped) == (3, 0)
    texts = [json.loads(line)["text"] for shard in sorted(out.glob("shard-*.jsonl"))
             for line in shard.read_text(encoding="utf8").splitlines()]
    assert texts == [text.replace("Berlin", "Bergen") for text in TEXTS]


def test_a_changed_pipeline_is_refused_naming_its_files(saved_pipelines, tmp_path):
    pipeline, path, out = tmp_path / "pipeline", write_input(tmp_path / "in.jsonl"), tmp_path / "out"
    shutil.copytree(saved_pipelines["ner"], pipeline)
    inference.apply_pipeline(pipeline, path, out, output_format="jsonl", quiet=True)
    meta = json.loads((pipeline / "meta.json").read_text(encoding="utf8"))
    (pipeline / "meta.json").write_text(json.dumps({**meta, "version": "0.0.2"}), encoding="utf8")
    (pipeline / ".notes.swp").write_text("an editor's file is not the pipeline")
    with pytest.raises(SpacyMlmError, match=rf"the pipeline {pipeline} changed \(file meta.json changed\)"):
        inference.apply_pipeline(pipeline, path, out, output_format="jsonl", quiet=True)


def test_the_command_writes_jsonl_and_counts_skipped_records(saved_pipelines, tmp_path):
    path = write_input(tmp_path / "in.jsonl", bad=True)
    args = ["apply", str(saved_pipelines["ner"]), str(path), str(tmp_path / "out"), "--format", "jsonl",
            "--on-bad-record", "skip", "--quiet"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"skipped {path}, line 2: invalid JSON" in result.output and "2 bad records skipped" in result.output
    lines = (tmp_path / "out" / "shard-00000.jsonl").read_text(encoding="utf8").splitlines()
    rows = [json.loads(line) for line in lines]  # not srsly's ujson: it reads floats a few ulps off
    nlp = spacy.load(saved_pipelines["ner"])
    expected = [([[e.start_char, e.end_char, e.label_] for e in doc.ents], doc.cats) for doc in nlp.pipe(TEXTS)]
    assert [(row["ents"], row["cats"]) for row in rows] == expected
    assert [row["line"] for row in rows] == [1, 4, 5, 6, 7] and all(row["file"] == str(path) for row in rows)



def test_a_foreign_directory_takes_shards_only_with_force(saved_pipelines, tmp_path):
    path, out = write_input(tmp_path / "in.jsonl"), tmp_path / "photos"
    out.mkdir()
    (out / "cat.jpg").write_bytes(b"not really")
    with pytest.raises(OutputRefused, match="not an earlier output of spacy_mlm apply"):
        inference.apply_pipeline(saved_pipelines["ner"], path, out, quiet=True)
    assert sorted(p.name for p in out.iterdir()) == ["cat.jpg"]
    summary = inference.apply_pipeline(saved_pipelines["ner"], path, out, quiet=True, force=True)
    assert summary.written == 1 and (out / "cat.jpg").read_bytes() == b"not really"
    summary = inference.apply_pipeline(saved_pipelines["ner"], path, out, quiet=True)  # apply's own now
    assert (summary.written, summary.skipped) == (0, 1)

@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_engine_with_two_workers_gives_what_nlp_pipe_gives(local_ray, saved_pipelines, tmp_path):
    path = write_input(tmp_path / "in.jsonl")
    summary = inference.apply_pipeline(saved_pipelines["crf"], path, tmp_path / "out", engine="ray", workers=2,
                                       shard_size=2, quiet=True)
    assert (summary.shards, summary.written, summary.records) == (3, 3, len(TEXTS))
    nlp = spacy.load(saved_pipelines["crf"])
    assert_close_docs(shard_docs(tmp_path / "out", nlp.vocab), reference(nlp, batch_size=2))  # a worker's batch: a shard


def test_a_worker_that_fails_ends_the_job_naming_it_and_its_shard(saved_pipelines, tmp_path):
    pipeline, path = tmp_path / "pipeline", write_input(tmp_path / "in.jsonl")
    shutil.copytree(saved_pipelines["ner"], pipeline)
    (pipeline / "ner" / "model").write_bytes(b"cut short")  # the workers cannot load it
    with pytest.raises(WorkerFailed, match=r"apply worker \d \(pid \d+\) failed while annotating shard \d \("
                                           rf"{path}, lines? \d( to \d)?\): ModelLoadError: .*ner/model"):
        inference.apply_pipeline(pipeline, path, tmp_path / "out", workers=2, shard_size=2, quiet=True)
    assert not list((tmp_path / "out").glob("shard-*"))


def ray_worker_pids():
    """Processes of Ray Data actors running ShardAnnotator (their titles name it)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ShardAnnotator" in title:
            pids.append(int(pid))
    return pids


def test_a_dead_ray_worker_ends_the_job_with_an_error(local_ray, saved_pipelines, tmp_path, monkeypatch):
    """Ray Data restarts a dead actor and retries its shard without end; apply's
    actors are not restarted, so a dead one ends the job like a local worker."""
    path, out = write_input(tmp_path / "in.jsonl"), tmp_path / "out"
    real_write = inference.write_shard

    def write_then_kill_the_workers(target, data):
        real_write(target, data)
        for pid in ray_worker_pids():
            os.kill(pid, signal.SIGKILL)

    monkeypatch.setattr(inference, "write_shard", write_then_kill_the_workers)
    with pytest.raises(WorkerFailed, match=r"a Ray worker failed: The actor died .* pid: \d+ .*rerun the same command"):
        inference.apply_pipeline(saved_pipelines["ner"], path, out, engine="ray", workers=2, shard_size=1, quiet=True)
    assert 1 <= len(list(out.glob("shard-*.sha256"))) < len(TEXTS)


def test_a_folder_of_text_and_jsonl_files_reads_in_sorted_file_order(tmp_path):
    (tmp_path / "b.txt").write_text("first line\n\n  \nsecond line {not json}\n", encoding="utf8")
    write_input(tmp_path / "a.jsonl")
    records, bad = read_records(tmp_path)
    assert [r.text for r in records] == TEXTS + ["first line", "second line {not json}"] and bad == []
    assert [(Path(r.file).name, r.line) for r in records[-2:]] == [("b.txt", 1), ("b.txt", 4)]
