"""Every command reports a bad file, model or option the same way: one
`error: ...` line on stderr naming what was wrong, a non-zero exit status, and
no traceback unless `--verbose` is given (`spacy_mlm/cli/failures.py`)."""
import subprocess
import sys

import pytest
import spacy
from typer.testing import CliRunner

from spacy_mlm.cli import app
from spacy_mlm.cli.failures import describe_failure, split_verbose


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_errors")
    (d / "four.conll").write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n", encoding="utf8")
    (d / "empty.conll").write_text("-DOCSTART- -X- -X- O\n\n", encoding="utf8")
    (d / "unlabelled.jsonl").write_text('{"premise": "A", "hypothesis": "B", "label": "-"}\n', encoding="utf8")
    (d / "not_a_pipeline").mkdir()
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "ORG", "pattern": "EU"}])
    nlp.to_disk(d / "ruler")
    return d


# (arguments with {d} for the files' folder, what the one line must say, exit status)
CASES = {
    "convert_missing_file": ("convert-conll {d}/nope.conll {d}/o.spacy", "nope.conll: file not found", 1),
    "convert_tag_column_out_of_range": (
        "convert-conll {d}/four.conll {d}/o.spacy --tag-column 5", "four.conll, line 1: tag column 5 is not", 1),
    "convert_no_sentences": ("convert-conll {d}/empty.conll {d}/o.spacy", "empty.conll: no sentences", 1),
    "convert_unknown_option": ("convert-conll {d}/four.conll {d}/o.spacy --bogus", "No such option: --bogus", 2),
    "convert_bad_number": ("convert-conll {d}/four.conll {d}/o.spacy --n-sents many", "'--n-sents'", 2),
    "convert_missing_argument": ("convert-conll {d}/four.conll", "Missing argument", 2),
    "evaluate_ner_missing_model": ("evaluate-ner {d}/no_model {d}/four.conll", "no_model", 1),
    "evaluate_task_the_pipeline_cannot_do": (
        "evaluate {d}/ruler {d}/unlabelled.jsonl {d}/out --task nli", "task nli needs a component", 1),
    "compare_missing_model": ("compare {d}/ruler {d}/no_model {d}/four.conll", "no_model", 1),
    "encode_not_a_model": ("encode {d}/not_a_pipeline hello", "not_a_pipeline", 1),
    "export_encoder_missing_pipeline": ("export-encoder {d}/no_model {d}/hf", "no_model", 1),
    "export_encoder_no_encoder": ("export-encoder {d}/ruler {d}/hf", "has no mlm_encoder", 2),
    "fill_mask_missing_model": ("fill-mask {d}/no_model 'The ___ .'", "no_model: no such directory", 1),
    "pretrain_missing_config": ("pretrain {d}/no.cfg {d}/out", "no.cfg", 2),
    "fit_transform_missing_model": ("fit-transform {d}/no_model {d}/four.conll {d}/out", "no_model", 1),
    "wic_missing_data": ("wic {d}/no_model {d}/no_wic", "no_", 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_error_line_and_a_nonzero_status(files, case):
    import shlex

    args, says, status = CASES[case]
    result = CliRunner().invoke(app, shlex.split(args.format(d=files)))
    lines = result.stderr.splitlines()
    assert result.exit_code == status, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr
    assert "Traceback" not in result.output


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "spacy_mlm", *args], capture_output=True, text=True, timeout=120)


def test_the_installed_command_prints_the_traceback_only_with_verbose(files):
    args = ["convert-conll", str(files / "four.conll"), str(files / "o.spacy"), "--tag-column", "5"]
    plain = run_cli(*args)
    assert plain.returncode == 1 and plain.stderr.strip().splitlines() == [
        f"error: {files / 'four.conll'}, line 1: tag column 5 is not a tag column of this line: it has 4 columns "
        "(the word in column 0, tags in 1 to 3; -1 is the last)"
    ]
    verbose = run_cli(*args, "--verbose")
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr and "DataFormatError" in verbose.stderr


def test_a_bug_is_one_line_that_says_so():
    line = describe_failure(TypeError("unsupported operand"))
    assert line == "error: TypeError: unsupported operand (an internal error; rerun with --verbose for the traceback)"


def test_verbose_is_taken_anywhere_before_a_double_dash():
    assert split_verbose(["pretrain", "--verbose", "c.cfg"]) == (["pretrain", "c.cfg"], True)
    assert split_verbose(["fill-mask", "m", "--", "--verbose"]) == (["fill-mask", "m", "--", "--verbose"], False)
