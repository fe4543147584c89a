"""`spacy package` output installs with pip and, loaded by name with
`spacy.load` in a clean offline process, predicts exactly what the pipeline
directory predicts (entities, encoder vectors, tag probabilities): the check
the project's `package` command runs, on a small NER pipeline trained here."""
import random
import runpy
import subprocess
import sys
from pathlib import Path

import spacy
from spacy.tokens import DocBin
from spacy.training import Example

import spacy_mlm  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
SENTENCES = [
    ("Anna Berg works in Oslo .", [(0, 2, "PER"), (4, 5, "LOC")]),
    ("Peter flew to Paris .", [(0, 1, "PER"), (3, 4, "LOC")]),
    ("Maria Lopez lives in Berlin .", [(0, 2, "PER"), (4, 5, "LOC")]),
]


def trained_ner(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_ner", config={"model": {"tok2vec": {"width": 32}}})
    examples = []
    for text, ents in SENTENCES:
        doc = nlp.make_doc(text)
        examples.append(Example.from_dict(doc, {"entities": [(doc[s:e].start_char, doc[s:e].end_char, l) for s, e, l in ents]}))
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.01
    rng = random.Random(0)
    for _ in range(25):
        rng.shuffle(examples)
        nlp.update(examples, sgd=optimizer)
    return nlp, [eg.reference for eg in examples]


def test_package_installs_and_predicts_identically(tiny_model_dir, tmp_path, capfd):
    nlp, gold = trained_ner(tiny_model_dir)
    assert any(len(nlp(doc.text).ents) for doc in gold), "the pipeline should find entities before packaging"
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=gold).to_disk(tmp_path / "data.spacy")
    (tmp_path / "packages").mkdir()
    subprocess.run(
        [sys.executable, "-m", "spacy", "package", str(tmp_path / "model"), str(tmp_path / "packages"),
         "--name", "mlm_test", "--version", "0.0.1", "--force"],
        check=True, stdout=subprocess.DEVNULL,
    )
    sdist = tmp_path / "packages" / "en_mlm_test-0.0.1" / "dist" / "en_mlm_test-0.0.1.tar.gz"
    # The script's main in this process (the pipeline directory's predictions are made here, as the script
    # makes them in its own process); the installed package is still loaded in a clean interpreter.
    check_package = runpy.run_path(str(REPO / "project" / "scripts" / "check_package.py"))["main"]
    status = check_package(str(tmp_path / "model"), str(sdist), str(tmp_path / "data.spacy"))
    output = capfd.readouterr().out
    assert status == 0, output[-3000:]
    assert "en_mlm_test: installed with pip and loaded with spacy.load; identical predictions on 3 texts" in output
    assert "(0 entities" not in output
