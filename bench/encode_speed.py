"""Encoder throughput: spacy-mlm's `mlm_encoder` vs spacy-transformers' `transformer`
on the same model and the same texts, plus achieved GFLOP/s against a measured
fp32 matmul peak on this machine.

    .venv/bin/python bench/encode_speed.py [--texts FILE] [--model DIR] [--quick] [--profile]
"""
import time

import numpy as np
import spacy
import torch

import spacy_mlm
from harness import peers
from harness.common import BenchParser, print_result, read_paragraphs


def measure_peak_gflops(size: int = 1024, repeats: int = 10) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def linear_flops(window_lengths, d: int, n_layers: int, d_ff: int) -> float:
    """Useful (unpadded) multiply-add FLOPs of the stack's linear layers."""
    L = np.asarray(window_lengths, dtype=np.float64)
    return float((2 * (4 * L * d * d + 2 * L * d * d_ff)).sum() * n_layers)


def encoder_flops(window_lengths, d: int, n_layers: int, d_ff: int) -> float:
    """Useful (unpadded) multiply-add FLOPs of the transformer stack: linear layers plus attention."""
    L = np.asarray(window_lengths, dtype=np.float64)
    return linear_flops(window_lengths, d, n_layers, d_ff) + float((2 * 2 * L * L * d).sum() * n_layers)


def time_pipeline(nlp, texts, batch_size, repeats):
    docs = [nlp.make_doc(t) for t in texts]
    n_words = sum(len(d) for d in docs)
    list(nlp.pipe(docs[: batch_size], batch_size=batch_size))  # warm up
    best = float("inf")
    for _ in range(repeats):
        docs = [nlp.make_doc(t) for t in texts]
        start = time.perf_counter()
        for _ in nlp.pipe(docs, batch_size=batch_size):
            pass
        best = min(best, time.perf_counter() - start)
    return n_words / best, best


def profile_ops(nlp, texts, batch_size, top=6):
    """Self CPU seconds of the heaviest torch ops over one pass of the texts:
    shows where each system's time goes (matmuls, attention, copies...)."""
    from torch.profiler import ProfilerActivity, profile

    docs = [nlp.make_doc(t) for t in texts]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in nlp.pipe(docs, batch_size=batch_size):
            pass
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    return total, [(e.key, e.self_cpu_time_total / 1e6, e.count) for e in events[:top]]


def main():
    parser = BenchParser(__doc__)
    parser.data_file("--texts", "raw_text/wikitext2/valid.txt")
    parser.model()
    parser.add_argument("--n-texts", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.threads(None)
    parser.quick("60 texts, one pass")
    parser.add_argument("--profile", action="store_true", help="also print each system's heaviest torch ops")
    args = parser.parse_args()
    if args.quick:
        args.n_texts, args.repeats = 60, 1
    texts = read_paragraphs(args.texts, args.n_texts)

    ours = spacy.blank("en")
    ours.add_pipe("mlm_encoder", config={"model": {"path": args.model}})
    ours.initialize()
    ours_128 = spacy.blank("en")  # same windows as the peer's default spans
    ours_128.add_pipe("mlm_encoder", config={"model": {"path": args.model, "window": 128, "overlap": 32}})
    ours_128.initialize()
    ours_bf16 = spacy.blank("en")  # bfloat16 matmuls under autocast
    ours_bf16.add_pipe("mlm_encoder", config={"model": {"path": args.model, "precision": "bf16"}})
    ours_bf16.initialize()
    peer = peers.spacy_trf(args.model, initialize=True)

    results = {}
    for name, nlp in (("ours", ours), ("ours_window128", ours_128), ("ours_bf16", ours_bf16), ("spacy_transformers", peer)):
        wps, seconds = time_pipeline(nlp, texts, args.batch_size, args.repeats)
        results[name] = (wps, seconds)
        print(f"{name:<20} {wps:10.1f} words/s  ({seconds:.2f} s for {len(texts)} texts)", flush=True)

    encoder = ours.get_pipe("mlm_encoder").model
    pieces = encoder.attrs["tokenizer"]([ours.make_doc(t) for t in texts])
    lengths = [len(w.input_ids) for p in pieces for w in p.windows]
    cfg = spacy_mlm.get_hf_model(encoder).config
    flops = encoder_flops(lengths, cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size)
    gflops = flops / results["ours"][1] / 1e9
    peak = measure_peak_gflops()
    ratio = results["ours"][0] / results["spacy_transformers"][0]
    profiles = {}
    if args.profile:
        for name, nlp in (("ours", ours), ("spacy_transformers", peer)):
            total, ops = profile_ops(nlp, texts, args.batch_size)
            profiles[name] = {op: round(seconds, 3) for op, seconds, _ in ops}
            print(f"{name}: {total:.2f} s of torch ops; heaviest (self s, calls):")
            for op, seconds, count in ops:
                print(f"  {op:<55} {seconds:7.2f} s {count:7d}")
        # The linear layers' rate, from ours' addmm time (useful FLOPs only: padding counts as waste).
        profiles["ours_linear_gflops"] = round(
            linear_flops(lengths, cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size)
            / profiles["ours"]["aten::addmm"] / 1e9, 1)
        print(f"ours' linear layers: {profiles['ours_linear_gflops']} GFLOP/s of useful work (matmul peak {peak:.1f})")
    print(f"ours / spacy-transformers: {ratio:.2f}x; achieved {gflops:.1f} GFLOP/s of a {peak:.1f} GFLOP/s matmul peak")
    print_result({
        "ours_wps": round(results["ours"][0], 1),
        "ours_window128_wps": round(results["ours_window128"][0], 1),
        "ours_bf16_wps": round(results["ours_bf16"][0], 1),
        "ratio_bf16": round(results["ours_bf16"][0] / results["spacy_transformers"][0], 3),
        "spacy_transformers_wps": round(results["spacy_transformers"][0], 1),
        "ratio": round(ratio, 3),
        "ratio_window128": round(results["ours_window128"][0] / results["spacy_transformers"][0], 3),
        "gflops": round(gflops, 1),
        "peak_gflops": round(peak, 1),
        "n_texts": len(texts),
        "n_words": sum(len(ours.make_doc(t)) for t in texts),
        "torch_threads": torch.get_num_threads(),
        **({"profile_self_s": profiles} if profiles else {}),
    })


if __name__ == "__main__":
    main()
