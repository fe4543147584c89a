"""Peak memory (RSS) of spacy-mlm's `mlm_encoder` and spacy-transformers' `transformer`
as document length and training batch size grow. Every measurement runs in a fresh
subprocess, so one cannot inherit another's high-water mark.

* encode: one doc of 1k, 10k, 100k tokens (WikiText paragraphs joined). We report
  the RSS growth while the pipeline runs, the size of the encoder's own output
  (pieces x width float32, which any encoder must hold) and the rest ("transient"):
  one forward batch's activations, bounded by the window and max_batch_pieces,
  plus per-piece copies and indices, linear in the doc. Nothing grows with the
  square of the doc length. `ours_window128` uses the peer's 128-piece windows.
* train: one `nlp.update` of encoder + spaCy tagger (listener) on a batch of B
  paragraphs, after a warm-up update.

    .venv/bin/python bench/memory.py [--texts FILE] [--model DIR] [--quick]

--quick uses a tiny random BERT (64 positions) and smaller sizes.
"""
import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import peers
from harness.common import BenchParser, Stopwatch, minilm_path, print_result, read_paragraphs

WORKER_FLAG = "--worker"


def long_text(paragraphs, n_tokens: int, nlp) -> str:
    """Paragraphs joined (cycled if needed) until the doc has `n_tokens` tokens."""
    parts, count, i = [], 0, 0
    while count < n_tokens:
        paragraph = paragraphs[i % len(paragraphs)]
        parts.append(paragraph)
        count += len(nlp.make_doc(paragraph)) + 1
        i += 1
    doc = nlp.make_doc(" ".join(parts))
    return doc[:n_tokens].text


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(system: str, model: str, max_positions: int, tagger: bool):
    import spacy

    if system.startswith("ours"):
        nlp = spacy.blank("en")
        # ours_window128: the same 128-piece windows as the peer's strided spans
        window = {"window": 128, "overlap": 32} if system == "ours_window128" else {}
        nlp.add_pipe("mlm_encoder", config={"model": {"path": model, **window}})
        listener = {"@architectures": "spacy_mlm.EncoderListener.v1", "pooling": "mean"}
    else:
        nlp = peers.spacy_trf(model, window=min(128, max_positions - 2))
        listener = peers.trf_listener()
    if tagger:
        nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": listener}})
    return nlp


def worker(args) -> dict:
    """One measurement, in this (fresh) process."""
    import torch

    paragraphs = read_paragraphs(args.texts)
    nlp = build(args.system, args.model, args.max_positions, tagger=args.task == "train")
    if args.task == "encode":
        nlp.initialize()
        text = long_text(paragraphs, args.size, nlp)
        doc = nlp.make_doc(text)
        list(nlp.pipe(["warm up the model"]))
        before = max_rss_mb()
        with Stopwatch() as clock:
            doc = nlp(doc)
        seconds = clock.seconds
        peak = max_rss_mb()
        if args.system.startswith("ours"):
            enc = doc._.mlm_encoding
            output_mb = enc.hidden.nbytes / 2**20
            n_pieces = len(enc.piece_ids)
        else:
            output_mb = sum(x.nbytes for x in doc._.trf_data.tensors) / 2**20
            n_pieces = int(doc._.trf_data.wordpieces.input_ids.size)
        return {
            "tokens": len(doc),
            "pieces": n_pieces,
            "seconds": round(seconds, 2),
            "baseline_mb": round(before, 1),
            "peak_mb": round(peak, 1),
            "growth_mb": round(peak - before, 1),
            "output_mb": round(output_mb, 1),
            "transient_mb": round(peak - before - output_mb, 1),
        }
    from spacy.training import Example

    batch = paragraphs[: args.size]
    examples = []
    for text in batch:
        doc = nlp.make_doc(text)
        examples.append(Example.from_dict(doc, {"tags": ["L" if len(t) > 4 else "S" for t in doc]}))
    optimizer = nlp.initialize(lambda: examples[:4])
    nlp.update(examples[:2], sgd=optimizer)  # warm up
    before = max_rss_mb()
    with Stopwatch() as clock:
        nlp.update(examples, sgd=optimizer)
    seconds = clock.seconds
    peak = max_rss_mb()
    return {
        "batch": len(examples),
        "tokens": sum(len(eg.reference) for eg in examples),
        "seconds": round(seconds, 2),
        "baseline_mb": round(before, 1),
        "peak_mb": round(peak, 1),
        "growth_mb": round(peak - before, 1),
        "torch_threads": torch.get_num_threads(),
    }


