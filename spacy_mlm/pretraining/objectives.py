"""The pretraining objectives on top of a Hugging Face `*ForMaskedLM` model.

The model's own MLM head (BERT: dense + gelu + LayerNorm, then a decoder whose
weight is the input embedding matrix, plus a bias) is kept, so saved weights keep
Hugging Face's key names. What changes is where it runs: only on the hidden
states of the chosen positions (about 15%), never on the full (batch, length,
vocab) logits tensor, which on CPU costs more than the encoder itself.
"""
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelLoadError
from .masking import IGNORE_INDEX


def find_mlm_head(mlm_model: nn.Module) -> nn.Module:
    """The module mapping hidden states to vocabulary logits: the one child of a
    `*ForMaskedLM` model besides the backbone (BERT `cls`, RoBERTa `lm_head`, ...)."""
    backbone_name = mlm_model.base_model_prefix
    heads = [
        (name, module)
        for name, module in mlm_model.named_children()
        if name != backbone_name and not isinstance(module, nn.modules.loss._Loss)
    ]
    if len(heads) != 1:
        names = ", ".join(name for name, _ in heads)
        raise ModelLoadError(
            getattr(mlm_model, "name_or_path", type(mlm_model).__name__),
            f"{type(mlm_model).__name__}: the MLM head is not a single module ({names}); "
            "supported are BERT- and RoBERTa-style models",
        )
    return heads[0][1]


class NextSentenceHead(nn.Module):
    """BERT's NSP classifier: pooler (dense + tanh) on the final [CLS] vector, then 2 classes."""

    def __init__(self, width: int):
        super().__init__()
        self.pool = nn.Linear(width, width)
        self.classify = nn.Linear(width, 2)

    def forward(self, cls_vectors: torch.Tensor) -> torch.Tensor:
        return self.classify(torch.tanh(self.pool(cls_vectors)))


@dataclass
class ObjectiveSums:
    """Sums, not means: the loop divides by counts over the whole (possibly
    distributed, accumulated) batch, so every split gives the same gradient."""

    mlm_loss: torch.Tensor
    mlm_correct: torch.Tensor
    n_predicted: int
    nsp_loss: Optional[torch.Tensor] = None
    nsp_correct: Optional[torch.Tensor] = None
    n_pairs: int = 0


def masked_lm_sums(hidden: torch.Tensor, labels: torch.Tensor, head: nn.Module):
    """(summed NLL, number correct, number predicted) of the head run at the
    labelled positions only."""
    flat_labels = labels.reshape(-1)
    chosen = (flat_labels != IGNORE_INDEX).nonzero().squeeze(1)
    logits = head(hidden.reshape(-1, hidden.shape[-1]).index_select(0, chosen))
    targets = flat_labels.index_select(0, chosen)
    loss = F.cross_entropy(logits.float(), targets, reduction="sum")
    correct = (logits.detach().argmax(-1) == targets).sum()
    return loss, correct, int(chosen.numel())


class PretrainingModel(nn.Module):
    def __init__(self, mlm_model: nn.Module, next_sentence: bool = False):
        super().__init__()
        self.mlm_model = mlm_model
        self.nsp_head = NextSentenceHead(mlm_model.config.hidden_size) if next_sentence else None
        self._head_name = next(
            name for name, module in mlm_model.named_children() if module is find_mlm_head(mlm_model)
        )
        self._types = (getattr(mlm_model.config, "type_vocab_size", 0) or 0) > 1

    @property
    def backbone(self) -> nn.Module:
        return getattr(self.mlm_model, self.mlm_model.base_model_prefix)

    @property
    def head(self) -> nn.Module:
        return getattr(self.mlm_model, self._head_name)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        nsp_labels: Optional[torch.Tensor] = None,
    ) -> ObjectiveSums:
        kwargs = {"attention_mask": attention_mask}
        if self._types and token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        hidden = self.backbone(input_ids=input_ids, **kwargs).last_hidden_state
        loss, correct, n = masked_lm_sums(hidden, labels, self.head)
        sums = ObjectiveSums(loss, correct, n)
        if self.nsp_head is not None and nsp_labels is not None:
            nsp_logits = self.nsp_head(hidden[:, 0])
            sums.nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels, reduction="sum")
            sums.nsp_correct = (nsp_logits.detach().argmax(-1) == nsp_labels).sum()
            sums.n_pairs = int(nsp_labels.numel())
        return sums
