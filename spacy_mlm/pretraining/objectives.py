"""The pretraining objectives on top of a Hugging Face `*ForMaskedLM` model.

The model's own MLM head (BERT: dense + gelu + LayerNorm, then a decoder whose
weight is the input embedding matrix, plus a bias) is kept, so saved weights keep
Hugging Face's key names. What changes is where it runs: only on the hidden
states of the chosen positions (about 15%), never on the full (batch, length,
vocab) logits tensor, which on CPU costs more than the encoder itself. For the
same reason the last transformer layer (BERT/RoBERTa-style) is evaluated only
for the chosen positions: its keys and values still come from every position, so
the result is the full layer's, at about 15% of its cost.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np
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


def set_output_bias(mlm_model: nn.Module, unigram_probs: np.ndarray) -> None:
    """Start the decoder bias of a fresh MLM head at log p(token) (smoothed), so
    that its first predictions are the corpus unigram distribution, not noise."""
    bias = mlm_model.get_output_embeddings().bias
    if bias is None:
        return
    probs = np.asarray(unigram_probs, dtype=np.float64)[: bias.shape[0]]
    smoothed = (probs + 1e-3 / len(probs)) / (1 + 1e-3)
    with torch.no_grad():
        bias[: len(probs)] = torch.from_numpy(np.log(smoothed)).to(bias.dtype)
        bias[: len(probs)] -= bias[: len(probs)].mean()


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


def masked_lm_sums(selected: torch.Tensor, targets: torch.Tensor, head: nn.Module):
    """(summed NLL, number correct, number predicted) of the head run on the
    hidden states of the chosen positions only (`selected`: (n, width))."""
    logits = head(selected)
    loss = F.cross_entropy(logits.float(), targets, reduction="sum")
    correct = (logits.detach().argmax(-1) == targets).sum()
    return loss, correct, int(targets.numel())


def supports_sparse_top_layer(backbone: nn.Module) -> bool:
    """BERT-style layout (embeddings, encoder.layer[i].attention.self.query ...),
    absolute positions, no decoder: what `top_layer_at` relies on."""
    layers = getattr(getattr(backbone, "encoder", None), "layer", None)
    if not hasattr(backbone, "embeddings") or not layers:
        return False
    top = layers[-1]
    attn = getattr(getattr(top, "attention", None), "self", None)
    return (
        attn is not None
        and all(hasattr(attn, n) for n in ("query", "key", "value", "num_attention_heads", "attention_head_size"))
        and getattr(attn, "position_embedding_type", "absolute") == "absolute"
        and not getattr(top, "is_decoder", False)
        and all(hasattr(m, "forward") for m in (top.attention.output, top.intermediate, top.output))
    )


def top_layer_at(layer: nn.Module, hidden: torch.Tensor, additive_mask: Optional[torch.Tensor], chosen: torch.Tensor):
    """Outputs of a BERT layer at the chosen positions, (n, width) in row-major
    order: queries (and the feed-forward part) only there, keys/values everywhere."""
    n_rows, length, width = hidden.shape
    attn = layer.attention.self
    heads, head_size = attn.num_attention_heads, attn.attention_head_size
    counts = chosen.sum(1)
    n_query = int(counts.max())
    # chosen positions of each row first, in ascending order (stable sort), padded with others
    where = torch.sort((~chosen).to(torch.int8), dim=1, stable=True).indices[:, :n_query]
    valid = torch.arange(n_query, device=hidden.device)[None, :] < counts[:, None]
    query_in = hidden.gather(1, where[..., None].expand(n_rows, n_query, width))

    def split(x, n):
        return x.view(n_rows, n, heads, head_size).transpose(1, 2)

    dropout = getattr(attn, "dropout_prob", None)
    dropout = attn.dropout.p if dropout is None else dropout
    context = F.scaled_dot_product_attention(
        split(attn.query(query_in), n_query), split(attn.key(hidden), length), split(attn.value(hidden), length),
        attn_mask=additive_mask, dropout_p=dropout if layer.training else 0.0,
    )
    context = context.transpose(1, 2).reshape(n_rows, n_query, heads * head_size)
    attended = layer.attention.output(context, query_in)
    return layer.output(layer.intermediate(attended), attended)[valid]


class PretrainingModel(nn.Module):
    def __init__(self, mlm_model: nn.Module, next_sentence: bool = False):
        super().__init__()
        self.mlm_model = mlm_model
        self.nsp_head = NextSentenceHead(mlm_model.config.hidden_size) if next_sentence else None
        self._head_name = next(
            name for name, module in mlm_model.named_children() if module is find_mlm_head(mlm_model)
        )
        self._types = (getattr(mlm_model.config, "type_vocab_size", 0) or 0) > 1
        self._sparse = supports_sparse_top_layer(self.backbone)

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
        types = token_type_ids if self._types else None
        chosen = labels != IGNORE_INDEX
        targets = labels[chosen]
        if self._sparse and self.nsp_head is None:
            backbone = self.backbone
            mask = None if attention_mask is None else backbone.get_extended_attention_mask(attention_mask, input_ids.shape)
            hidden = backbone.embeddings(input_ids=input_ids, token_type_ids=types)
            layers = backbone.encoder.layer
            for layer in layers[:-1]:
                hidden = layer(hidden, attention_mask=mask)[0]
            selected = top_layer_at(layers[-1], hidden, mask, chosen)
        else:
            hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=types).last_hidden_state
            selected = hidden[chosen]
        loss, correct, n = masked_lm_sums(selected, targets, self.head)
        sums = ObjectiveSums(loss, correct, n)
        if self.nsp_head is not None and nsp_labels is not None:
            nsp_logits = self.nsp_head(hidden[:, 0])
            sums.nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels, reduction="sum")
            sums.nsp_correct = (nsp_logits.detach().argmax(-1) == nsp_labels).sum()
            sums.n_pairs = int(nsp_labels.numel())
        return sums
