"""`spacy_mlm demo`: the whole package at work on real data in one command. Unpacks the spaCy project the package ships
(package data: project.yml, scripts/, the embedded default data in
assets_default/, and the training configs) into a working folder, runs its
`demo` workflow there for real (convert the default data, pretrain the packaged
MiniLM on its raw text, train NER, text classification and NLI from the
pretrained encoder, evaluate them, WiC), then prints the results table and one
example of each capability from the trained outputs. Works the same from a
checkout (editable install) and from an installed wheel."""
import fnmatch
import json
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Dict, Iterator, List, Tuple

import typer

from ..errors import InstallationError
from ..util.io import atomic_write_bytes
from . import app
from .options import PASSES_OVERRIDES

DEFAULT_DIR = Path("spacy-mlm-demo")
# What the package ships of each tree: (its top-level entries, as names or
# patterns; the files kept inside them), the files setup.py's package_data lists.
# Not shipped: the generated folders a run writes next to them (assets/, corpus/,
# training/, metrics/, packages/, project.lock) and the __init__.py markers.
SHIPPED: Dict[str, Tuple[Tuple[str, ...], str]] = {
    "project": (("project.yml", "README.md", "scripts", "assets_default"), "*"),
    "configs": (("*",), "*.cfg"),
}

# One example per capability, in the style of the data each model was trained
# on (Wikipedia sentences for NER, reviews, SNLI captions, Wikipedia prose).
EXAMPLE_SENTENCE = "Marie Curie studied physics at the University of Paris before she moved to Warsaw ."
EXAMPLE_REVIEW = "The staff were friendly, but the room was dirty and the breakfast was awful."
EXAMPLE_PAIR = ("A boy in a red shirt is climbing a tree in the park .", "A child is outdoors .")
EXAMPLE_BLANK = "Paris is ___ capital of France ."
EXAMPLE_USES = ("We sat on the bank and watched the boats .", "She opened an account at the bank .",
                "The bank raised its interest rates .")


def packaged_trees() -> Dict[str, object]:
    """The project and the configs as package data: importlib.resources
    Traversables of `spacy_mlm.project` and `spacy_mlm.configs`, which setup.py
    maps from the repository's project/ and configs/. Found through the import
    system, so from a wheel, an sdist install or an editable checkout alike."""
    try:
        return {name: resources.files(f"spacy_mlm.{name}") for name in SHIPPED}
    except ModuleNotFoundError as error:
        import spacy_mlm

        raise InstallationError(
            f"{error.name} (package data) not found: spacy_mlm was imported from {Path(spacy_mlm.__file__).parent}, "
            "a source folder that is not installed; install it (pip install . or pip install -e .) "
            "and run from another folder"
        ) from None


def shipped_files(tree, shipped) -> Iterator[Tuple[PurePosixPath, object]]:
    """(path inside the tree, file) for every shipped file of `tree`."""
    entries, file_pattern = shipped
    stack = [(PurePosixPath(entry.name), entry) for entry in tree.iterdir()
             if any(fnmatch.fnmatch(entry.name, pattern) for pattern in entries)]
    while stack:
        relative, node = stack.pop()
        if node.is_dir():
            stack.extend((relative / child.name, child) for child in node.iterdir() if child.name != "__pycache__")
        elif fnmatch.fnmatch(node.name, file_pattern):
            yield relative, node


def unpack_project(directory: Path) -> Path:
    """Write the packaged project into DIRECTORY/project and the configs into
    DIRECTORY/configs: the repository's layout, so project.yml's
    `configs: ../configs` and `data_dir: project/assets_default` (relative to the
    folder above the project) hold unchanged. Only files whose content differs
    are rewritten and outputs of earlier runs are left alone, so a rerun skips
    the steps that are done. Returns DIRECTORY/project."""
    for name, tree in packaged_trees().items():
        for relative, source in shipped_files(tree, SHIPPED[name]):
            target = directory / name / relative
            data = source.read_bytes()
            if not target.is_file() or target.read_bytes() != data:
                atomic_write_bytes(target, data)
    return directory / "project"


