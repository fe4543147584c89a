"""Fill in the blanks with a masked-LM model directory.

Blanks are written `___` (three or more underscores) or as the tokenizer's own
mask token. Every blank is one masked piece, and all blanks are predicted in the
same forward pass, each seeing the others as masks.
"""
import re
from pathlib import Path
from typing import List, Tuple, Union

import torch

from .errors import ModelLoadError, SpacyMlmError

BLANK = re.compile(r"_{3,}")
Candidates = List[Tuple[str, float]]


class FillMask:
    def __init__(self, model_dir: Union[str, Path]):
        from .models.hf import load_mlm_model

        self.model_dir = Path(model_dir)
        loaded = load_mlm_model(self.model_dir)
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        if loaded.head_initialised:
            raise ModelLoadError(
                self.model_dir, "has no MLM head, so its predictions would be random; pretrain it first (spacy_mlm pretrain)"
            )
        self.model.eval()
        self._banned = torch.tensor(sorted(set(self.tokenizer.all_special_ids)), dtype=torch.long)

    def with_masks(self, text: str) -> str:
        mask = self.tokenizer.mask_token
        # the tokenizer treats the mask token as a word of its own; keep the spacing as written
        return BLANK.sub(mask, text)

    @torch.no_grad()
    def __call__(self, text: str, top_k: int = 5) -> List[Candidates]:
        """For each blank, left to right: the top_k (piece, probability) candidates."""
        if top_k < 1:
            raise SpacyMlmError(f"top_k must be at least 1, got {top_k}")
        masked = self.with_masks(text)
        enc = self.tokenizer(masked, return_tensors="pt", truncation=True)
        positions = (enc["input_ids"][0] == self.tokenizer.mask_token_id).nonzero().squeeze(1)
        if positions.numel() == 0:
            raise SpacyMlmError(f"no blank in {text!r}: write ___ or {self.tokenizer.mask_token} where a word is missing")
        logits = self.model(**enc).logits[0, positions]
        logits[:, self._banned] = float("-inf")
        probs = logits.softmax(-1)
        top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
        return [
            [(self.tokenizer.convert_ids_to_tokens(int(i)), float(p)) for p, i in zip(row_p, row_i)]
            for row_p, row_i in zip(top.values, top.indices)
        ]


def fill_mask(model_dir: Union[str, Path], text: str, top_k: int = 5) -> List[Candidates]:
    """One-off convenience; keep a `FillMask` around to fill many texts."""
    return FillMask(model_dir)(text, top_k)
