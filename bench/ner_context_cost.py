"""What document context costs the encoder: the same CoNLL sentences encoded one
sentence per Doc, as whole documents (`convert-conll --n-sents 0`) through the
encoder's own windows, and, for each `--context-pieces` C, sentence by sentence with
up to C pieces of their document a side (`mlm_encoder` context = "document") (issue 18).

Sentences are taken from the start of the file, whole documents at a time, until
`--n-sents` are in. Reported per layout: Docs, windows, content pieces, padded
positions and multiply-adds of the forward passes (grouped by `length_batches`, as
the encoder does), and the best of `--repeats` encoding times (`nlp.pipe` with the
`mlm_encoder` alone, the layouts alternating) with words/s. For the document layout,
how the windows limit context: the sentences with less context in their owner
windows than the document has, the fewest pieces of context such a sentence still
sees on a side, and the sentences cut by a window boundary.

    OMP_NUM_THREADS=1 python bench/ner_context_cost.py --n-sents 300
    OMP_NUM_THREADS=1 python bench/ner_context_cost.py --quick

Last line: one JSON object.
"""
import numpy as np
import spacy
from spacy.tokens import Doc

from harness.common import BenchParser, Stopwatch, print_result
from spacy_mlm import conll_documents_to_docs, length_batches, read_conll


def first_documents(path, n_sents):
    """Whole documents from the start of `path` until at least `n_sents` sentences."""
    documents, total = [], 0
    for document in read_conll(path):
        documents.append(document)
        total += len(document.sentences)
        if total >= n_sents:
            break
    return documents


def layout_stats(encoder_model, docs, batch_size):
    """Windows, content pieces, padded positions and the transformer's multiply-adds
    (GMAC: 12 width^2 per position and layer for the linear layers, 2 x padded length
    x width for attention), batched as `nlp.pipe` would: a measure of the work that
    the machine's load does not blur."""
    tokenizer = encoder_model.attrs["tokenizer"]
    config = encoder_model.shims[0].module.config
    width, layers = config.hidden_size, config.num_hidden_layers
    ffn = getattr(config, "intermediate_size", 4 * width)
    windows = pieces = padded = 0
    macs = 0.0
    for i in range(0, len(docs), batch_size):
        doc_pieces = tokenizer(docs[i : i + batch_size])
        lengths = np.array([len(w.input_ids) for p in doc_pieces for w in p.windows])
        windows += len(lengths)
        pieces += sum(len(p.ids) for p in doc_pieces)
        for group in length_batches(lengths, encoder_model.attrs["max_batch_pieces"]):
            positions = len(group) * int(lengths[group[0]])
            padded += positions
            macs += positions * layers * (4 * width * width + 2 * width * ffn + 2 * int(lengths[group[0]]) * width)
    return {"docs": len(docs), "windows": windows, "content_pieces": pieces, "padded_positions": padded,
            "gmac": round(macs / 1e9, 2)}


def sentence_context(encoder_model, docs):
    """How windows limit each sentence's context in the document layout: the
    sentences whose pieces have fewer pieces of context on a side in their owner
    windows than the document has there, the fewest such pieces, and the sentences
    whose pieces are owned by more than one window (cut by a window boundary)."""
    tokenizer = encoder_model.attrs["tokenizer"]
    prefix, suffix = len(tokenizer.prefix), len(tokenizer.suffix)
    n_sents = limited = cut = 0
    fewest = None
    for doc, p in zip(docs, tokenizer(docs)):
        content = np.array([len(w.input_ids) - prefix - suffix for w in p.windows])
        left = p.owner_position - prefix
        right = content[p.owner] - 1 - left
        index = np.arange(len(p.ids))
        for sent in doc.sents:
            inside = (p.starts >= sent.start_char) & (p.ends <= sent.end_char)
            if not inside.any():
                continue
            n_sents += 1
            pieces = index[inside]
            # per piece: the context its window gives against the context the document has
            short = np.concatenate([left[inside] - pieces, right[inside] - (len(p.ids) - 1 - pieces)])
            seen = np.concatenate([left[inside], right[inside]])[short < 0]
            if len(seen):
                limited += 1
                fewest = int(seen.min()) if fewest is None else min(fewest, int(seen.min()))
            cut += len(np.unique(p.owner[inside])) > 1
    return {"sentences": n_sents, "window_limited": limited, "fewest_context_when_limited": fewest,
            "cut_by_windows": int(cut)}


