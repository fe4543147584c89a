"""The peers, built one way for every bench: spacy-transformers' pipelines
(the layout of spaCy's trf configs: a `transformer` on strided spans, listeners
with mean pooling) and Hugging Face's fine-tuning loop (the run_glue / run_ner
recipe: AdamW without decay on biases and LayerNorm weights, linear warmup and
decay, gradient clipping 1.0; `precision` "bf16" is autocast over forward and
loss, as `Trainer(bf16=True)` runs on a CPU: backward, optimizer and weights fp32).
"""
from typing import Iterable, List, Tuple

import torch

from spacy_mlm import forward_precision

from .common import Stopwatch

CPU = torch.device("cpu")


def trf_model(model: str, window: int = 128) -> dict:
    """spacy-transformers' TransformerModel on `model`, spans of `window` pieces
    with a stride of 3/4 of it (its defaults: 128 and 96)."""
    return {
        "@architectures": "spacy-transformers.TransformerModel.v3",
        "name": str(model),
        "tokenizer_config": {"use_fast": True},
        "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": window,
                      "stride": window * 3 // 4},
    }


def trf_listener() -> dict:
    """The tok2vec of a spaCy component listening to the `transformer`."""
    return {"@architectures": "spacy-transformers.TransformerListener.v1", "grad_factor": 1.0,
            "pooling": {"@layers": "reduce_mean.v1"}, "upstream": "*"}


def spacy_trf(model: str, window: int = 128, head: Tuple[str, dict] = None, initialize: bool = False):
    """A blank English pipeline with spacy-transformers' `transformer` on `model`
    and, if given, `head` = (factory, its model config) listening to it."""
    import spacy
    import spacy_transformers  # noqa: F401

    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": trf_model(model, window)})
    if head is not None:
        factory, head_model = head
        nlp.add_pipe(factory, config={"model": head_model})
    if initialize:
        nlp.initialize()
    return nlp


def trf_token_vectors(doc) -> dict:
    """{token index: the mean of its pieces' rows in `doc._.trf_data`} for the tokens that have pieces."""
    trf = doc._.trf_data
    rows = trf.tensors[0].reshape(-1, trf.tensors[0].shape[-1])
    return {i: rows[trf.align[i].dataXd.ravel()].mean(axis=0) for i in range(len(doc)) if trf.align.lengths[i]}


def hf_finetune(model, batches: Iterable[Tuple[dict, torch.Tensor]], total_steps: int, lr: float, warmup_steps: int,
                precision: str = "fp32", log_every: int = 0) -> float:
    """Train `model` on `batches` of (encoded inputs, labels), made as they are
    consumed (their encoding counts as training time); the training seconds.
    `log_every`: print the mean loss every so many steps."""
    from transformers import get_linear_schedule_with_warmup

    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    model.train()
    running = 0.0
    with Stopwatch() as clock:
        for step, (inputs, labels) in enumerate(batches):
            with forward_precision(CPU, precision):
                loss = model(**inputs, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            if log_every:
                running += loss.item()
                if (step + 1) % log_every == 0:
                    print(f"    step {step + 1}/{total_steps} loss {running / log_every:.3f}", flush=True)
                    running = 0.0
    return clock.seconds


def hf_logits(model, batches: Iterable[dict], precision: str = "fp32") -> List[torch.Tensor]:
    """The logits of each batch of encoded inputs, in eval mode, without gradients, at `precision`."""
    model.eval()
    out = []
    with torch.inference_mode():
        for inputs in batches:
            with forward_precision(CPU, precision):
                out.append(model(**inputs).logits)
    return out


def chunks(rows: list, size: int = 64):
    """`rows` in consecutive batches of `size` (prediction batches)."""
    return (rows[i : i + size] for i in range(0, len(rows), size))
