"""CoNLL-2003 NER as bench/ner_conll.py trains "ours" (and bench/inference_speed.py,
bench/transfer.py, bench/ddp_finetune.py after it): seeded sentence subsamples,
the shared batch order, the spaCy training loop and configs/ner.cfg's pipeline;
and the untrained NER pipeline the inference-scaling benches run
(bench/scale_inference.py, bench/encoding_memory.py)."""
import random
from pathlib import Path

import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_mlm import conll_documents_to_docs, doc_entities, read_conll, spans_to_tags

from .common import REPO, BenchParser, Stopwatch


def add_data_options(parser: BenchParser, n_dev: int) -> None:
    """CoNLL-2003 train and dev (--train, --dev), how many sentences of each, and --model."""
    parser.data_file("--train", "conll2003/train.txt")
    parser.data_file("--dev", "conll2003/valid.txt")
    parser.model()
    parser.add_argument("--n-train", type=int, default=4000, help="training sentences (fixed seeded subsample; 0 = all)")
    parser.add_argument("--n-dev", type=int, default=n_dev, help="dev sentences (seeded subsample; 0 = all)")


def load_sentences(path, vocab, limit=0, seed=0):
    """One Doc per sentence of a CoNLL file; a seeded sample of `limit` of them (0: all)."""
    docs = list(conll_documents_to_docs(vocab, read_conll(path), n_sents=1))
    if limit and limit < len(docs):
        docs = random.Random(seed).sample(docs, limit)
    return docs


def batches(n, batch_size, epochs, seed):
    """The same shuffled index batches for every system."""
    rng = random.Random(seed)
    out = []
    for _ in range(epochs):
        order = list(range(n))
        rng.shuffle(order)
        out.extend(order[i : i + batch_size] for i in range(0, n, batch_size))
    return out


def fresh(nlp, doc, with_ents=False, with_sents=False):
    """`doc`'s words in `nlp`'s vocab; with its entities (the gold side of an Example)
    and its sentence starts if asked."""
    ents = spans_to_tags(len(doc), doc_entities(doc), "BIO") if with_ents else None
    sent_starts = [t.is_sent_start for t in doc] if with_sents else None
    return Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc], ents=ents,
               sent_starts=sent_starts)


def gold_examples(nlp, docs):
    return [Example(fresh(nlp, d), fresh(nlp, d, with_ents=True)) for d in docs]


def spacy_optimizer(lr: float, warmup: float, n_steps: int):
    from thinc.api import Adam, warmup_linear

    schedule = warmup_linear(initial_rate=lr, warmup_steps=int(warmup * n_steps), total_steps=n_steps)
    return Adam(learn_rate=schedule, L2=0.01, L2_is_weight_decay=True, grad_clip=1.0)


def train_spacy(nlp, examples, order, lr: float, warmup: float) -> float:
    """`nlp` initialized on `examples` and trained on the index batches `order`
    (peak `lr`, `warmup` share of the steps, linear decay); the training seconds."""
    nlp.initialize(lambda: examples)
    optimizer = spacy_optimizer(lr, warmup, len(order))
    losses = {}
    with Stopwatch() as clock:
        for step, idx in enumerate(order):
            nlp.update([examples[i] for i in idx], sgd=optimizer, drop=0.1, losses=losses)
            optimizer.step_schedules()
            if (step + 1) % 100 == 0:
                print(f"    step {step + 1}/{len(order)} {({k: round(v, 2) for k, v in losses.items()})}", flush=True)
                losses = {}
    return clock.seconds


def predict_spacy(nlp, dev_docs, with_sents=False):
    """(entities of each dev Doc, inference seconds), in batches of 64."""
    inputs = [fresh(nlp, d, with_sents=with_sents) for d in dev_docs]
    with Stopwatch() as clock:
        out = [doc_entities(doc) for doc in nlp.pipe(inputs, batch_size=64)]
    return out, clock.seconds


def build_ours(model_path, crf, context="none", context_pieces=64, precision=None):
    """configs/ner.cfg on `model_path`; `precision`: the encoder's (None: the config's)."""
    from spacy.util import load_config, load_model_from_config

    overrides = {"paths.encoder": model_path, "components.ner.model.crf": crf, "components.encoder.context": context,
                 "components.encoder.context_pieces": context_pieces}
    if precision is not None:
        overrides["components.encoder.model.precision"] = precision
    config = load_config(REPO / "configs" / "ner.cfg", overrides=overrides, interpolate=True)
    return load_model_from_config(config, auto_fill=True, validate=True)


def ner_pipeline(model: str, conll, out: Path) -> Path:
    """`model` + mlm_ner initialized on the labels of the first 50 sentences of
    `conll`, untrained (it costs what a trained one costs), saved to `out`; the
    head's initial weights are seeded, so every run builds the same pipeline."""
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": model}})
    nlp.add_pipe("mlm_ner", name="ner")
    docs = list(conll_documents_to_docs(nlp.vocab, read_conll(conll)))[:50]
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in docs]
    nlp.initialize(lambda: examples)
    nlp.to_disk(out)
    return out