def read_as(tokenizer, name):
    """Set the tokenizer for a layout: "in context C" reads sentences with C pieces a side."""
    tokenizer.set_context(*(("document", int(name.split()[-1])) if name.startswith("in context") else ("none", 0)))


def time_encodings(nlp, layouts, batch_size, repeats):
    """Best time per layout over `repeats` rounds, the layouts alternating within each
    round so that a change of load on a shared machine hits both."""
    best = {name: float("inf") for name in layouts}
    for _ in range(repeats):
        for name, docs in layouts.items():
            read_as(nlp.get_pipe("mlm_encoder").model.attrs["tokenizer"], name)
            fresh = [Doc(nlp.vocab, words=[t.text for t in d], sent_starts=[t.is_sent_start for t in d]) for d in docs]
            with Stopwatch() as clock:
                for _ in nlp.pipe(fresh, batch_size=batch_size):
                    pass
            best[name] = min(best[name], clock.seconds)
    return best


def main():
    parser = BenchParser(__doc__)
    parser.data_file("--data", "conll2003/train.txt", "CoNLL file whose first documents are encoded")
    parser.add_argument("--n-sents", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64, help="Docs per nlp.pipe batch, both layouts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.threads()
    parser.model()
    parser.quick("100 sentences, one round: a smoke test")
    parser.add_argument("--context-pieces", default="16,32,64",
                        help="comma-separated C: also read each sentence with C pieces of its document a side")
    args = parser.parse_args()
    if args.quick:
        args.n_sents, args.repeats = 100, 1
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": args.model}})
    nlp.initialize()
    model = nlp.get_pipe("mlm_encoder").model
    documents = first_documents(args.data, args.n_sents)
    docs = {
        "sentences": list(conll_documents_to_docs(nlp.vocab, documents, n_sents=1)),
        "documents": list(conll_documents_to_docs(nlp.vocab, documents, n_sents=0)),
    }
    for pieces in filter(None, args.context_pieces.split(",")):
        docs[f"in context {int(pieces)}"] = docs["documents"]
    n_words = sum(len(d) for d in docs["sentences"])
    result = {"n_sents": len(docs["sentences"]), "n_words": n_words, "window": model.attrs["tokenizer"].max_length,
              "overlap": model.attrs["tokenizer"].overlap, "threads": args.threads}
    time_encodings(nlp, {"warm-up": docs["sentences"][:64]}, args.batch_size, 1)
    seconds = time_encodings(nlp, docs, args.batch_size, args.repeats)
    for name, layout in docs.items():
        read_as(model.attrs["tokenizer"], name)
        stats = layout_stats(model, layout, args.batch_size)
        stats.update(seconds=round(seconds[name], 3), words_per_s=round(n_words / seconds[name], 1))
        print(name, stats, flush=True)
        result[name] = stats
    read_as(model.attrs["tokenizer"], "documents")
    result["context"] = sentence_context(model, docs["documents"])
    print("context (pieces, documents layout):", result["context"])
    for name in docs:
        if name != "sentences":
            key = "" if name == "documents" else "_" + name.replace(" ", "_")
            result["time_ratio" + key] = round(result[name]["seconds"] / result["sentences"]["seconds"], 3)
            result["gmac_ratio" + key] = round(result[name]["gmac"] / result["sentences"]["gmac"], 3)
    print_result(result)


if __name__ == "__main__":
    main()
