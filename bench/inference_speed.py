"""CPU inference speed of the encoder's precisions and backends against
spacy-transformers' `transformer`, on the same model and WikiText-2 paragraphs
as bench/encode_speed.py, at each thread count (torch's and ONNX Runtime's
intra-op threads alike); and the accuracy cost of each precision, as deltas
(points) against torch fp32, on a NER pipeline (CoNLL-2003, whole dev set) and a
textcat pipeline (SST-2 dev), trained here or passed in.

    .venv/bin/python bench/inference_speed.py [--quick] [--threads 1,2] [--speed-only]
        [--ner-model DIR] [--textcat-model DIR] [--save-trained DIR] [--keep-fp32-layers 0,-1]

Systems: spacy_trf (128-piece spans, stride 96), fp32 (torch), bf16 (torch
autocast), onnx_fp32 and int8 (ONNX Runtime: transformer fusions, then dynamic
int8 of MatMul and Attention, per-channel int8 weights). The accuracy pipelines'
int8 and ONNX fp32 versions are made by `python -m spacy_mlm optimize`, with no
layer kept in fp32 unless --keep-fp32-layers says so (the shipped default), bf16
by a config override. Without --ner-model / --textcat-model, the pipelines are
trained first as bench/ner_conll.py (system "ours") and bench/classify.py
(system "ours") train them: 2000 seeded training examples x 2 epochs each
(--quick: 300 x 1 and 160 x 1, scored on 300 dev sentences / 100 dev texts).

Last line: one JSON object; the int8 figures are all from the one setup in
`int8_setup`. Words/s are wall-clock (`*_wps`, the issue's figures) and, in
`cpu_wps_by_threads` / `*_cpu_ratio_*`, per CPU second of this process.
"""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import spacy
import torch

from harness import ner, peers, textcat
from harness.common import BenchParser, print_result, read_paragraphs, seed_everything
from spacy_mlm import doc_entities, score_entities

SYSTEMS = {
    "fp32": {"backend": "torch", "precision": "fp32"},
    "bf16": {"backend": "torch", "precision": "bf16"},
    "onnx_fp32": {"backend": "onnx", "precision": "fp32"},
    "int8": {"backend": "onnx", "precision": "int8"},
}
VARIANTS = ("onnx_fp32", "int8", "bf16")


def words_per_second(nlp, texts, batch_size, repeats):
    """(wall-clock, CPU-time) words/s, each the best of `repeats` passes. CPU time
    counts this process's threads only, so on a machine shared with other jobs it
    moves far less than wall time; at one thread it is the fairer comparison."""
    list(nlp.pipe(texts[:batch_size], batch_size=batch_size))  # warm up
    n_words = sum(len(nlp.make_doc(t)) for t in texts)
    wall = cpu = float("inf")
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in nlp.pipe(texts, batch_size=batch_size):
            pass
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return n_words / wall, n_words / cpu


def ours(model_path, settings):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"@architectures": "spacy_mlm.HFEncoder.v2", "path": model_path, **settings}})
    nlp.initialize()  # an onnx backend exports here, with ONNX Runtime on torch's thread count
    return nlp


def speeds(model_path, texts, threads, batch_size, repeats, fp32_layers):
    """{system: (wall words/s, CPU-time words/s)} at `threads` threads; int8 keeps
    `fp32_layers` in fp32, as its accuracy pipelines do."""
    torch.set_num_threads(threads)
    result = {"spacy_trf": words_per_second(peers.spacy_trf(model_path, initialize=True), texts, batch_size, repeats)}
    for name, settings in SYSTEMS.items():
        kept = {"fp32_layers": fp32_layers} if name == "int8" else {}
        result[name] = words_per_second(ours(model_path, {**settings, **kept}), texts, batch_size, repeats)
    for name, (wall, cpu) in result.items():
        print(f"{threads} thread(s) {name:<10} {wall:9.1f} words/s ({cpu:9.1f} per CPU second)", flush=True)
    return result


# -- the accuracy pipelines ----------------------------------------------------------


def train_ner(args, model_path, out: Path) -> Path:
    """mlm_ner (softmax) from configs/ner.cfg, trained as bench/ner_conll.py trains "ours" (harness/ner.py)."""
    seed_everything(args.seed)
    nlp = ner.build_ours(model_path, crf=False)
    train_docs = ner.load_sentences(args.conll_train, nlp.vocab, args.ner_train, args.seed)
    order = ner.batches(len(train_docs), args.ner_batch_size, args.epochs, args.seed)
    seconds = ner.train_spacy(nlp, ner.gold_examples(nlp, train_docs), order, args.ner_lr, 0.1)
    print(f"ner: trained on {len(train_docs)} sentences x {args.epochs} epoch(s) in {seconds:.0f}s", flush=True)
    nlp.to_disk(out)
    return out


