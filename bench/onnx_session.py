"""ONNX Runtime session settings for the encoder's exported graphs: the same
graph run with every session graph optimization against ours (every one but the
SkipLayerNormalization fusion, `models/onnx_backbone.py`), on the inputs the
encoder feeds it for CoNLL-2003 dev sentences.

  all_fusions   ORT_ENABLE_ALL
  ours          ORT_ENABLE_ALL without SkipLayerNormFusion (Add + LayerNormalization stay apart)

Graphs: the encoder/backbone.onnx of each pipeline in --pipelines (pipelines written
by `python -m spacy_mlm optimize`); by default MiniLM (--model) under `mlm_encoder`,
made here through `optimize --precision int8` and `--precision fp32`.
Inputs: the dev sentences (--dev, --n-dev of them) in batches of 64 as `nlp.pipe`
gives them, each tokenized by the pipeline's tokenizer with its special pieces and
grouped into passes by `length_batches` (the encoder's own grouping, 16384 pieces
at most) and padded to the longest of each pass.
Timing: --threads intra-op threads, sessions alternating round by round, the best of
--repeats rounds per system; words/s = dev words / seconds of the passes.

    .venv/bin/python bench/onnx_session.py [--pipelines DIR,DIR] [--quick]

Last line: one JSON object: per graph each system's words/s, ours / all_fusions,
and the mean and least cosine of the two systems' top-layer vectors of each real piece
(an int8 graph quantizes each MatMul's input by its range, so a last-bit change in a
layer norm's output can move a rounding: how far that goes is what these show).
"""
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import spacy
import torch

from harness import ner
from harness.common import BenchParser, print_result
from spacy_mlm import length_batches

SYSTEMS = {"all_fusions": [], "ours": ["SkipLayerNormFusion"]}  # name -> ONNX Runtime optimizers disabled
BATCH, MAX_PIECES = 64, 16384


def made_pipelines(model: str, out: Path) -> list:
    """MiniLM under mlm_encoder, saved, then through `optimize` at int8 and fp32."""
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", name="encoder", config={"model": {"path": model}})
    nlp.initialize()
    nlp.to_disk(out / "torch")
    made = []
    for precision in ("int8", "fp32"):
        target = out / f"onnx_{precision}"
        subprocess.run([sys.executable, "-m", "spacy_mlm", "optimize", str(out / "torch"), str(target),
                        "--precision", precision, "--force"], check=True)
        made.append(target)
    return made


def passes(tokenizer, sentences: list, input_names: list) -> list:
    """The feeds of every pass, batch by batch, as the encoder builds them."""
    feeds = []
    for start in range(0, len(sentences), BATCH):
        ids = tokenizer([s.text for s in sentences[start:start + BATCH]])["input_ids"]
        for group in length_batches(np.array([len(row) for row in ids]), MAX_PIECES):
            longest = max(len(ids[i]) for i in group)
            input_ids = np.full((len(group), longest), tokenizer.pad_token_id or 0, dtype=np.int64)
            mask = np.zeros_like(input_ids)
            for row, i in enumerate(group):
                input_ids[row, : len(ids[i])], mask[row, : len(ids[i])] = ids[i], 1
            given = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
            feeds.append({name: given[name] for name in input_names})
    return feeds


def piece_cosines(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The cosine of each real piece's vectors in `a` and `b` (batch, pieces, width)."""
    a, b = a[mask.astype(bool)], b[mask.astype(bool)]
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def session(graph: bytes, disabled: list, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)


def main():
    parser = BenchParser(__doc__)
    ner.add_data_options(parser, n_dev=0)
    parser.add_argument("--pipelines", default=None, help="comma-separated pipelines made by `spacy_mlm optimize` "
                                                          "(default: MiniLM made here, int8 and fp32)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds per system (the best counts)")
    parser.threads()
    parser.output("bench_onnx_session", "bench_onnx_session_quick")
    parser.quick("300 dev sentences, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.n_dev, args.repeats = 300, 2
    from transformers import AutoTokenizer

    args.out.mkdir(parents=True, exist_ok=True)
    pipelines = [Path(p) for p in args.pipelines.split(",")] if args.pipelines else made_pipelines(args.model, args.out)
    sentences = ner.load_sentences(args.dev, spacy.blank("en").vocab, args.n_dev, 0)
    n_words = sum(len(s) for s in sentences)
    threads = torch.get_num_threads()
    summary = {"n_dev": len(sentences), "words": n_words, "repeats": args.repeats, "threads": threads}
    for pipeline in pipelines:
        graph = (pipeline / "encoder" / "backbone.onnx").read_bytes()
        sessions = {name: session(graph, disabled, threads) for name, disabled in SYSTEMS.items()}
        inputs = [i.name for i in sessions["ours"].get_inputs()]
        feeds = passes(AutoTokenizer.from_pretrained(pipeline / "encoder" / "model"), sentences, inputs)
        best = {name: float("inf") for name in SYSTEMS}
        for _ in range(args.repeats):
            for name, run in sessions.items():
                started = time.perf_counter()
                for feed in feeds:
                    run.run(["last_hidden_state"], feed)
                best[name] = min(best[name], time.perf_counter() - started)
        cosines = np.concatenate([piece_cosines(*(sessions[name].run(["last_hidden_state"], feed)[0]
                                                  for name in SYSTEMS), feed["attention_mask"]) for feed in feeds])
        key = pipeline.name
        for name in SYSTEMS:
            summary[f"{key}_{name}_wps"] = n_words / best[name]
        summary[f"{key}_ours_vs_all_fusions"] = best["all_fusions"] / best["ours"]
        summary[f"{key}_cosine_mean"], summary[f"{key}_cosine_min"] = float(cosines.mean()), float(cosines.min())
        print(f"{key}: all_fusions {n_words / best['all_fusions']:.0f} words/s, ours {n_words / best['ours']:.0f} "
              f"({best['all_fusions'] / best['ours']:.3f}x); piece-vector cosine mean {cosines.mean():.5f}, "
              f"min {cosines.min():.5f}", flush=True)
    print_result(summary, digits=4)


if __name__ == "__main__":
    main()
