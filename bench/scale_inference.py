"""Inference beyond one process: words/s of a MiniLM NER pipeline (mlm_encoder +
mlm_ner) over WikiText-2 paragraphs in one process, in two (`nlp.pipe(...,
n_process=2)`), and as a batch job on a local Ray with one and with two workers
(`spacy_mlm.apply_pipeline(engine="ray")`), each process or worker on
one torch thread.

    OMP_NUM_THREADS=1 .venv/bin/python bench/scale_inference.py [--quick]
        [--data-root DIR] [--texts FILE] [--model HF_DIR | --pipeline SAVED_NER_PIPELINE] [--conll FILE]

Without --pipeline, the NER pipeline is MiniLM with an mlm_ner head initialized
on the labels of a few CoNLL-2003 sentences (untrained: it costs what a trained
one costs). The one- and two-process figures time `nlp.pipe` on a loaded
pipeline (the second forks its workers inside the timing); the Ray figures time
the whole job, from the cluster's start of its actors (each loads the pipeline)
to the last shard written, so on a short run they carry that start-up. All
figures are wall-clock and sensitive to other load on the machine.

Last line: one JSON object with wps_1proc, wps_2proc, wps_ray_1, wps_ray_2,
speedup_2proc, speedup_ray_2 and the run's settings.
"""
import math
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the forked processes and the Ray workers: one thread each

import spacy  # noqa: E402
import srsly  # noqa: E402
import torch  # noqa: E402

from harness.common import BenchParser, print_result, read_paragraphs  # noqa: E402
from harness.ner import ner_pipeline  # noqa: E402

import spacy_mlm  # noqa: E402


def pipe_wps(nlp, texts, n_words, n_process, batch_size) -> float:
    start = time.perf_counter()
    for _ in nlp.pipe(texts, n_process=n_process, batch_size=batch_size):
        pass
    return n_words / (time.perf_counter() - start)


def ray_wps(pipeline: Path, texts, n_words, workers, batch_size, work: Path) -> float:
    input_path = work / "texts.jsonl"
    srsly.write_jsonl(input_path, [{"text": t} for t in texts])
    shard_size = math.ceil(len(texts) / 8)  # several shards a worker, so both have work to the end
    start = time.perf_counter()
    spacy_mlm.apply_pipeline(pipeline, input_path, work / f"ray_{workers}", engine="ray", workers=workers,
                   batch_size=batch_size, shard_size=shard_size, quiet=True)
    return n_words / (time.perf_counter() - start)


def main():
    parser = BenchParser(__doc__)
    parser.data_file("--texts", "raw_text/wikitext2/valid.txt")
    parser.data_file("--conll", "conll2003/train.txt", help="labels for the head")
    parser.model()
    parser.add_argument("--pipeline", type=Path, default=None, help="a saved NER pipeline instead of the built one")
    parser.add_argument("--n-texts", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.quick("40 paragraphs: checks that the bench runs")
    args = parser.parse_args()
    if args.quick:
        args.n_texts = 40
    torch.set_num_threads(1)
    texts = read_paragraphs(args.texts, args.n_texts)
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pipeline = args.pipeline or ner_pipeline(args.model, args.conll, work / "ner")
        nlp = spacy.load(pipeline)
        n_words = sum(len(nlp.make_doc(t)) for t in texts)
        list(nlp.pipe(texts[: args.batch_size], batch_size=args.batch_size))  # warm up
        result = {"wps_1proc": pipe_wps(nlp, texts, n_words, 1, args.batch_size),
                  "wps_2proc": pipe_wps(nlp, texts, n_words, 2, args.batch_size)}
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            for workers in (1, 2):
                result[f"wps_ray_{workers}"] = ray_wps(pipeline, texts, n_words, workers, args.batch_size, work)
        finally:
            ray.shutdown()
    result = {key: round(value, 1) for key, value in result.items()}
    result.update(speedup_2proc=round(result["wps_2proc"] / result["wps_1proc"], 3),
                  speedup_ray_2=round(result["wps_ray_2"] / result["wps_ray_1"], 3),
                  n_texts=len(texts), n_words=n_words, batch_size=args.batch_size, cpus=os.cpu_count(),
                  pipeline=str(args.pipeline) if args.pipeline else "MiniLM + untrained mlm_ner")
    print_result(result)


if __name__ == "__main__":
    main()
