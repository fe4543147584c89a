"""Does a long `nlp.pipe` keep its memory flat, and does a long document cost
in proportion to its length? The pipeline: the MiniLM NER pipeline of
bench/scale_inference.py (harness.ner.ner_pipeline: mlm_encoder + an untrained
mlm_ner head, which costs what a trained one costs; its entities mean nothing).

1. soak: `nlp.pipe` over --n-texts texts (WikiText-2 sentences of at most
   --max-words words, cycled; no Doc kept), the process's resident memory (RSS,
   after a gc.collect()) and the size of spaCy's string store sampled every
   --sample-every texts: the curve, and the growth from the first sample after
   --warmup texts to the last, in percent. The texts repeat, so the string store
   stops growing once every word has been seen: what grows after that is the
   pipeline's.
2. long: one document of --long-chars characters and one of --short-chars
   (WikiText-2 paragraphs joined), each through `nlp(text)` in a fresh
   subprocess: seconds and peak RSS growth (the high-water mark, reset before
   the call, minus the memory held then); the ratios long / short (10 for 1,000,000 against 100,000
   characters if the cost is linear).

    OMP_NUM_THREADS=1 .venv/bin/python bench/soak.py [--quick] [--n-texts 200000] [--sample-every 10000]
        [--warmup 20000] [--max-words 12] [--long-chars 1000000] [--short-chars 100000]
        [--data-root DIR] [--texts FILE] [--conll FILE] [--model HF_DIR]

Last line: one JSON object: soak (texts, seconds, curve of [texts, rss_mb, strings], growth_after_warmup_pct),
long and short (chars, tokens, seconds, peak_growth_mb, entities), time_ratio and memory_ratio (long / short).
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import cycle, islice
from pathlib import Path

import spacy

from harness.common import BenchParser, print_result, read_paragraphs
from harness.ner import ner_pipeline

MB = 2 ** 20


def rss_mb() -> float:
    """The process's resident memory now (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def peak_rss_mb() -> float:
    """The process's resident high-water mark (VmHWM) since the last `reset_peak_rss`."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def reset_peak_rss() -> None:
    """Bring the high-water mark down to the memory held now (Linux >= 4.0), so
    that a call's peak is measured even below the one loading the model reached."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def sentences(paragraphs, max_words: int):
    """Each paragraph's sentences (split at " . "), cut to `max_words` words."""
    out = []
    for paragraph in paragraphs:
        for sentence in paragraph.split(" . "):
            words = sentence.split()
            if len(words) >= 3:
                out.append(" ".join(words[:max_words]))
    return out


def soak(pipeline: Path, texts, n_texts: int, sample_every: int, warmup: int, batch_size: int) -> dict:
    nlp = spacy.load(pipeline)
    curve, start = [], time.perf_counter()
    for n, _ in enumerate(nlp.pipe(islice(cycle(texts), n_texts), batch_size=batch_size), start=1):
        if n % sample_every == 0:
            gc.collect()
            curve.append([n, round(rss_mb(), 1), len(nlp.vocab.strings)])
            print(json.dumps({"soak": curve[-1], "seconds": round(time.perf_counter() - start, 1)}), flush=True)
    after = [rss for n, rss, _ in curve if n >= warmup]
    return {"texts": n_texts, "seconds": round(time.perf_counter() - start, 1), "curve": curve,
            "growth_after_warmup_pct": round(100 * (after[-1] - after[0]) / after[0], 2) if len(after) > 1 else None,
            "max_after_warmup_pct": round(100 * (max(after) - after[0]) / after[0], 2) if len(after) > 1 else None}


def long_document(paragraphs, chars: int) -> str:
    """Paragraphs joined by spaces (cycled) up to `chars` characters, cut at a space."""
    text = ""
    for paragraph in cycle(paragraphs):
        text += paragraph + " "
        if len(text) > chars:
            return text[:text.rfind(" ", 0, chars + 1)].rstrip()


def measure_long(pipeline: Path, text_file: Path) -> dict:
    """In this (fresh) process: one document through the pipeline."""
    text = text_file.read_text(encoding="utf8")
    nlp = spacy.load(pipeline)
    nlp("A short text first, so that every lazy part is loaded before the measurement.")
    gc.collect()
    reset_peak_rss()
    before = peak_rss_mb()
    start = time.perf_counter()
    doc = nlp(text)
    seconds = time.perf_counter() - start
    return {"chars": len(text), "tokens": len(doc), "seconds": round(seconds, 2),
            "peak_growth_mb": round(peak_rss_mb() - before, 1), "entities": len(doc.ents)}


def run_long(pipeline: Path, text: str, tmp: Path) -> dict:
    text_file = tmp / f"long-{len(text)}.txt"
    text_file.write_text(text, encoding="utf8")
    command = [sys.executable, __file__, "--measure-long", str(text_file), "--pipeline", str(pipeline)]
    out = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = BenchParser(__doc__)
    parser.data_file("--texts", "raw_text/wikitext2/valid.txt")
    parser.data_file("--conll", "conll2003/train.txt", help="labels for the head")
    parser.model()
    parser.threads()
    parser.add_argument("--n-texts", type=int, default=200_000)
    parser.add_argument("--sample-every", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=20_000, help="texts before the growth is counted")
    parser.add_argument("--max-words", type=int, default=12, help="words of each soak text at most")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--long-chars", type=int, default=1_000_000)
    parser.add_argument("--short-chars", type=int, default=100_000)
    parser.add_argument("--measure-long", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--pipeline", default=None, help=argparse.SUPPRESS)
    parser.quick("3,000 texts sampled every 500, documents of 100,000 and 10,000 characters")
    args = parser.parse_args()
    if args.measure_long:
        print(json.dumps(measure_long(Path(args.pipeline), Path(args.measure_long))))
        return
    if args.quick:
        args.n_texts, args.sample_every, args.warmup = 3000, 500, 1000
        args.long_chars, args.short_chars = 100_000, 10_000
    paragraphs = read_paragraphs(args.texts)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pipeline = ner_pipeline(args.model, args.conll, tmp / "ner")
        result = {"soak": soak(pipeline, sentences(paragraphs, args.max_words), args.n_texts, args.sample_every,
                               args.warmup, args.batch_size)}
        for name, chars in (("short", args.short_chars), ("long", args.long_chars)):
            result[name] = run_long(pipeline, long_document(paragraphs, chars), tmp)
            print(json.dumps({name: result[name]}), flush=True)
    result["time_ratio"] = round(result["long"]["seconds"] / result["short"]["seconds"], 2)
    result["memory_ratio"] = round(result["long"]["peak_growth_mb"] / result["short"]["peak_growth_mb"], 2)
    result.update(batch_size=args.batch_size, max_words=args.max_words, head="untrained mlm_ner")
    print_result(result)


if __name__ == "__main__":
    main()
