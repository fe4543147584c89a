"""Distilled NER students on CoNLL-2003 against their teacher and the peers a
CPU user picks instead, every system in one run (issue 51).

  teacher         configs/ner.cfg with the CRF on MiniLM (6 layers), trained on
                  --n-train seeded CoNLL train sentences x --epochs (bench/ner_conll.py's
                  "ours_crf" budget: 2000 x 2), or --teacher DIR
  student_3l      `spacy_mlm distill`: the teacher's layers 1, 3, 5 (keep_every 2), its
                  heads and CRF, trained on the teacher's CRF marginals (temperature
                  --temperature) over unlabelled text: every CoNLL train sentence without
                  its labels plus WikiText-2 paragraphs (--n-wiki; the shared data holds its
                  valid and test splits, both read, not its train split), and the gold loss
                  on the teacher's own training sentences; --distill-steps x --distill-batch
  student_2l      the same with layers 2, 5 (keep_every 3)
  student_1l      the same with the top layer alone (keep_every 6)
  student_3l_u768h6  student_3l narrowed before distilling: 768 of each layer's 1536
                  feed-forward units and 6 of its 12 heads kept, those that add the most
                  to the layer's output over the first 512 texts ([distillation.student]
                  intermediate_size, attention_heads)
  student_3l_u384h4  the same with 384 units and 4 heads
  student_3l_u768h6_hidden   student_3l_u768h6 with the hidden-state loss (hidden_weight 1)
  student_3l_u768h6_lr2e-4   student_3l_u768h6 at twice the peak learning rate
                  (the teacher's outputs are cached on disk from the first epoch over the texts on)
  *_int8          each of those through `spacy_mlm optimize --precision int8`
  spacy_trf       spacy-transformers on the same MiniLM + spaCy's transition-based ner,
                  trained on the teacher's sentences and budget (bench/ner_conll.py's)
  spacy_cnn       `spacy init config --pipeline ner --optimize efficiency` (CPU), trained on
                  the teacher's sentences for --cnn-epochs epochs (its own recipe: Adam 0.001,
                  dropout 0.1, batches of 16): close to convergence on 2000 sentences
  ensemble        teachers of seeds --ensemble-seeds (the teacher above is seed 0; each trains on the
                  same sentences, the seed changes its initialisation, dropout and order),
                  their averaged CRF marginals distilled into a 6-layer student (the first
                  teacher's layers, keep_every 1) over every CoNLL train sentence without its
                  label and the gold loss on the teachers' sentences, --ensemble-steps x
                  --distill-batch, once per seed of --ensemble-student-seeds: dev F1 of each
                  teacher and student, their means and spreads (sample standard deviations);
                  and the control, the same student (the first student seed) distilled from
                  the first teacher alone: what more text gives without the ensemble
  sst2_teacher    SST-2 with mlm_textcat (the factories' defaults, trained as
                  bench/inference_speed.py trains its textcat: --sst2-train-size texts x
                  --epochs, peak lr 1e-4)
  sst2_student_3l its layers 1, 3, 5, distilled on the teacher's class probabilities over
                  --sst2-texts SST-2 train sentences without their labels, with the gold
                  loss on the teacher's training texts; --sst2-distill-steps x --distill-batch

Dev F1: exact-match entity F1 on the whole dev set (--quick: 200 sentences);
SST-2: accuracy on its whole dev set (872 texts); inference words/s: wall clock, batches of 64 sentences, --threads torch threads
(ONNX Runtime takes torch's count), best of --repeats passes.

    .venv/bin/python bench/distill.py            # over an hour on a 2-core CPU
    .venv/bin/python bench/distill.py --quick    # a smoke test: a few minutes

In parts (what a killed run had built is kept): `--reuse` takes the teacher, the
students and their int8 copies already under OUT instead of building them again,
so the training can run on a busy machine and the scoring later on a quiet core;
a distillation stopped part way goes on from its last checkpoint (one every
twentieth of its steps, the newest kept):

    .venv/bin/python bench/distill.py --systems teacher,student_3l,student_2l --no-score
    .venv/bin/python bench/distill.py --systems sst2_teacher,sst2_student_3l --no-score
    .venv/bin/python bench/distill.py --systems ensemble --reuse          # the ensemble line alone
    .venv/bin/python bench/distill.py --reuse    # builds what is missing, then scores every system

`--student-seed S` distils the student lines again with seed S (the teacher, its sentences and the
texts stay those of --seed) into OUT/NAME_seedS, for a spread over seeds; the JSON keeps the names.

Last line: one JSON object: each system's dev F1 and words/s, the ratios the
issue asks about, the budgets and the machine.
"""
import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import spacy
import torch