def results_table(project_dir: Path) -> List[Tuple[str, str, str, str]]:
    """(task, metric, value, note) rows from the workflow's metrics files."""
    rows = []
    history = project_dir / "training" / "pretrained" / "metrics.jsonl"
    if history.is_file():
        evals = [r for r in map(json.loads, history.read_text(encoding="utf8").splitlines()) if "eval_accuracy" in r]
        if evals:
            first, last = evals[0], evals[-1]
            rows.append(("pretraining (MLM)", "held-out masked-token accuracy", f"{100 * last['eval_accuracy']:.1f}",
                         f"{100 * first['eval_accuracy']:.1f} before, {last['step']} steps; perplexity "
                         f"{first['eval_perplexity']:.0f} -> {last['eval_perplexity']:.0f}"))
    for task, name in (("ner", "NER"), ("textcat", "text classification"), ("nli", "NLI (pairs)")):
        path = project_dir / "metrics" / task / "metrics.json"
        if not path.is_file():
            continue
        m = json.loads(path.read_text(encoding="utf8"))
        note = f"{m['n_examples']} dev examples"
        if "confusion_matrix" in m:
            note += f", always guessing the commonest label: {100 * commonest_label_share(m):.1f}"
        if "bootstrap" in m:
            b = m["bootstrap"]
            note += (f"; un-pretrained encoder {100 * m['baseline']['value']:.1f}: difference {100 * b['delta']:+.1f} "
                     f"(95% CI {100 * b['ci_low']:+.1f} .. {100 * b['ci_high']:+.1f}), p = {b['p_value']:.3f}")
        rows.append((name, m["metric"], f"{100 * m['value']:.1f}", note))
    for file, label in (("wic.json", "pretrained"), ("wic_base.json", "base")):
        path = project_dir / "metrics" / file
        if path.is_file():
            m = json.loads(path.read_text(encoding="utf8"))
            rows.append((f"WiC ({label} encoder)", "dev accuracy", f"{100 * m['dev_acc']:.1f}",
                         f"{m['transform']}, threshold {m['threshold']:.3f}"))
    return rows


def commonest_label_share(metrics) -> float:
    """The accuracy of always answering the dev set's commonest gold label (the
    confusion matrix's largest row): the floor a classifier must beat."""
    gold_counts = [sum(row) for row in metrics["confusion_matrix"]["rows_gold_columns_predicted"]]
    return max(gold_counts) / sum(gold_counts)


def chance_reading(project_dir: Path) -> str:
    """A line for each classifier no better than always guessing its commonest
    dev label: at the demo's budgets, sentence pairs get too few steps."""
    lines = []
    for task, name in (("textcat", "Text classification"), ("nli", "NLI")):
        path = project_dir / "metrics" / task / "metrics.json"
        m = json.loads(path.read_text(encoding="utf8")) if path.is_file() else {}
        if "confusion_matrix" in m and m["value"] <= commonest_label_share(m):
            lines.append(f"{name}: {100 * m['value']:.1f} is no better than always guessing the commonest label "
                         f"({100 * commonest_label_share(m):.1f}): too few training steps for this task "
                         "(--vars.train_steps).")
    return "\n".join(lines)


def comparison_reading(project_dir: Path) -> str:
    """What the NER bootstrap against the un-pretrained encoder says, in words:
    at the demo's budgets the difference is usually within chance, and the
    interval's width is what the dev set can tell apart."""
    path = project_dir / "metrics" / "ner" / "metrics.json"
    m = json.loads(path.read_text(encoding="utf8")) if path.is_file() else {}
    if "bootstrap" not in m:
        return ""
    b = m["bootstrap"]
    half_width = 50 * (b["ci_high"] - b["ci_low"])
    if b["p_value"] < 0.05:
        verdict = (f"Continued pretraining changed NER F1 by {100 * b['delta']:+.1f} (p = {b['p_value']:.3f}): "
                   "more than chance explains on these dev sentences.")
    else:
        verdict = (f"Pretrained vs un-pretrained encoder: {100 * b['delta']:+.1f} F1, p = {b['p_value']:.2f}, "
                   "within chance: a few dozen pretraining steps barely move the encoder.")
    return (f"{verdict}\nWith {m['n_examples']} dev sentences only differences beyond about +-{half_width:.0f} F1 "
            "are told apart; for a real test, pretrain longer on more text and score on more data"
            "\n(--vars.pretrain_steps, --vars.train_steps, --vars.data_dir).")