def train_textcat(args, model_path, out: Path) -> Path:
    """mlm_encoder + mlm_textcat with the factories' defaults, trained as bench/classify.py trains "ours" (harness/textcat.py)."""
    budget = textcat.budget(model=model_path, train_size=args.textcat_train, epochs=args.epochs,
                            sst2_train=args.sst2_train, sst2_dev=args.sst2_dev)
    train_rows, _, labels = textcat.load_task("sst2", budget, args.seed)
    seed_everything(args.seed)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": model_path, "window": budget.max_length}})
    nlp.add_pipe("mlm_textcat")
    example = textcat.label_example(lambda a, b: nlp.make_doc(a), labels)
    seconds = textcat.train_spacy(nlp, example, train_rows, budget, args.seed)
    print(f"textcat: trained on {len(train_rows)} texts x {args.epochs} epoch(s) in {seconds:.0f}s", flush=True)
    nlp.to_disk(out)
    return out


def variant(pipeline: Path, name: str, tmp: Path, keep_fp32_layers: str):
    """The pipeline as system `name`: onnx_fp32 and int8 through `spacy_mlm optimize`,
    bf16 by a config override."""
    if name in ("onnx_fp32", "int8"):
        out = tmp / f"{pipeline.name}-{name}"
        command = [sys.executable, "-m", "spacy_mlm", "optimize", str(pipeline), str(out),
                   "--precision", SYSTEMS[name]["precision"]]
        if name == "int8" and keep_fp32_layers:
            command += ["--keep-fp32-layers", keep_fp32_layers]
        subprocess.run(command, check=True)
        return spacy.load(out)
    nlp = spacy.load(pipeline)
    if name == "fp32":
        return nlp
    overrides = {}
    for component, block in nlp.config["components"].items():
        if block.get("factory") == "mlm_encoder":
            overrides[f"components.{component}.model.precision"] = "bf16"
    return spacy.load(pipeline, config=overrides)


def ner_f1(nlp, dev_docs) -> float:
    predicted, _ = ner.predict_spacy(nlp, dev_docs)
    return 100 * score_entities([doc_entities(d) for d in dev_docs], predicted)["ents_f"]


def textcat_accuracy(nlp, rows) -> float:
    docs = nlp.pipe((text for text, _, _ in rows), batch_size=64)
    hits = [max(doc.cats, key=doc.cats.get) == label for doc, (_, _, label) in zip(docs, rows)]
    return 100 * sum(hits) / len(hits)


def deltas(pipeline: Path, score, tmp: Path, keep_fp32_layers: str):
    """Score of torch fp32 and each variant's points against it."""
    base = score(variant(pipeline, "fp32", tmp, keep_fp32_layers))
    out = {"fp32": round(base, 2)}
    for name in VARIANTS:
        out[name] = round(score(variant(pipeline, name, tmp, keep_fp32_layers)) - base, 2)
        print(f"  {pipeline.name} {name}: {out[name]:+.2f} points against fp32 {base:.2f}", flush=True)
    return out


def accuracy_costs(args, model_path, tmp: Path):
    trained = args.save_trained or tmp
    ner_model = args.ner_model or train_ner(args, model_path, trained / "ner")
    textcat_model = args.textcat_model or train_textcat(args, model_path, trained / "textcat")
    vocab = spacy.blank("en").vocab
    dev_docs = ner.load_sentences(args.conll_dev, vocab, args.ner_dev, args.seed)
    budget = textcat.budget(model=model_path, sst2_train=args.sst2_train, sst2_dev=args.sst2_dev,
                            test_size=args.textcat_dev)
    _, dev_rows, _ = textcat.load_task("sst2", budget, args.seed)
    print(f"accuracy: NER on {len(dev_docs)} CoNLL dev sentences, textcat on {len(dev_rows)} SST-2 dev texts",
          flush=True)
    ner_points = deltas(ner_model, lambda nlp: ner_f1(nlp, dev_docs), tmp, args.keep_fp32_layers)
    sst2 = deltas(textcat_model, lambda nlp: textcat_accuracy(nlp, dev_rows), tmp, args.keep_fp32_layers)
    return ner_points, sst2, len(dev_docs), len(dev_rows)


def ratio(speeds_at, name, which):
    """`name`'s words/s over spacy-transformers' (which: 0 wall-clock, 1 CPU time)."""
    return round(speeds_at[name][which] / speeds_at["spacy_trf"][which], 3)


