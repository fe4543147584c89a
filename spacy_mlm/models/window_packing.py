"""Several windows in one row of a training pass, each attending only to itself.

A training batch is a handful of random sentences of mixed lengths: grouped by
length (`tokenization/batching.py`) they still pad about a third of the
positions and take two or three passes. Packed side by side into a few rows of
about the same total length (`packed_rows`), they pad almost nothing and take
one pass. Each window keeps what it had alone: a block-diagonal attention mask
(a 3-d mask, `[row, query, key]`) keeps it from attending to its neighbours, and
position ids restart at its first piece. Attention to the rest of a row costs
row_length² products per row, which at rows of `ROW_LENGTH` pieces is a few
percent of what the padding cost (bench/train_step.py measures the step).

Only where verified: once per model, a probe runs two windows padded in two
rows and packed in one, in eval mode, with the model's own attention and with
the plain attention a CPU training pass swaps in (`attention.py`); the real
positions (and the pooler's output, where the model has one) must agree. A
family whose forward takes no `position_ids` (DistilBERT), reads only 2-d masks,
or pools in another way fails it and trains on length groups as before.
"""
import contextlib
import inspect
import logging
import weakref
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from .attention import plain_attention

logger = logging.getLogger(__name__)

# summed pieces a packed row aims at: 64 and 128 ran a NER step equally fast, 256 slower, and 128 still
# packs sentence pairs (bench/train_step.py, docs/speed.md)
ROW_LENGTH = 128
PROBE_LENGTHS = (6, 3)
# model -> whether packing is verified to give its padded outputs
_VERIFIED: "weakref.WeakKeyDictionary[nn.Module, bool]" = weakref.WeakKeyDictionary()


def position_offset(model: nn.Module) -> int:
    """The position id of a window's first piece: 0, or padding_idx + 1 in the
    families that count positions after the padding id (RoBERTa, XLM-R)."""
    padding_idx = getattr(getattr(model, "embeddings", None), "padding_idx", None)
    return 0 if padding_idx is None else int(padding_idx) + 1


def pass_inputs(
    rows: Sequence[Sequence[int]], windows: Sequence, lengths: np.ndarray, pad_id: int, *, packed: bool,
    offset: int = 0,
) -> Tuple[Dict[str, np.ndarray], Dict[int, Tuple[int, int]]]:
    """The arrays of one forward pass over `rows` (each a list of window
    indices) and where each window lands, {window: (row, first position)}.
    Unpacked (one window a row): input_ids, token_type_ids and a 2-d
    attention_mask. Packed: a 3-d block-diagonal attention_mask and
    position_ids restarting at `offset` for each window."""
    loads = [int(sum(lengths[w] for w in row)) for row in rows]
    longest = max(loads)
    ids = np.full((len(rows), longest), pad_id, dtype=np.int64)
    types = np.zeros_like(ids)
    mask = np.zeros((len(rows), longest, longest) if packed else (len(rows), longest), dtype=np.int64)
    positions = np.zeros_like(ids)
    places = {}
    for r, row in enumerate(rows):
        start = 0
        for w in row:
            end = start + int(lengths[w])
            ids[r, start:end] = windows[w].input_ids
            types[r, start:end] = windows[w].token_type_ids
            if packed:
                mask[r, start:end, start:end] = 1
                positions[r, start:end] = np.arange(offset, offset + end - start)
            else:
                mask[r, start:end] = 1
            places[w] = (r, start)
            start = end
    arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if packed:
        arrays["position_ids"] = positions
    return arrays, places


def pooled_rows(model: nn.Module, first_rows: torch.Tensor) -> torch.Tensor:
    """The pooler's output for windows whose first hidden rows are `first_rows`
    (n, width): the pooler reads a row's first position, which in a packed row
    is the first window's only."""
    return model.pooler(first_rows.unsqueeze(1))


def packing_verified(model: nn.Module) -> bool:
    """Whether `model` gives packed windows their padded outputs (probed once)."""
    verified = _VERIFIED.get(model)
    if verified is None:
        verified = _VERIFIED[model] = _verify(model)
    return verified


class _Window:
    def __init__(self, input_ids: np.ndarray):
        self.input_ids = input_ids
        self.token_type_ids = np.zeros_like(input_ids)


def _outputs(model: nn.Module, arrays: Dict[str, np.ndarray]) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    device = next(model.parameters()).device
    takes = inspect.signature(model.forward).parameters
    inputs = {name: torch.from_numpy(value).to(device) for name, value in arrays.items() if name in takes}
    out = model(**inputs, return_dict=True)
    return out.last_hidden_state, getattr(out, "pooler_output", None)


def _verify(model: nn.Module) -> bool:
    if "position_ids" not in inspect.signature(model.forward).parameters:
        logger.info("%s takes no position ids; training passes keep one window a row", type(model).__name__)
        return False
    vocab, pad_id = int(model.config.vocab_size), getattr(model.config, "pad_token_id", None)
    ids = [id_ for id_ in range(5, 5 + 2 * sum(PROBE_LENGTHS)) if id_ != pad_id][: sum(PROBE_LENGTHS)]
    windows = [_Window(np.asarray(ids[:PROBE_LENGTHS[0]]) % vocab),
               _Window(np.asarray(ids[PROBE_LENGTHS[0]:]) % vocab)]
    lengths = np.asarray(PROBE_LENGTHS)
    padded, _ = pass_inputs([[0], [1]], windows, lengths, pad_id or 0, packed=False)
    packed, places = pass_inputs([[0, 1]], windows, lengths, pad_id or 0, packed=True,
                                 offset=position_offset(model))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for attention in (contextlib.nullcontext, lambda: plain_attention(model)):
                with attention():
                    alone, alone_pooled = _outputs(model, padded)
                    together, _ = _outputs(model, packed)
                for w, n in enumerate(PROBE_LENGTHS):
                    row, start = places[w]
                    if not torch.allclose(alone[w, :n], together[row, start:start + n], atol=1e-4, rtol=1e-3):
                        logger.info("%s: packed windows give other outputs than padded ones; training passes "
                                    "keep one window a row", type(model).__name__)
                        return False
                if alone_pooled is not None:
                    firsts = torch.stack([together[places[w][0], places[w][1]] for w in range(len(windows))])
                    pooled = pooled_rows(model, firsts)
                    if pooled.shape != alone_pooled.shape or not torch.allclose(pooled, alone_pooled, atol=1e-4,
                                                                                rtol=1e-3):
                        logger.info("%s: its pooler reads packed rows otherwise; training passes keep one "
                                    "window a row", type(model).__name__)
                        return False
    except Exception as err:  # a model that cannot take a 3-d mask or position ids as given
        logger.info("%s: packed windows do not run (%s: %s); training passes keep one window a row",
                    type(model).__name__, type(err).__name__, err)
        return False
    finally:
        model.train(was_training)
    return True