from harness import ner
from harness.common import (
    BenchParser, Stopwatch, print_result, read_paragraphs, seed_everything, write_atomically, write_json,
)
from ner_conll import build_spacy_trf
from spacy_mlm import doc_entities, score_entities

# name -> its [distillation] settings over the bench's (MiniLM: 6 layers of 1536 feed-forward units and 12 heads)
NARROW = {"student.keep_every": 2, "student.intermediate_size": 768, "student.attention_heads": 6}
STUDENTS = {
    "student_3l": {"student.keep_every": 2}, "student_2l": {"student.keep_every": 3},
    "student_1l": {"student.keep_every": 6},
    "student_3l_u768h6": NARROW,
    "student_3l_u384h4": {**NARROW, "student.intermediate_size": 384, "student.attention_heads": 4},
    "student_3l_u768h6_hidden": {**NARROW, "hidden_weight": 1.0},
    "student_3l_u768h6_lr2e-4": {**NARROW, "optimizer.learning_rate": 2e-4},
}


def train_teacher(args, sentences, out: Path, seed: int = None) -> Path:
    seed = args.seed if seed is None else seed
    seed_everything(seed)
    nlp = ner.build_ours(args.model, crf=True, precision="fp32")
    order = ner.batches(len(sentences), args.batch_size, args.epochs, seed)
    seconds = ner.train_spacy(nlp, ner.gold_examples(nlp, sentences), order, args.lr, 0.1)
    print(f"teacher (seed {seed}): {len(sentences)} sentences x {args.epochs} epoch(s) in {seconds:.0f}s", flush=True)
    nlp.to_disk(out)
    return out


def write_texts(args, out: Path, with_wiki: bool = True) -> Path:
    """CoNLL train sentences (text only) and (`with_wiki`) WikiText-2 paragraphs, one a line."""
    vocab = spacy.blank("en").vocab
    conll = [doc.text for doc in ner.load_sentences(args.train, vocab, args.n_conll_texts, args.seed)]
    wiki = []
    if with_wiki:
        files = sorted(Path(args.wiki).glob("*.txt")) if Path(args.wiki).is_dir() else [Path(args.wiki)]
        wiki = [paragraph for file in files for paragraph in read_paragraphs(file)]
        wiki = wiki[: args.n_wiki] if args.n_wiki else wiki
    write_atomically(out, lambda tmp: tmp.write_text("\n".join(conll + wiki) + "\n", encoding="utf8"))
    print(f"unlabelled text: {len(conll)} CoNLL sentences + {len(wiki)} WikiText-2 paragraphs", flush=True)
    return out


def run(command):
    print("$ " + " ".join(map(str, command)), flush=True)
    subprocess.run([str(c) for c in command], check=True)