def main():
    parser = BenchParser(__doc__)
    parser.data_file("--texts", "raw_text/wikitext2/valid.txt")
    parser.data_file("--conll-train", "conll2003/train.txt")
    parser.data_file("--conll-dev", "conll2003/valid.txt")
    parser.data_file("--sst2-train", "sst2/train.tsv")
    parser.data_file("--sst2-dev", "sst2/dev.tsv")
    parser.model()
    parser.add_argument("--n-texts", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=str, default="1,2", help="comma-separated thread counts")
    parser.add_argument("--ner-model", type=Path, default=None, help="trained NER pipeline (default: train one)")
    parser.add_argument("--textcat-model", type=Path, default=None,
                        help="trained SST-2 pipeline, labels negative/positive (default: train one)")
    parser.add_argument("--ner-train", type=int, default=2000, help="NER training sentences (seeded subsample)")
    parser.add_argument("--ner-dev", type=int, default=0, help="CoNLL dev sentences scored (0 = all)")
    parser.add_argument("--ner-batch-size", type=int, default=16)
    parser.add_argument("--ner-lr", type=float, default=1e-4, help="as the README's CoNLL rows at 2000 x 2")
    parser.add_argument("--textcat-train", type=int, default=2000, help="SST-2 training texts (seeded subsample)")
    parser.add_argument("--textcat-dev", type=int, default=0, help="SST-2 dev texts scored (0 = all)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.seed()
    parser.add_argument("--save-trained", type=Path, default=None,
                        help="keep the pipelines trained here in DIR/ner and DIR/textcat (pass them back with "
                             "--ner-model / --textcat-model to score other int8 setups on the same pipelines)")
    parser.add_argument("--keep-fp32-layers", default="", help="int8: layers kept in fp32 (optimize's option)")
    parser.add_argument("--speed-only", action="store_true",
                        help="words/s only: no pipelines trained, the accuracy deltas left out (null)")
    parser.quick("unless given: 40 texts, one repeat, 1 thread; 300 / 160 training examples x 1 epoch; "
                "300 / 100 dev examples for the pipelines trained here")
    args = parser.parse_args()
    if args.quick:  # small budgets for the options left at their defaults; given pipelines keep whole dev sets
        quick = {"n_texts": 40, "repeats": 1, "threads": "1", "ner_train": 300, "textcat_train": 160, "epochs": 1,
                 "ner_dev": 0 if args.ner_model else 300, "textcat_dev": 0 if args.textcat_model else 100}
        for key, value in quick.items():
            if getattr(args, key) == parser.get_default(key):
                setattr(args, key, value)
    texts = read_paragraphs(args.texts, args.n_texts)
    fp32_layers = [int(layer) for layer in args.keep_fp32_layers.split(",") if layer.strip()]
    by_threads = {
        int(n): speeds(args.model, texts, int(n), args.batch_size, args.repeats, fp32_layers)
        for n in args.threads.split(",")
    }
    first = by_threads[min(by_threads)]
    torch.set_num_threads(min(by_threads))
    if args.speed_only:
        ner_points, sst2, n_ner_dev, n_sst2_dev = dict.fromkeys(SYSTEMS), dict.fromkeys(SYSTEMS), 0, 0
    else:
        with tempfile.TemporaryDirectory() as tmp:
            ner_points, sst2, n_ner_dev, n_sst2_dev = accuracy_costs(args, args.model, Path(tmp))
    layers = args.keep_fp32_layers or "none"
    summary = {
        "threads": min(by_threads),
        "spacy_trf_wps": round(first["spacy_trf"][0], 1),
        "fp32_wps": round(first["fp32"][0], 1),
        "onnx_fp32_wps": round(first["onnx_fp32"][0], 1),
        "bf16_wps": round(first["bf16"][0], 1),
        "int8_wps": round(first["int8"][0], 1),
        "int8_setup": "onnxruntime dynamic int8 of the weight MatMuls (per-channel int8 weights, unfused graph); "
                      f"layers kept in fp32: {layers}",
        "int8_ratio_vs_spacy_trf": ratio(first, "int8", 0),
        "bf16_ratio_vs_spacy_trf": ratio(first, "bf16", 0),
        "onnx_fp32_ratio_vs_spacy_trf": ratio(first, "onnx_fp32", 0),
        "fp32_ratio_vs_spacy_trf": ratio(first, "fp32", 0),
        "int8_cpu_ratio_vs_spacy_trf": ratio(first, "int8", 1),
        "bf16_cpu_ratio_vs_spacy_trf": ratio(first, "bf16", 1),
        "int8_ner_f1_delta": ner_points["int8"],
        "int8_sst2_acc_delta": sst2["int8"],
        "bf16_ner_f1_delta": ner_points["bf16"],
        "bf16_sst2_acc_delta": sst2["bf16"],
        "onnx_fp32_ner_f1_delta": ner_points["onnx_fp32"],
        "onnx_fp32_sst2_acc_delta": sst2["onnx_fp32"],
        "fp32_ner_f1": ner_points["fp32"],
        "fp32_sst2_acc": sst2["fp32"],
        "wps_by_threads": {n: {k: round(v[0], 1) for k, v in r.items()} for n, r in by_threads.items()},
        "cpu_wps_by_threads": {n: {k: round(v[1], 1) for k, v in r.items()} for n, r in by_threads.items()},
        "n_texts": len(texts),
        "n_ner_dev": n_ner_dev,
        "n_sst2_dev": n_sst2_dev,
        "quick": args.quick,
    }
    print_result(summary)


if __name__ == "__main__":
    main()