def measure(args, task: str, system: str, size: int) -> dict:
    cmd = [
        sys.executable, __file__, WORKER_FLAG, "--task", task, "--system", system, "--size", str(size),
        "--model", args.model, "--texts", str(args.texts), "--max-positions", str(args.max_positions),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{task} {system} {size} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{task:<6} {system:<18} size {size:>7}: {json.dumps(result)}", flush=True)
    return result


def main():
    parser = BenchParser(__doc__)
    parser.data_file("--texts", "raw_text/wikitext2/valid.txt")
    parser.model(fill=False, help="HF directory (default: packaged MiniLM; --quick: a tiny random BERT)")
    parser.add_argument("--doc-tokens", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32, 64])
    parser.quick("a tiny random BERT (64 positions), docs of 1k, 10k, 30k tokens, batches of 4 and 16")
    parser.add_argument(WORKER_FLAG, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task", choices=["encode", "train"], help=argparse.SUPPRESS)
    parser.add_argument("--system", choices=["ours", "ours_window128", "spacy_transformers"], help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--max-positions", type=int, default=512, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print_result(worker(args))
        return
    tmp = None
    if args.quick:
        from spacy_mlm import make_tiny_bert

        tmp = tempfile.TemporaryDirectory()
        args.model = args.model or str(make_tiny_bert(Path(tmp.name) / "tiny"))
        args.doc_tokens, args.batch_sizes = [1000, 10000, 30000], [4, 16]
    elif args.model is None:
        args.model = minilm_path()
    from transformers import AutoConfig

    args.max_positions = AutoConfig.from_pretrained(args.model).max_position_embeddings
    systems = ("ours", "spacy_transformers")
    encoders = ("ours", "ours_window128", "spacy_transformers")
    encode = {s: [measure(args, "encode", s, n) for n in args.doc_tokens] for s in encoders}
    train = {s: [measure(args, "train", s, b) for b in args.batch_sizes] for s in systems}

    def slope(rows, key, x):
        """MB per extra 1k tokens between the smallest and largest doc."""
        return round((rows[-1][key] - rows[0][key]) / max(rows[-1][x] - rows[0][x], 1) * 1000, 3)

    summary = {
        "model": Path(args.model).name,
        "doc_tokens": args.doc_tokens,
        "batch_sizes": args.batch_sizes,
        **{f"encode_{s}_growth_mb": [r["growth_mb"] for r in encode[s]] for s in encoders},
        **{f"encode_{s}_transient_mb": [r["transient_mb"] for r in encode[s]] for s in encoders},
        **{f"encode_{s}_seconds": [r["seconds"] for r in encode[s]] for s in encoders},
        **{f"encode_{s}_mb_per_1k_tokens": slope(encode[s], "growth_mb", "tokens") for s in encoders},
        "encode_ours_output_mb": [r["output_mb"] for r in encode["ours"]],
        **{f"train_{s}_growth_mb": [r["growth_mb"] for r in train[s]] for s in systems},
        **{f"train_{s}_seconds": [r["seconds"] for r in train[s]] for s in systems},
        "train_tokens": [r["tokens"] for r in train["ours"]],
    }
    if tmp is not None:
        tmp.cleanup()
    print_result(summary)


if __name__ == "__main__":
    main()
