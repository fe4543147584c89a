"""What `doc._.mlm_encoding` costs the model's device when a process keeps its
Docs: a MiniLM NER pipeline (harness.ner.ner_pipeline, as bench/scale_inference.py
runs it) annotates N WikiText-2 paragraphs (cycled) kept in a list, once per
`store_encoding` setting of the encoder ("device", "host", "none"), and reports the device memory the kept
Docs hold (bytes of encoding tensors still on the model's device) and, on a GPU,
`torch.cuda.max_memory_allocated` and `memory_allocated` with the Docs held. With
the default "host" a GPU process's memory stays flat however many Docs it keeps.

    .venv/bin/python bench/encoding_memory.py [--quick] [--n-docs 10000] [--gpu-id 0]
        [--data-root DIR] [--texts FILE] [--conll FILE] [--model HF_DIR]

Last line: one JSON object: run_on (cpu or cuda) and, per setting, held_mb (encoding tensors on the device),
max_allocated_mb and allocated_mb (GPU only), entities (the same for every setting).
"""
import gc
import tempfile
from pathlib import Path

import spacy
import torch

from harness.common import BenchParser, print_result, read_paragraphs
from harness.ner import ner_pipeline

SETTINGS = ("device", "host", "none")
MB = 2 ** 20


def held_on_device(docs, device: str) -> int:
    """Bytes of encoding tensors the Docs keep on `device`."""
    total = 0
    for doc in docs:
        encoding = doc._.mlm_encoding
        if encoding is None:
            continue
        for tensor in (encoding.hidden_tensor, encoding.cls_tensor, encoding.layers_tensor, encoding.pooled_tensor):
            if tensor is not None and tensor.device.type == device:
                total += tensor.numel() * tensor.element_size()
    return total


def measure(pipeline: Path, texts, store: str, device: str, batch_size: int) -> dict:
    nlp = spacy.load(pipeline, config={"components": {"mlm_encoder": {"store_encoding": store}}})
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    docs = list(nlp.pipe(texts, batch_size=batch_size))
    result = {"held_mb": round(held_on_device(docs, device) / MB, 1),
              "entities": sum(len(doc.ents) for doc in docs)}
    if device == "cuda":
        result.update(max_allocated_mb=round(torch.cuda.max_memory_allocated() / MB, 1),
                      allocated_mb=round(torch.cuda.memory_allocated() / MB, 1))
    del docs, nlp
    gc.collect()
    return result


def main():
    parser = BenchParser(__doc__)
    parser.data_file("--texts", "raw_text/wikitext2/valid.txt")
    parser.data_file("--conll", "conll2003/train.txt", help="labels for the head")
    parser.model()
    parser.add_argument("--n-docs", type=int, default=10000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--gpu-id", type=int, default=-1, help="GPU to run on (-1: the CPU, where nothing is freed)")
    parser.quick("200 docs: checks that the bench runs")
    args = parser.parse_args()
    if args.quick:
        args.n_docs = 200
    device = "cpu"
    if args.gpu_id >= 0:
        spacy.require_gpu(args.gpu_id)
        device = "cuda"
    paragraphs = read_paragraphs(args.texts, args.n_docs)
    texts = [paragraphs[i % len(paragraphs)] for i in range(args.n_docs)]
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = ner_pipeline(args.model, args.conll, Path(tmp) / "ner")
        result = {store: measure(pipeline, texts, store, device, args.batch_size) for store in SETTINGS}
    result.update(run_on=device, n_docs=args.n_docs, batch_size=args.batch_size)
    print_result(result)


if __name__ == "__main__":
    main()