def print_table(rows) -> None:
    headers = ("task", "metric", "value (%)", "notes")
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(4)]
    line = "  ".join("-" * w for w in widths)
    typer.echo(line)
    for row in [headers, None, *rows]:
        typer.echo(line if row is None else "  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    typer.echo(line)


def print_examples(project_dir: Path) -> None:
    import spacy

    from ..fill_mask import FillMask
    from ..pipeline.textcat import classify_pair
    from ..vectors_pipeline import make_vectors_pipeline

    training = project_dir / "training"
    ner = spacy.load(training / "ner" / "model-best")
    doc = ner(EXAMPLE_SENTENCE)
    typer.echo(f"\nEntities   {doc.text}\n           " + ", ".join(f"{e.text} [{e.label_}]" for e in doc.ents))
    cats = spacy.load(training / "textcat" / "model-best")(EXAMPLE_REVIEW).cats
    best = max(cats, key=cats.get)
    typer.echo(f"Class      {EXAMPLE_REVIEW!r} -> {best} ({cats[best]:.2f})")
    probs = classify_pair(spacy.load(training / "nli" / "model-best"), *EXAMPLE_PAIR)
    label = max(probs, key=probs.get)
    typer.echo(f"NLI        {EXAMPLE_PAIR[0]!r} / {EXAMPLE_PAIR[1]!r} -> {label} ({probs[label]:.2f})")
    candidates = FillMask(training / "pretrained" / "model")(EXAMPLE_BLANK, top_k=5)[0]
    typer.echo(f"Fill-mask  {EXAMPLE_BLANK!r} -> " + ", ".join(f"{w} ({p:.2f})" for w, p in candidates)
               + "\n           (MiniLM ships without an MLM head. In the demo's few steps the new head learns which"
               + "\n           words are frequent, not yet which fit: a blank that wants a frequent word comes out"
               + "\n           right, a content word needs far longer pretraining; see docs/pretraining.md)")
    vectors = make_vectors_pipeline(training / "pretrained" / "model")
    banks = [next(t for t in vectors(text) if t.lower_ == "bank") for text in EXAMPLE_USES]
    river_money, money_money = banks[0].similarity(banks[1]), banks[1].similarity(banks[2])
    typer.echo(f"Similarity 'bank' (river) vs 'bank' (money): {river_money:.3f};  "
               f"'bank' (money) vs 'bank' (money): {money_money:.3f}")


@app.command("demo", short_help="Unpack and run the packaged spaCy project.",
             context_settings=PASSES_OVERRIDES)
def demo_cli(
    ctx: typer.Context,
    directory: Path = typer.Option(
        DEFAULT_DIR, "--dir",
        help="working folder: the packaged project is unpacked into DIR/project (configs into DIR/configs) "
             "and runs there; its outputs stay for the next run",
    ),
    workflow: str = typer.Option("demo", help="workflow to run (demo = embedded default data)"),
    run: bool = typer.Option(True, "--run/--no-run", help="run the workflow (else only report the last results)"),
    force: bool = typer.Option(
        False, help="rerun every command even if its inputs did not change (and use a --dir that is not an "
        "earlier demo folder)"),
):
    """Unpack the packaged spaCy project into --dir (default ./spacy-mlm-demo),
    run its demo workflow there, then print the results table and one example
    per capability. Extra options are passed on as project vars, e.g.
    --vars.train_steps 300."""
    from ..util.outputs import claim_output, mark_output

    started = time.time()
    project_dir = directory / "project"
    if run:
        with claim_output(directory, "demo", directory=True, replaces_whole=False, force=force):
            unpack_project(directory)
            mark_output(directory, "demo")  # a failed workflow's outputs are still the next run's to reuse
            command: List[str] = [sys.executable, "-m", "spacy", "project", "run", workflow, str(project_dir), *ctx.args]
            if force:
                command.append("--force")
            typer.echo("$ " + " ".join(command[1:]))
            if subprocess.run(command).returncode:
                typer.echo("error: the project workflow failed (see above)", err=True)
                raise typer.Exit(1)
    elif not (project_dir / "training").is_dir():
        typer.echo(f"error: no results in {project_dir} (run the demo there first: drop --no-run)", err=True)
        raise typer.Exit(1)
    typer.echo(f"\nResults ({project_dir}/metrics, charts and displaCy HTML there too)")
    print_table(results_table(project_dir))
    typer.echo("\n" + "\n".join(filter(None, (chance_reading(project_dir), comparison_reading(project_dir)))))
    print_examples(project_dir)
    typer.echo(f"\nDone in {time.time() - started:.0f} s.")