def distill_student(args, teacher, texts: Path, gold: Path, settings: dict, out: Path,
                    steps: int = None, seed: int = None) -> Path:
    """`spacy_mlm distill` of `teacher` (a pipeline, or a list of them: an ensemble) into `out`,
    with `settings` ([distillation] ones, over the bench's) for the student's encoder and recipe."""
    steps = args.distill_steps if steps is None else steps
    seed = args.seed if seed is None else seed
    if args.reuse and (out / "model" / "meta.json").exists():
        print(f"reusing {out / 'model'}", flush=True)
        return out / "model"
    # a run stopped part way (the session ended, a kill) goes on from its last checkpoint with --reuse
    start = "--resume" if args.reuse and list((out / "checkpoints").glob("step-*")) else "--force"
    teacher = json.dumps([str(t) for t in teacher]) if isinstance(teacher, list) else teacher
    with Stopwatch() as clock:
        run([sys.executable, "-m", "spacy_mlm", "distill", args.config, out, start, "--quiet",
             "--paths.teacher", teacher, "--paths.texts", texts, "--paths.gold", gold,
             *(part for key, value in {
                 "max_steps": steps, "batch_size": args.distill_batch, "temperature": args.temperature, "seed": seed,
                 "checkpoint_every": max(1, steps // 20), "keep_checkpoints": 1, "cache_teacher": "true",
                 "optimizer.learning_rate": args.distill_lr, "optimizer.warmup_steps": steps // 10,
                 **settings}.items()
               for part in (f"--distillation.{key}", value))])
    print(f"distilled {out.name} in {clock.seconds:.0f}s", flush=True)
    return out / "model"


def int8(args, pipeline: Path, out: Path) -> Path:
    if args.reuse and (out / "meta.json").exists():
        print(f"reusing {out}", flush=True)
        return out
    run([sys.executable, "-m", "spacy_mlm", "optimize", pipeline, out, "--precision", "int8", "--force"])
    return out


def train_cnn(args, sentences):
    from spacy.cli.init_config import init_config
    from spacy.util import load_model_from_config, minibatch

    seed_everything(args.seed)
    config = init_config(lang="en", pipeline=["ner"], optimize="efficiency", gpu=False, pretraining=False,
                         silent=True)
    nlp = load_model_from_config(config, auto_fill=True)
    examples = ner.gold_examples(nlp, sentences)
    optimizer = nlp.initialize(lambda: examples)
    rng = random.Random(args.seed)
    with Stopwatch() as clock:
        for _ in range(args.cnn_epochs):
            rng.shuffle(examples)
            for batch in minibatch(examples, 16):
                nlp.update(batch, sgd=optimizer, drop=0.1)
    print(f"spacy_cnn: {len(sentences)} sentences x {args.cnn_epochs} epochs in {clock.seconds:.0f}s", flush=True)
    return nlp


def sst2_line(args, systems, results) -> None:
    """The SST-2 teacher and its 3-layer student: accuracy and words/s on SST-2 dev."""
    from spacy.tokens import DocBin

    from harness import textcat
    from inference_speed import train_textcat

    out = args.out / "sst2"
    out.mkdir(parents=True, exist_ok=True)
    budget = textcat.budget(model=args.model, train_size=args.sst2_train_size, epochs=args.epochs,
                            sst2_train=args.sst2_train, sst2_dev=args.sst2_dev)
    train_rows, dev_rows, labels = textcat.load_task("sst2", budget, args.seed)
    if args.reuse and (out / "teacher" / "meta.json").exists():
        teacher = out / "teacher"
        print(f"reusing {teacher}", flush=True)
    else:
        options = argparse.Namespace(textcat_train=args.sst2_train_size, epochs=args.epochs, seed=args.seed,
                                     sst2_train=args.sst2_train, sst2_dev=args.sst2_dev)
        teacher = train_textcat(options, args.model, out / "teacher")
    pipelines = {"sst2_teacher": teacher}
    if "sst2_student_3l" in systems:
        nlp = spacy.load(teacher)
        gold = out / "teacher_train.spacy"
        docs = []
        for text, _, label in train_rows:
            doc = nlp.make_doc(text)
            doc.cats = {name: float(name == label) for name in labels}
            docs.append(doc)
        write_atomically(gold, DocBin(docs=docs, store_user_data=False).to_disk)
        every = textcat.load_task("sst2", textcat.budget(model=args.model, train_size=0, sst2_train=args.sst2_train,
                                                         sst2_dev=args.sst2_dev), args.seed)[0]
        texts = out / "texts.txt"
        unlabelled = [text for text, _, _ in every][: args.sst2_texts or None]
        write_atomically(texts, lambda tmp: tmp.write_text("\n".join(unlabelled) + "\n", encoding="utf8"))
        print(f"SST-2: {len(unlabelled)} unlabelled train sentences, {len(train_rows)} labelled", flush=True)
        pipelines["sst2_student_3l"] = distill_student(args, teacher, texts, gold, STUDENTS["student_3l"],
                                                       out / "student_3l", steps=args.sst2_distill_steps)
    if args.no_score:
        return
    n_words = sum(len(text.split()) for text, _, _ in dev_rows)
    for name, path in pipelines.items():
        if name not in systems:
            continue
        nlp = spacy.load(path)
        best, hits = float("inf"), []
        for _ in range(args.repeats):
            with Stopwatch() as clock:
                docs = list(nlp.pipe((text for text, _, _ in dev_rows), batch_size=64))
            best = min(best, clock.seconds)
            hits = [max(doc.cats, key=doc.cats.get) == label for doc, (_, _, label) in zip(docs, dev_rows)]
        results[name] = {"accuracy": sum(hits) / len(hits), "wps": n_words / best}
        print(f"{name:<16} dev accuracy {100 * results[name]['accuracy']:6.2f}  {results[name]['wps']:8.0f} words/s",
              flush=True)


def ensemble_line(args, sentences, dev_docs, teacher: Path, gold: Path, results) -> None:
    """Teachers of several seeds, and their ensemble distilled into 6-layer students of several seeds:
    dev F1 of each, and the students' margin over the teachers' mean."""
    import statistics

    out = args.out / "ensemble"
    out.mkdir(parents=True, exist_ok=True)
    teachers = []
    for seed in args.ensemble_seeds:
        path = teacher if seed == args.seed else out / f"teacher_seed{seed}"
        if path != teacher and not (args.reuse and (path / "meta.json").exists()):
            train_teacher(args, sentences, path, seed)
        teachers.append(path)
    texts = write_texts(args, out / "texts.txt", with_wiki=False)
    every_layer = {"student.keep_every": 1}
    students = [distill_student(args, teachers, texts, gold, every_layer, out / f"student_6l_seed{seed}",
                                steps=args.ensemble_steps, seed=seed) for seed in args.ensemble_student_seeds]
    # the control: the same student distilled from the first teacher alone (what the ensemble adds)
    single = distill_student(args, teachers[0], texts, gold, every_layer, out / "student_6l_one_teacher",
                             steps=args.ensemble_steps, seed=args.ensemble_student_seeds[0])
    if args.no_score:
        return
    f1 = {}
    for name, path in [*((f"teacher_seed{s}", t) for s, t in zip(args.ensemble_seeds, teachers)),
                       *((f"student_6l_seed{s}", p) for s, p in zip(args.ensemble_student_seeds, students)),
                       ("student_6l_one_teacher", single)]:
        f1[name] = score(spacy.load(path), dev_docs, 1)[0]
        print(f"ensemble {name:<18} dev F1 {100 * f1[name]:6.2f}", flush=True)
    teacher_f1 = [f1[f"teacher_seed{s}"] for s in args.ensemble_seeds]
    student_f1 = [f1[f"student_6l_seed{s}"] for s in args.ensemble_student_seeds]
    spread = statistics.stdev(teacher_f1) if len(teacher_f1) > 1 else 0.0
    results["ensemble"] = {
        "teacher_f1s": teacher_f1, "teacher_f1_mean": statistics.mean(teacher_f1), "teacher_f1_spread": spread,
        "student_6l_f1s": student_f1, "student_6l_f1_mean": statistics.mean(student_f1),
        "student_6l_f1_spread": statistics.stdev(student_f1) if len(student_f1) > 1 else 0.0,
        # the issue's test: every student above the teachers' mean by more than their spread
        "student_6l_min_margin_over_spread": (min(student_f1) - statistics.mean(teacher_f1)) / spread if spread else None,
        "student_6l_one_teacher_f1": f1["student_6l_one_teacher"],
    }


def score(nlp, dev_docs, repeats: int):
    """(dev F1, inference words/s: the best of `repeats` passes)."""
    n_words = sum(len(doc) for doc in dev_docs)
    best, preds = float("inf"), None
    for _ in range(repeats):
        preds, seconds = ner.predict_spacy(nlp, dev_docs)
        best = min(best, seconds)
    return score_entities([doc_entities(d) for d in dev_docs], preds)["ents_f"], n_words / best


def main():
    parser = BenchParser(__doc__)
    ner.add_data_options(parser, n_dev=0)
    parser.data_file("--wiki", "raw_text/wikitext2", help="WikiText-2: a file or a folder of them, one paragraph a "
                     "line (the shared data has its valid and test splits, not train)")
    parser.add_argument("--teacher", default=None, help="a trained teacher pipeline (default: train one here)")
    parser.add_argument("--config", default=str(Path(__file__).resolve().parents[1] / "configs" / "distillation"
                                                / "distill.cfg"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.lr(1e-4, help="the teacher's peak learning rate (as bench/ner_conll.py's CRF at 2000 x 2; 5e-5 left "
                         "it undertrained: 72 F1 against 82)")
    parser.add_argument("--n-conll-texts", type=int, default=0, help="CoNLL train sentences as unlabelled text (0: all)")
    parser.add_argument("--n-wiki", type=int, default=0, help="WikiText-2 paragraphs (0: all)")
    parser.add_argument("--distill-steps", type=int, default=4000)
    parser.add_argument("--distill-batch", type=int, default=32)
    parser.add_argument("--distill-lr", type=float, default=1e-4)
    parser.add_argument("--student-seed", type=int, default=None,
                        help="the students' seed (default: --seed, which also picks the teacher's sentences); "
                             "another one distils into OUT/NAME_seedS")
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--cnn-epochs", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2, help="inference passes per system (the best counts)")
    parser.add_argument("--systems", default="teacher,teacher_int8,student_3l,student_3l_int8,student_2l,"
                                             "student_2l_int8,student_1l,student_1l_int8,student_3l_u768h6,"
                                             "student_3l_u768h6_int8,student_3l_u384h4,student_3l_u384h4_int8,"
                                             "spacy_trf,spacy_cnn,ensemble,sst2_teacher,sst2_student_3l")
    parser.data_file("--sst2-train", "sst2/train.tsv")
    parser.data_file("--sst2-dev", "sst2/dev.tsv")
    parser.add_argument("--sst2-train-size", type=int, default=2000, help="SST-2 texts the teacher trains on")
    parser.add_argument("--sst2-texts", type=int, default=0, help="SST-2 train sentences as unlabelled text (0: all)")
    parser.add_argument("--sst2-distill-steps", type=int, default=2000)
    parser.add_argument("--ensemble-seeds", type=lambda v: [int(x) for x in v.split(",")], default=[0, 1, 2],
                        help="the ensemble's teacher seeds (the one equal to --seed is the teacher above)")
    parser.add_argument("--ensemble-student-seeds", type=lambda v: [int(x) for x in v.split(",")], default=[0, 1])
    parser.add_argument("--ensemble-steps", type=int, default=1500, help="distillation steps of each 6-layer student")
    parser.add_argument("--reuse", action="store_true",
                        help="take the teacher, students and int8 copies an earlier run left under OUT, "
                        "and resume a distillation it stopped part way")
    parser.add_argument("--no-score", action="store_true", help="build the pipelines only (score later with --reuse)")
    parser.seed()
    parser.threads()
    parser.output("bench_distill", "bench_distill_quick")
    parser.quick("200 train / 200 dev sentences x 1 epoch, 40 distillation steps over 1000 texts")
    parser.set_defaults(n_train=2000)
    args = parser.parse_args()
    if args.quick:
        args.n_train, args.n_dev, args.epochs, args.repeats = 200, 200, 1, 1
        args.n_conll_texts, args.n_wiki, args.distill_steps, args.distill_batch = 800, 200, 40, 16
        args.cnn_epochs = 5
        args.sst2_train_size, args.sst2_texts, args.sst2_distill_steps = 160, 800, 40
        args.ensemble_steps = 20
    systems = args.systems.split(",")
    args.student_seed = args.seed if args.student_seed is None else args.student_seed
    args.out.mkdir(parents=True, exist_ok=True)
    vocab = spacy.blank("en").vocab
    sentences = ner.load_sentences(args.train, vocab, args.n_train, args.seed)
    dev_docs = ner.load_sentences(args.dev, vocab, args.n_dev, args.seed)
    from spacy.tokens import DocBin

    started = time.time()
    pipelines, teacher = {}, None
    if any(not name.startswith("sst2_") for name in systems):  # the NER line and the ensemble
        gold = args.out / "teacher_train.spacy"
        write_atomically(gold, DocBin(docs=sentences).to_disk)
        if args.teacher:
            teacher = Path(args.teacher)
        elif args.reuse and (args.out / "teacher" / "meta.json").exists():
            teacher = args.out / "teacher"
            print(f"reusing {teacher}", flush=True)
        else:
            teacher = train_teacher(args, sentences, args.out / "teacher")
        texts = write_texts(args, args.out / "texts.txt")
        pipelines = {"teacher": teacher}
        suffix = "" if args.student_seed == args.seed else f"_seed{args.student_seed}"
        for name, student in STUDENTS.items():
            if name in systems or f"{name}_int8" in systems:
                pipelines[name] = distill_student(args, teacher, texts, gold, student, args.out / f"{name}{suffix}",
                                                  seed=args.student_seed)
        for name in list(pipelines):
            if f"{name}_int8" in systems:
                folder = "teacher_int8" if name == "teacher" else f"{name}{suffix}_int8"
                pipelines[f"{name}_int8"] = int8(args, pipelines[name], args.out / folder)
    results = {}
    if any(name.startswith("sst2_") for name in systems):
        sst2_line(args, systems, results)
    if "ensemble" in systems:
        ensemble_line(args, sentences, dev_docs, teacher, gold, results)
    if args.no_score:
        print(f"built {', '.join(map(str, pipelines.values()))}; not scored (--no-score)", flush=True)
        return
    for name in systems:
        if name.startswith("sst2_") or name == "ensemble":
            continue
        if name == "spacy_trf":
            seed_everything(args.seed)
            nlp = build_spacy_trf(args.model)
            order = ner.batches(len(sentences), args.batch_size, args.epochs, args.seed)
            ner.train_spacy(nlp, ner.gold_examples(nlp, sentences), order, args.lr, 0.1)
        elif name == "spacy_cnn":
            nlp = train_cnn(args, sentences)
        else:
            nlp = spacy.load(pipelines[name])
        f1, wps = score(nlp, dev_docs, args.repeats)
        results[name] = {"f1": f1, "wps": wps}
        print(f"{name:<16} dev F1 {100 * f1:6.2f}  {wps:8.0f} words/s", flush=True)
    summary = {f"{name}_{key}": value for name, row in results.items() for key, value in row.items()}
    for name in results:
        if "spacy_trf" in results and name not in ("spacy_trf", "ensemble") and not name.startswith("sst2_"):
            summary[f"{name}_wps_vs_spacy_trf"] = results[name]["wps"] / results["spacy_trf"]["wps"]
        if "teacher" in results and name.startswith("student"):
            summary[f"{name}_f1_minus_teacher"] = results[name]["f1"] - results["teacher"]["f1"]
        if "sst2_teacher" in results and name.startswith("sst2_student"):
            summary[f"{name}_accuracy_minus_teacher"] = results[name]["accuracy"] - results["sst2_teacher"]["accuracy"]
            summary[f"{name}_wps_vs_teacher"] = results[name]["wps"] / results["sst2_teacher"]["wps"]
    summary.update(student_seed=args.student_seed, n_train=len(sentences), epochs=args.epochs, n_dev=len(dev_docs),
                   distill_steps=args.distill_steps,
                   distill_batch=args.distill_batch, temperature=args.temperature, cnn_epochs=args.cnn_epochs,
                   sst2_train_size=args.sst2_train_size, sst2_texts=args.sst2_texts,
                   sst2_distill_steps=args.sst2_distill_steps, ensemble_steps=args.ensemble_steps,
                   threads=torch.get_num_threads(), quick=args.quick, total_s=time.time() - started,
                   teacher=str(teacher))
    write_json(args.out / "results.json", summary)
    print_result(summary, digits=4)


if __name__ == "__main__":
    main()
