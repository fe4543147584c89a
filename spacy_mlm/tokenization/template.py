"""The special tokens a tokenizer puts around one text and around a pair.

Read from the tokenizer's own encoding of a probe text (and pair), which runs
its tokenizer.json post-processor: `build_inputs_with_special_tokens` is not
enough, since transformers' generic `PreTrainedTokenizerFast` (ModernBERT's
tokenizer class, and that of many models saved with `tokenizers` alone) leaves
it without special tokens while its post-processor adds `[CLS]` and `[SEP]`.
"""
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence, Tuple

import numpy as np

PROBE = ("a", "b")


@dataclass(frozen=True)
class SpecialTemplate:
    """Special-token ids and their segment ids: before and after a single
    text; before, between and after the two sides of a pair, and the segment
    id of each side's pieces."""

    prefix: np.ndarray
    suffix: np.ndarray
    pair_parts: Tuple[np.ndarray, np.ndarray, np.ndarray]
    pair_part_types: Tuple[np.ndarray, np.ndarray, np.ndarray]
    side_types: Tuple[int, int]

    def wrap(self, a: Sequence[int], b: Optional[Sequence[int]] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, segment ids, is-special flags) of content ids `a` (and `b`) in the template."""
        a = np.asarray(a, dtype=np.int64)
        zeros = lambda part: np.zeros(len(part), np.int64)  # noqa: E731
        if b is None:
            parts = [(self.prefix, zeros(self.prefix), True), (a, zeros(a), False),
                     (self.suffix, zeros(self.suffix), True)]
        else:
            b = np.asarray(b, dtype=np.int64)
            (before, middle, after), (t_before, t_middle, t_after) = self.pair_parts, self.pair_part_types
            parts = [(before, t_before, True), (a, np.full(len(a), self.side_types[0]), False),
                     (middle, t_middle, True), (b, np.full(len(b), self.side_types[1]), False),
                     (after, t_after, True)]
        ids = np.concatenate([part for part, _, _ in parts]).astype(np.int64)
        types = np.concatenate([part_types for _, part_types, _ in parts]).astype(np.int64)
        return ids, types, np.concatenate([np.full(len(part), special) for part, _, special in parts])


@lru_cache(maxsize=32)
def special_template(hf_tokenizer) -> SpecialTemplate:
    """The template of a fast tokenizer, from its encoding of PROBE."""
    single = hf_tokenizer(PROBE[0], add_special_tokens=True, split_special_tokens=True, verbose=False)
    ids, seq = np.asarray(single["input_ids"]), _sequence_ids(single)
    content = np.flatnonzero(seq == 0)
    prefix, suffix = ids[: content[0]], ids[content[-1] + 1 :]
    pair = hf_tokenizer(*PROBE, add_special_tokens=True, split_special_tokens=True, return_token_type_ids=True,
                        verbose=False)
    ids, seq = np.asarray(pair["input_ids"]), _sequence_ids(pair)
    types = np.asarray(pair["token_type_ids"])
    side_a, side_b = np.flatnonzero(seq == 0), np.flatnonzero(seq == 1)
    cuts = [slice(0, side_a[0]), slice(side_a[-1] + 1, side_b[0]), slice(side_b[-1] + 1, len(ids))]
    return SpecialTemplate(
        prefix.astype(np.int64), suffix.astype(np.int64),
        tuple(ids[cut].astype(np.int64) for cut in cuts), tuple(types[cut].astype(np.int64) for cut in cuts),
        (int(types[side_a[0]]), int(types[side_b[0]])),
    )


def _sequence_ids(encoding) -> np.ndarray:
    return np.asarray([-1 if s is None else s for s in encoding.sequence_ids(0)])
