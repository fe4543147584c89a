"""Install a `spacy package` sdist with pip into a fresh folder, load it with
`spacy.load` by its package name in a clean process (offline, another working
directory, so nothing resolves to the training outputs) and check it predicts
exactly what the pipeline directory predicts: the same entities and classes,
and the same encoder vectors and NER tag probabilities up to float noise.

    python scripts/check_package.py training/ner/model-best packages/.../dist/x.tar.gz corpus/ner_dev.spacy
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

N_TEXTS = 20
TOLERANCE = 1e-5
PREDICT = "--predict"  # the first argument that makes this script print `predictions` as JSON

def predictions(name_or_path: str, data: str, n_texts: int) -> dict:
    """What the pipeline `name_or_path` (a directory or an installed package)
    predicts for the first `n_texts` texts of `data`."""
    import numpy
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.load(name_or_path)
    for name in nlp.pipe_names:  # compare NER tag probabilities too, not just the decoded entities
        if nlp.get_pipe_meta(name).factory == "mlm_ner":
            nlp.get_pipe(name).cfg["store_probs"] = True
    texts = [doc.text for doc in DocBin().from_disk(data).get_docs(nlp.vocab)][:n_texts]
    out = []
    for doc in nlp.pipe(texts):
        enc = doc._.get("mlm_encoding") if doc.has_extension("mlm_encoding") else None
        probs = doc._.get("tag_probs") if doc.has_extension("tag_probs") else None
        out.append({
            "ents": [[e.start, e.end, e.label_] for e in doc.ents],
            "cats": doc.cats,
            "hidden": None if enc is None else numpy.asarray(enc.hidden).tolist(),
            "tag_probs": None if probs is None else numpy.asarray(probs).tolist(),
        })
    return {"pipeline": nlp.pipe_names, "docs": out}


def predictions_in_a_clean_process(package: str, data: Path, env: dict, cwd: str) -> dict:
    """`predictions` of an installed package, in a new interpreter that sees only
    `env`'s PYTHONPATH and runs in `cwd` (so nothing resolves to the training outputs)."""
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), PREDICT, package, str(data), str(N_TEXTS)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=cwd, check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def max_difference(a, b) -> float:
    import numpy

    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    a, b = numpy.asarray(a), numpy.asarray(b)
    if a.shape != b.shape:
        return float("inf")
    return float(numpy.abs(a - b).max()) if a.size else 0.0


def compare(before: dict, after: dict) -> list:
    problems = []
    if before["pipeline"] != after["pipeline"]:
        problems.append(f"pipelines differ: {before['pipeline']} vs {after['pipeline']}")
    for i, (a, b) in enumerate(zip(before["docs"], after["docs"])):
        if a["ents"] != b["ents"]:
            problems.append(f"doc {i}: entities {a['ents']} vs {b['ents']}")
        if a["cats"].keys() != b["cats"].keys() or any(abs(a["cats"][k] - b["cats"][k]) > TOLERANCE for k in a["cats"]):
            problems.append(f"doc {i}: cats {a['cats']} vs {b['cats']}")
        for key in ("hidden", "tag_probs"):
            diff = max_difference(a[key], b[key])
            if diff > TOLERANCE:
                problems.append(f"doc {i}: {key} differ by up to {diff:g}")
    if len(before["docs"]) != len(after["docs"]):
        problems.append(f"{len(before['docs'])} docs vs {len(after['docs'])}")
    return problems


def main(model: str, sdist: str, data: str) -> int:
    model_path, sdist_path, data_path = Path(model).resolve(), Path(sdist).resolve(), Path(data).resolve()
    package = sdist_path.name.rsplit("-", 1)[0]  # en_<name>-<version>.tar.gz
    before = predictions(str(model_path), str(data_path), N_TEXTS)  # the directory, in this process
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "site"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
             "--target", str(target), str(sdist_path)],
            check=True,
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]),
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        after = predictions_in_a_clean_process(package, data_path, env, tmp)
    problems = compare(before, after)
    n_ents = sum(len(d["ents"]) for d in before["docs"])
    if problems:
        print(f"error: the installed package {package} predicts differently:", *problems[:10], sep="\n  ")
        return 1
    print(f"{package}: installed with pip and loaded with spacy.load; identical predictions on "
          f"{len(before['docs'])} texts ({n_ents} entities, encoder vectors and tag probabilities within {TOLERANCE})")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == [PREDICT]:
        print(json.dumps(predictions(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        sys.exit(0)
    sys.exit(main(*sys.argv[1:4]))
