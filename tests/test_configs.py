"""Every shipped pipeline config validates through `spacy debug config` (every
object in the tree built, [initialize] and [training] checked), both as shipped
and after `spacy init fill-config`'s auto-fill, and an `nlp` built from them;
each is what `spacy_mlm init-config` writes, `spacy debug data` runs clean on
it, and init-config's output trains.
The encoder path points at the tiny test model, so nothing large is loaded. The
pretraining config lives apart, in configs/pretraining/ (tests/pretraining/test_config.py)."""
from pathlib import Path

import pytest
import spacy
from spacy.cli.debug_config import debug_config
from thinc.api import Config

import spacy_mlm  # noqa: F401
from spacy_mlm.training.config_templates import SHIPPED, SHIPPED_PRETRAINING, render_shipped

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
CONFIGS = sorted(CONFIG_DIR.glob("*.cfg"))


def present(config: Config, overrides: dict) -> dict:
    """The overrides whose section and key exist in `config` (spaCy refuses new ones)."""
    kept = {}
    for dotted, value in overrides.items():
        section, key = dotted.rsplit(".", 1)
        block = config
        for part in section.split("."):
            block = block.get(part, {}) if isinstance(block, dict) else {}
        if key in block:
            kept[dotted] = value
    return kept


@pytest.fixture(scope="module")
def overrides(tiny_model_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("config_data")
    for name in ("train", "dev"):
        (data / f"{name}.jsonl").write_text('{"text": "a", "label": "x"}\n', encoding="utf8")
    return {
        "paths.encoder": str(tiny_model_dir),
        "paths.train": str(data / "train.jsonl"),
        "paths.dev": str(data / "dev.jsonl"),
    }


def test_there_are_configs_and_all_are_pipelines():
    names = {p.name for p in CONFIGS}
    assert {"ner.cfg", "textcat.cfg", "nli.cfg"} <= names
    assert all("nlp" in Config().from_disk(path, interpolate=False) for path in CONFIGS)
    assert (CONFIG_DIR / "pretraining" / "pretrain.cfg").is_file()


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates(path, overrides, capsys, tmp_path):
    raw = Config().from_disk(path, interpolate=False)
    used = present(raw, overrides)
    debug_config(path, overrides=used)  # as shipped: complete, no fill-config needed
    assert "Config is valid" in capsys.readouterr().out
    config = spacy.util.load_config(path, overrides=used)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    filled = tmp_path / path.name
    nlp.config.to_disk(filled)  # what `spacy init fill-config` writes
    debug_config(filled)  # exits (SystemExit) on a validation error
    assert "Config is valid" in capsys.readouterr().out
    assert nlp.pipe_names == list(config["nlp"]["pipeline"])
    encoders = [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory == "mlm_encoder"]
    assert encoders, f"{path.name} has no mlm_encoder component"
    for name in encoders:
        assert nlp.get_pipe(name).model.attrs["path"] == str(overrides["paths.encoder"])


def test_ner_crf_variant_is_an_override_and_no_size_is_written_down(overrides):
    """The CRF NER is `configs/ner.cfg` with `components.ner.model.crf = true`, and a
    config naming another encoder (the tiny one: width 32, 2 layers, where
    the configs were written for MiniLM's 384 and 6) initializes and trains
    without editing a number."""
    from spacy.tokens import Span
    from spacy.training import Example

    from spacy_mlm.models.tagger import tagger_head

    config = spacy.util.load_config(
        CONFIG_DIR / "ner.cfg", overrides={**overrides, "components.ner.model.crf": True}, interpolate=True
    )
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    ref = nlp.make_doc("Anna lives in Oslo")
    ref.ents = [Span(ref, 0, 1, label="PER"), Span(ref, 3, 4, label="LOC")]
    egs = [Example(nlp.make_doc(ref.text), ref)]
    optimizer = nlp.initialize(lambda: egs)
    losses = nlp.update(egs, sgd=optimizer)
    assert losses["ner"] > 0
    ner = nlp.get_pipe("ner")
    assert ner.model.get_ref("tok2vec").get_dim("nO") == 32
    assert tagger_head(ner.model).transitions.shape == (5, 5)


# -- the shipped configs are init-config's, and spaCy's tools read them --------------

ASSETS = Path(__file__).resolve().parents[1] / "project" / "assets_default"


@pytest.mark.parametrize("name", [*SHIPPED, SHIPPED_PRETRAINING])
def test_shipped_config_is_what_init_config_writes(name):
    """configs/ is made by the templates (edit spacy_mlm/training/templates, then
    rewrite the file with the command in its header)."""
    assert (CONFIG_DIR / name).read_text(encoding="utf8") == render_shipped(name), (
        f"configs/{name} differs from its template; rewrite it with the command in its 'Written by' line")


def test_shipped_configs_name_no_environment_path(tmp_path):
    """No encoder path is right in every environment, so the shipped configs name
    none and each run passes --paths.encoder; `init-config` without --encoder writes the same."""
    from typer.testing import CliRunner

    from spacy_mlm.cli import app

    for path in CONFIGS:
        assert Config().from_disk(path, interpolate=False)["paths"]["encoder"] is None, path.name
        assert "site-packages" not in path.read_text(encoding="utf8"), path.name
    result = CliRunner().invoke(app, ["init-config", str(tmp_path / "ner.cfg"), "--task", "ner", "--precision", "fp32"])
    assert result.exit_code == 0, result.output
    assert Config().from_disk(tmp_path / "ner.cfg", interpolate=False)["paths"]["encoder"] is None


def test_every_shipped_pipeline_config_comes_from_a_template():
    assert {p.name for p in CONFIGS} == set(SHIPPED)


@pytest.fixture(scope="module")
def task_data(tmp_path_factory):
    """Small train/dev files of each task's usual format (the project's embedded data)."""
    from spacy_mlm.readers.conll import conll_to_docbin

    out = tmp_path_factory.mktemp("task_data")
    conll_to_docbin(ASSETS / "conll2003" / "train.txt", out / "train.spacy")
    conll_to_docbin(ASSETS / "conll2003" / "valid.txt", out / "dev.spacy")
    docbins = {"paths.train": str(out / "train.spacy"), "paths.dev": str(out / "dev.spacy")}
    # spaCy's debug data fails a training set under 100 examples: WiC train and dev together (144 pairs)
    wic_train = out / "wic.data.txt"
    for kind in ("data", "gold"):
        text = "".join((ASSETS / "wic" / split / f"{split}.{kind}.txt").read_text(encoding="utf8") for split in ("train", "dev"))
        (out / f"wic.{kind}.txt").write_text(text, encoding="utf8")
    return {
        "ner": docbins,
        "vectors": docbins,
        "textcat": {"paths.train": str(ASSETS / "sst2" / "train.tsv"), "paths.dev": str(ASSETS / "sst2" / "dev.tsv")},
        "senses": {"paths.train": str(wic_train), "paths.dev": str(ASSETS / "wic" / "dev" / "dev.data.txt")},
        "nli": {"paths.train": str(ASSETS / "snli" / "dev.jsonl"),
                "paths.dev": str(ASSETS / "mnli_sample" / "dev_matched_sample1000.tsv")},
    }


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_spacy_debug_data_runs_clean_with_only_paths_given(name, task_data, tiny_model_dir, capsys):
    """`spacy debug data` builds the optimizer from the raw [training.optimizer]
    section (the learning-rate schedule's total_steps is '${training.max_steps}'
    there) and initializes the pipeline on the training corpus."""
    from spacy.cli.debug_data import debug_data

    overrides = {**task_data[SHIPPED[name]["task"]], "paths.encoder": str(tiny_model_dir)}
    debug_data(CONFIG_DIR / name, config_overrides=overrides, silent=False)
    out = capsys.readouterr().out
    assert "Pipeline can be initialized with data" in out and "Corpus is loadable" in out
    assert "✘" not in out, out


INIT_CONFIG_RUNS = [
    ("ner", ["--crf"], {}),
    ("textcat", [], {"corpora.dev.limit": 20}),
    ("nli", [], {"corpora.dev.limit": 20}),
    ("vectors", [], {}),
    ("senses", [], {}),
]


@pytest.mark.parametrize("task,flags,extra", INIT_CONFIG_RUNS, ids=[run[0] for run in INIT_CONFIG_RUNS])
def test_init_config_writes_a_config_that_trains(task, flags, extra, task_data, tiny_model_dir, tmp_path, capfd):
    """init-config on the tiny encoder writes what the template renders, and
    `spacy train` runs it for a few steps, with progress lines on stderr (not
    a terminal) and spaCy's table of losses and scores on stdout."""
    from spacy.cli.train import train
    from typer.testing import CliRunner

    from spacy_mlm.cli import app
    from spacy_mlm.training.config_templates import render_pipeline_config

    path = tmp_path / f"{task}.cfg"
    result = CliRunner().invoke(app, ["init-config", str(path), "--task", task, "--encoder", str(tiny_model_dir), *flags])
    assert result.exit_code == 0, result.output
    text = path.read_text(encoding="utf8")
    assert text == render_pipeline_config(task, str(tiny_model_dir), crf=bool(flags), output=str(path))
    assert f"init-config {path} --task {task} --encoder {tiny_model_dir}" in text
    steps = 1 if task == "vectors" else 4
    overrides = {**task_data[task], "training.max_steps": steps, "training.eval_frequency": 2,
                 "training.logger.progress_interval": 0, **extra}
    train(path, tmp_path / "out", overrides=overrides)
    out, err = capfd.readouterr()
    assert f"train, epoch 0: {steps}/{steps} steps (100%)" in err and "steps/s" in err
    assert "\r" not in err
    assert "SCORE" in out.upper() and (tmp_path / "out" / "model-last" / "config.cfg").is_file()
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["encoder", SHIPPED[f"{task}.cfg"]["task"]]
    if task == "ner":
        assert nlp.config["components"]["ner"]["model"]["crf"] is True


def test_init_pretrain_config_is_the_shipped_one_and_names_its_source(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from spacy_mlm.cli import app
    from spacy_mlm.pretraining.config import load_pretraining_config

    path = tmp_path / "pretrain.cfg"
    result = CliRunner().invoke(app, ["init-pretrain-config", str(path), "--source", str(tiny_model_dir)])
    assert result.exit_code == 0, result.output
    shipped = (CONFIG_DIR / SHIPPED_PRETRAINING).read_text(encoding="utf8")
    body = lambda text: text.split("\n[paths]", 1)[1]  # noqa: E731
    assert body(path.read_text(encoding="utf8")) == body(shipped).replace("source = null", f'source = "{tiny_model_dir}"', 1)
    config = load_pretraining_config(path, {"paths.train": "corpus.txt"})
    assert config["pretraining"]["source"] == str(tiny_model_dir)


def test_init_config_refuses_what_it_cannot_write(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from spacy_mlm.cli import app

    runner = CliRunner()
    cases = [
        (["--task", "pos", "--encoder", str(tiny_model_dir)], "--task must be one of ner, textcat, nli, vectors"),
        (["--task", "textcat", "--crf", "--encoder", str(tiny_model_dir)], "--crf is for the ner task"),
        (["--task", "ner", "--encoder", str(tmp_path)], "has no config.json"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["init-config", str(tmp_path / "x.cfg"), *args])
        assert result.exit_code != 0 and message in result.output, result.output
        assert not (tmp_path / "x.cfg").exists()


def test_spacy_assemble_builds_the_vectors_config_and_sources_trained_components(tiny_model_dir, tmp_path):
    """`spacy assemble configs/vectors.cfg` needs no data; a config that sources
    the encoder and the tagger of a saved pipeline and adds mlm_vectors
    predicts what the saved pipeline does."""
    from spacy.cli import app as spacy_app
    from spacy.training import Example
    from typer.testing import CliRunner

    runner = CliRunner()
    result = runner.invoke(spacy_app, ["assemble", str(CONFIG_DIR / "vectors.cfg"), str(tmp_path / "vectors"),
                                       "--paths.encoder", str(tiny_model_dir)])
    assert result.exit_code == 0, result.output
    vectors = spacy.load(tmp_path / "vectors")
    assert vectors.pipe_names == ["encoder", "vectors"] and vectors("a pond")[1].has_vector

    trained = spacy.blank("en")
    trained.add_pipe("mlm_encoder", name="encoder", config={"model": {"path": str(tiny_model_dir)}})
    trained.add_pipe("mlm_ner", name="ner")
    doc = trained.make_doc("Anna lives in Oslo")

    trained.initialize(lambda: [Example.from_dict(doc, {"entities": [(0, 4, "PER"), (14, 18, "LOC")]})])
    trained.to_disk(tmp_path / "trained")
    (tmp_path / "assemble.cfg").write_text(
        '[paths]\ntrained = null\n\n[nlp]\nlang = "en"\npipeline = ["encoder","ner","vectors"]\n\n[components]\n\n'
        "[components.encoder]\nsource = ${paths.trained}\n\n[components.ner]\nsource = ${paths.trained}\n\n"
        '[components.vectors]\nfactory = "mlm_vectors"\n', encoding="utf8")
    result = runner.invoke(spacy_app, ["assemble", str(tmp_path / "assemble.cfg"), str(tmp_path / "assembled"),
                                       "--paths.trained", str(tmp_path / "trained")])
    assert result.exit_code == 0, result.output
    assembled, text = spacy.load(tmp_path / "assembled"), "Peter Grant flew to Paris"
    assert assembled.pipe_names == ["encoder", "ner", "vectors"]
    reference = spacy.load(tmp_path / "trained")
    assert [(e.start, e.end, e.label_) for e in assembled(text).ents] == [
        (e.start, e.end, e.label_) for e in reference(text).ents]
    assert (assembled(text)._.mlm_encoding.hidden == reference(text)._.mlm_encoding.hidden).all()


@pytest.mark.parametrize("task", ["textcat", "nli"])
def test_spacy_assemble_sources_a_trained_classifier(tiny_model_dir, tmp_path, task):
    """A config that sources the encoder and the classifier of a saved textcat or
    pair (NLI) pipeline assembles into one that scores as the saved one does,
    pairs included (the pair-input flag travels with the sourced component)."""
    from spacy.cli import app as spacy_app
    from spacy.training import Example
    from typer.testing import CliRunner

    from spacy_mlm import classify_pair, make_pair_doc

    trained = spacy.blank("en")
    trained.add_pipe("mlm_encoder", name="encoder", config={"model": {"path": str(tiny_model_dir)}})
    trained.add_pipe("mlm_textcat", name="classifier")
    rows = [("A man sleeps .", "A person rests .", "yes"), ("A dog runs .", "A cat sleeps .", "no")]
    make = (lambda a, b: trained.make_doc(f"{a} {b}")) if task == "textcat" else (
        lambda a, b: make_pair_doc(trained, a, b))
    trained.initialize(lambda: [Example.from_dict(make(a, b), {"cats": {"yes": float(y == "yes"), "no": float(y == "no")}})
                                for a, b, y in rows])
    trained.to_disk(tmp_path / "trained")
    (tmp_path / "assemble.cfg").write_text(
        '[paths]\ntrained = null\n\n[nlp]\nlang = "en"\npipeline = ["encoder","classifier"]\n\n[components]\n\n'
        "[components.encoder]\nsource = ${paths.trained}\n\n[components.classifier]\nsource = ${paths.trained}\n",
        encoding="utf8")
    result = CliRunner().invoke(spacy_app, ["assemble", str(tmp_path / "assemble.cfg"), str(tmp_path / "assembled"),
                                            "--paths.trained", str(tmp_path / "trained")])
    assert result.exit_code == 0, result.output
    assembled, reference = spacy.load(tmp_path / "assembled"), spacy.load(tmp_path / "trained")
    assert assembled.get_pipe("classifier").cfg.get("pair_input") == (task == "nli")
    if task == "textcat":
        assert assembled("A boy climbs a tree .").cats == pytest.approx(reference("A boy climbs a tree .").cats)
    else:
        pair = ("A boy climbs a tree .", "A child climbs .")
        assert classify_pair(assembled, *pair) == pytest.approx(classify_pair(reference, *pair))
