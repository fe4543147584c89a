"""`spacy_mlm apply` / `apply_pipeline`: shards in input order that hold what
`nlp.pipe` gives doc by doc, bad records named by file and line, an interrupted
job resumed, on local processes and on a local 2-CPU Ray."""
import json
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
from spacy_mlm.util.outputs import OutputRefused

from .conftest import TEXTS, assert_same_docs


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
    """nlp.pipe's Docs, less the hidden states (the shards leave them out). The
    same batches give the same floats: padding changes the matmuls' shapes."""
    docs = list(nlp.pipe(TEXTS, batch_size=batch_size))
    for doc in docs:
        doc._.mlm_encoding = None
    return docs


def test_local_engine_writes_what_nlp_pipe_gives_in_input_order(saved_pipelines, tmp_path):
    summary = inference.apply_pipeline(saved_pipelines["crf"], write_input(tmp_path / "in.jsonl"), tmp_path / "out",
                                       shard_size=2, workers=2, quiet=True)  # nlp.pipe with n_process = 2
    assert (summary.shards, summary.written, summary.skipped, summary.records) == (3, 3, 0, len(TEXTS))
    nlp = spacy.load(saved_pipelines["crf"])
    assert_same_docs(shard_docs(tmp_path / "out", nlp.vocab), reference(nlp))


def test_bad_records_are_named_and_skipped_or_stop_the_job(tmp_path):
    path = write_input(tmp_path / "in.jsonl", bad=True)
    records, bad = read_records(path, on_bad_record="skip")
    assert [r.text for r in records] == TEXTS
    assert [(b.file, b.line) for b in bad] == [(str(path), 2), (str(path), 3)]
    assert "invalid JSON" in str(bad[0]) and "field 'text' must be a string, got int" in str(bad[1])
    with pytest.raises(DataFormatError, match=r"in.jsonl, line 2: invalid JSON"):
        inference.apply_pipeline("unused", path, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_an_interrupted_job_resumes_where_it_stopped(saved_pipelines, tmp_path, monkeypatch):
    path, out = write_input(tmp_path / "in.jsonl"), tmp_path / "out"
    written = []
    real_write = inference.atomic_write_bytes

    def write_then_die(target, data):
        if written:
            raise KeyboardInterrupt  # killed while writing the second shard
        written.append(target)
        real_write(target, data)

    monkeypatch.setattr(inference, "atomic_write_bytes", write_then_die)
    with pytest.raises(KeyboardInterrupt):
        inference.apply_pipeline(saved_pipelines["crf"], path, out, shard_size=2, quiet=True)
    monkeypatch.undo()
    assert sorted(p.name for p in out.glob("shard-*")) == ["shard-00000.spacy"]
    (out / ".shard-00001.spacy.x1y2.tmp").write_bytes(b"half a shard")  # what a kill -9 mid-write leaves
    before = (out / "shard-00000.spacy").stat().st_mtime_ns
    summary = inference.apply_pipeline(saved_pipelines["crf"], path, out, shard_size=2, quiet=True)
    assert (summary.written, summary.skipped, summary.records) == (2, 1, 3)
    assert (out / "shard-00000.spacy").stat().st_mtime_ns == before
    nlp = spacy.load(saved_pipelines["crf"])
    assert_same_docs(shard_docs(out, nlp.vocab), reference(nlp))
    with pytest.raises(SpacyMlmError, match="holds the output of another job \\(shard_size differ\\)"):
        inference.apply_pipeline(saved_pipelines["crf"], path, out, shard_size=3, quiet=True)


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
    assert_same_docs(shard_docs(tmp_path / "out", nlp.vocab), reference(nlp, batch_size=2))  # a worker's batch: a shard


def test_a_folder_of_text_and_jsonl_files_reads_in_sorted_file_order(tmp_path):
    (tmp_path / "b.txt").write_text("first line\n\n  \nsecond line {not json}\n", encoding="utf8")
    write_input(tmp_path / "a.jsonl")
    records, bad = read_records(tmp_path)
    assert [r.text for r in records] == TEXTS + ["first line", "second line {not json}"] and bad == []
    assert [(Path(r.file).name, r.line) for r in records[-2:]] == [("b.txt", 1), ("b.txt", 4)]
