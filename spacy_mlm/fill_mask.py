"""Fill in the blanks with a masked-LM model directory.

Blanks are written `___` (three or more underscores) or as the tokenizer's own
mask token; every other special-token string in the text ("[SEP]", "<s>", ...)
is text, split into pieces like any other word. Every blank is one masked
piece, and all blanks are predicted together, each seeing the others as masks.

A text longer than the model's positions is cut into overlapping windows as
the encoder cuts a document (`PieceTokenizer.windows`), and each blank is
predicted in the window where it sits furthest from an edge, so no blank past
the model's limit is lost; only the windows holding a blank are run.
"""
import re
from pathlib import Path
from typing import List, Optional, Tuple, Union

import numpy as np
import torch

from .errors import ModelLoadError, SpacyMlmError

BLANK = re.compile(r"_{3,}")
# pieces of context on each side a blank keeps where a text is cut into windows
# (as much as the window allows, up to half of it, as in the encoder)
OVERLAP = 128
WINDOWS_PER_PASS = 8
Candidates = List[Tuple[str, float]]


class FillMask:
    def __init__(self, model_dir: Union[str, Path], device: Optional[Union[str, torch.device]] = None):
        """device: where the model runs; by default thinc's current device (the GPU
        after `spacy.require_gpu()` or `--gpu-id`, else the CPU)."""
        from thinc.api import get_torch_default_device

        from .models.hf import load_mlm_model, max_positions
        from .tokenization.tokenizer import PieceTokenizer

        self.model_dir = Path(model_dir)
        loaded = load_mlm_model(self.model_dir)
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        if loaded.head_initialised:
            raise ModelLoadError(
                self.model_dir, "has no MLM head, so its predictions would be random; pretrain it first (spacy_mlm pretrain)"
            )
        self.device = torch.device(device) if device is not None else get_torch_default_device()
        self.model.to(self.device).eval()
        self.pieces = PieceTokenizer(self.tokenizer, max_positions(self.model, self.tokenizer), OVERLAP)
        self._banned = torch.tensor(sorted(set(self.tokenizer.all_special_ids)), dtype=torch.long)
        self._blank = re.compile(f"{BLANK.pattern}|{re.escape(self.tokenizer.mask_token)}")
        # the spaces the mask token takes in with it (RoBERTa's <mask> swallows the one before it)
        mask = self.tokenizer.added_tokens_decoder[self.tokenizer.mask_token_id]
        self._strip = (getattr(mask, "lstrip", False), getattr(mask, "rstrip", False))

    def piece_ids(self, text: str) -> np.ndarray:
        """The content piece ids of `text` with one mask id per blank; the text
        between blanks is encoded as text, special-token strings included."""
        parts = self._blank.split(text)
        lstrip, rstrip = self._strip
        last = len(parts) - 1
        for k in range(len(parts)):
            if lstrip and k < last:
                parts[k] = parts[k].rstrip()
            if rstrip and k > 0:
                parts[k] = parts[k].lstrip()
        encoded = self.tokenizer(
            parts, add_special_tokens=False, split_special_tokens=True, return_attention_mask=False,
            return_token_type_ids=False, verbose=False,
        )["input_ids"]
        ids: List[int] = list(encoded[0])
        for part in encoded[1:]:
            ids += [self.tokenizer.mask_token_id, *part]
        return np.asarray(ids, dtype=np.int64)

    @torch.no_grad()
    def __call__(self, text: str, top_k: int = 5) -> List[Candidates]:
        """For each blank, left to right: the top_k (text, probability) candidates,
        each piece as the tokenizer decodes it alone (`Ġby` is " by", `▁A` is
        "A"), as transformers' fill-mask pipeline gives its `token_str`."""
        if top_k < 1:
            raise SpacyMlmError(f"top_k must be at least 1, got {top_k}")
        ids = self.piece_ids(text)
        blanks = np.flatnonzero(ids == self.tokenizer.mask_token_id)
        if not len(blanks):
            raise SpacyMlmError(f"no blank in {text!r}: write ___ or {self.tokenizer.mask_token} where a word is missing")
        windows, owner, position = self.pieces.windows(ids)
        needed = sorted(set(owner[blanks].tolist()))
        logits = torch.empty((len(blanks), len(self.tokenizer)))
        for start in range(0, len(needed), WINDOWS_PER_PASS):
            batch = needed[start : start + WINDOWS_PER_PASS]
            out = self.model(**self._inputs([windows[w].input_ids for w in batch])).logits
            for row, w in enumerate(batch):
                mine = np.flatnonzero(owner[blanks] == w)
                rows = torch.from_numpy(position[blanks[mine]]).to(out.device)
                logits[torch.from_numpy(mine)] = out[row, rows, : logits.shape[1]].float().cpu()
        logits[:, self._banned] = float("-inf")
        probs = logits.softmax(-1)
        top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
        return [
            [(self.tokenizer.decode([int(i)]), float(p)) for p, i in zip(row_p, row_i)]
            for row_p, row_i in zip(top.values, top.indices)
        ]

    def _inputs(self, rows: List[np.ndarray]):
        """input_ids and attention_mask of windows padded to the longest."""
        longest = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), longest), self.tokenizer.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(rows), longest), dtype=torch.long)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = torch.from_numpy(row)
            attention[i, : len(row)] = 1
        return {"input_ids": input_ids.to(self.device), "attention_mask": attention.to(self.device)}


def fill_mask(model_dir: Union[str, Path], text: str, top_k: int = 5) -> List[Candidates]:
    """One-off convenience; keep a `FillMask` around to fill many texts."""
    return FillMask(model_dir)(text, top_k)
