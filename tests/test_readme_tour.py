"""README's five-minute tour runs as written, in order, from a fresh folder.

Every code block of the tour is read from README.md. Shell commands run with
their arguments as written (quotes, `$MINILM`, trailing comments as the shell
reads them) plus budget overrides appended for the slow ones (`BUDGETS`); each
`python -m MODULE ...` runs in this process (`runpy`), which saves an
interpreter start per command. The Python snippets run in one namespace, in
order, as one session would. The fresh folder has `configs/` from the checkout
and `../shared/data` holding the project's small embedded data sets, which
have the layout of the real ones, so that the tour takes seconds.

Not run here (minutes each): `spacy project run` (step 3; tests/project/ runs
the project). Step 5 loads what step 3 trains, so its model is made here with
the same config and tiny budgets instead.
"""
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BUDGETS = {
    ("spacy", "train"): ["--training.max_steps", "2", "--training.eval_frequency", "2",
                         "--corpora.train.limit", "16", "--corpora.dev.limit", "16"],
    ("spacy_mlm", "pretrain"): ["--pretraining.max_steps", "2", "--pretraining.eval_every", "2",
                                "--pretraining.eval_sequences", "8", "--pretraining.checkpoint_every", "2",
                                "--pretraining.batch_size", "4", "--pretraining.max_length", "64"],
    ("spacy_mlm", "wic"): ["--fit-sentences", "40"],
}
SKIPPED = {("spacy", "project"): "spaCy project workflows run for minutes (tests/project/ runs the project)"}
ASSIGNMENT = re.compile(r"^(\w+)=\$\((.*)\)$")
# What a snippet says it shows, checked right after it runs (keyed by a line of it).
SHOWS = {
    "enc = doc._.mlm_encoding": lambda ns: ns["enc"].token_vectors("mean").shape == (len(ns["doc"]), 384),
    "classify_pair(nlp,": lambda ns: set(ns["classify_pair"](ns["nlp"], "A man sleeps.", "A person rests."))
    == {"entailment", "neutral", "contradiction"},
    "river[4].similarity(money[6])": lambda ns: (ns["river"][4].text, ns["money"][6].text) == ("bank", "bank")
    and -1.0 <= ns["river"][4].similarity(ns["money"][6]) <= 1.0,
}


def tour_blocks():
    """(language, code) of each code block between "Five-minute tour" and the next section."""
    text = README.read_text(encoding="utf8")
    tour = text.split("## Five-minute tour", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(bash|python)\n(.*?)```", tour, re.S)


def shell_lines(code):
    return [line.strip() for line in code.replace("\\\n", " ").splitlines() if line.strip()]


def run_module(argv):
    """`python -m MODULE ARGS` in this process; fails on a non-zero exit."""
    saved = sys.argv
    sys.argv = [argv[0], *argv[1:]]
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except SystemExit as end:
        assert end.code in (0, None), f"`python -m {' '.join(argv)}` exited with {end.code}"
    finally:
        sys.argv = saved


@pytest.fixture
def fresh_folder(tmp_path, monkeypatch):
    clone = tmp_path / "checkout"
    clone.mkdir()
    (clone / "configs").symlink_to(REPO / "configs")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(REPO / "project" / "assets_default")
    monkeypatch.chdir(clone)
    return clone


def test_the_tour_runs_in_order(fresh_folder, minilm_path, capsys):
    blocks = tour_blocks()
    assert [lang for lang, _ in blocks].count("bash") >= 3 and [lang for lang, _ in blocks].count("python") >= 3
    variables, namespace, ran, skipped, checked = {}, {}, [], [], []
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for lang, code in blocks:
        if lang == "python":
            if 'spacy.load("project/training/nli/model-best")' in code:  # step 3's output
                stand_in = ["spacy", "train", "configs/nli.cfg", "--output", "project/training/nli",
                            "--paths.train", "../shared/data/snli/dev.jsonl",
                            "--paths.dev", "../shared/data/mnli_sample/dev_matched_sample1000.tsv",
                            "--paths.encoder", variables["MINILM"], *BUDGETS[("spacy", "train")]]
                run_module(stand_in)
            exec(compile(code, "README.md", "exec"), namespace)
            for marker, shows in SHOWS.items():
                if marker in code:
                    assert shows(namespace), f"the snippet with {marker!r} does not show what it says"
                    checked.append(marker)
            continue
        for line in shell_lines(code):
            assigned = ASSIGNMENT.match(line)
            if assigned:
                name, command = assigned.groups()
                variables[name] = subprocess.run(command, shell=True, env=env, check=True, capture_output=True,
                                                 text=True).stdout.strip()
                continue
            for name, value in variables.items():
                line = line.replace(f"${name}", shlex.quote(value))
            argv = shlex.split(line, comments=True)
            assert argv[:2] == ["python", "-m"], f"the tour runs python -m commands only: {line}"
            key = (argv[2], argv[3])
            if key in SKIPPED:
                skipped.append(line)
                continue
            run_module(argv[2:] + BUDGETS.get(key, []))
            ran.append(key)
    capsys.readouterr()
    assert ("spacy", "train") in ran and ("spacy_mlm", "pretrain") in ran and ("spacy_mlm", "wic") in ran
    assert len(skipped) == 2  # step 3's two project runs
    assert checked == list(SHOWS)
    assert (fresh_folder / "training" / "pretrained" / "model" / "config.json").is_file()
