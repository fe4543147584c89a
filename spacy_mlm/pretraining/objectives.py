"""The pretraining objectives on top of a Hugging Face `*ForMaskedLM` model.

The model's own MLM head (BERT: dense + gelu + LayerNorm, then a decoder whose
weight is the input embedding matrix, plus a bias; DistilBERT's four children,
ModernBERT's head and decoder: whatever the family has, found and checked by
`families.mlm_head_names`) is kept, tied as the family ties it, so saved weights
keep Hugging Face's key names. What changes is where it runs: only on the hidden
states of the chosen positions (about 15%), never on the full (batch, length,
vocab) logits tensor, which on CPU costs more than the encoder itself. For the
same reason the last transformer layer (BERT/RoBERTa-style) is evaluated only
for the chosen positions: its keys and values still come from every position, so
the result is the full layer's, at about 15% of its cost.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..models.families import mlm_head_names, run_head, segment_inputs
from .masking import IGNORE_INDEX


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
    distributed, accumulated) batch, so every split gives the same gradient.
    The rtd_* sums are the replaced-token-detection discriminator's, over every
    non-padding position (`rtd.py`); `mlm_logits` (detached) are the head's
    logits at the chosen positions in row-major order, what its generator samples from."""

    mlm_loss: torch.Tensor
    mlm_correct: torch.Tensor
    n_predicted: int
    nsp_loss: Optional[torch.Tensor] = None
    nsp_correct: Optional[torch.Tensor] = None
    n_pairs: int = 0
    rtd_loss: Optional[torch.Tensor] = None
    rtd_correct: Optional[torch.Tensor] = None
    rtd_replaced: Optional[torch.Tensor] = None
    mlm_logits: Optional[torch.Tensor] = None

    def stacked(self) -> torch.Tensor:
        """The summed statistics in the order of SUMMED (0 for an objective not
        run) as one float32 tensor where the model runs: the loop adds steps up
        there and reads them once per log line, since reading a GPU number
        waits for the GPU and leaves it idle while the next batch is prepared."""
        zero = self.mlm_loss.new_zeros(())
        return torch.stack([zero if getattr(self, name) is None else getattr(self, name).detach().float()
                            for name in SUMMED])


# what the loop adds up over micro-batches and processes
SUMMED = ("mlm_loss", "mlm_correct", "nsp_loss", "nsp_correct", "rtd_loss", "rtd_correct", "rtd_replaced")


def metrics(totals: Sequence[float], n_predicted: int, n_pairs: int, n_positions: int, nsp: bool, rtd: bool,
            prefix: str = "") -> Dict[str, float]:
    """The logged means of SUMMED totals: masked-LM loss and accuracy per chosen
    position, NSP per pair, replaced-token detection (loss, accuracy, share of
    positions replaced) per non-padding position."""
    sums = {name: float(total) for name, total in zip(SUMMED, totals)}  # plain floats: the history is checkpointed
    row = {f"{prefix}loss": sums["mlm_loss"] / max(n_predicted, 1),
           f"{prefix}accuracy": sums["mlm_correct"] / max(n_predicted, 1)}
    if nsp:
        row.update({f"{prefix}nsp_loss": sums["nsp_loss"] / n_pairs, f"{prefix}nsp_accuracy": sums["nsp_correct"] / n_pairs})
    if rtd:
        row.update({f"{prefix}rtd_loss": sums["rtd_loss"] / n_positions,
                    f"{prefix}rtd_accuracy": sums["rtd_correct"] / n_positions,
                    f"{prefix}replaced": sums["rtd_replaced"] / n_positions})
    return row


def masked_lm_sums(logits: torch.Tensor, targets: torch.Tensor):
    """(summed NLL, number correct, number predicted) of the head's logits at
    the chosen positions only (`logits`: (n, vocab))."""
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
    """Masked-LM (optionally with NSP) on a `*ForMaskedLM` model; also the
    generator inside replaced-token detection (`rtd.ReplacedTokenDetection`)."""

    def __init__(self, mlm_model: nn.Module, next_sentence: bool = False):
        super().__init__()
        self.mlm_model = mlm_model
        self.nsp_head = NextSentenceHead(mlm_model.config.hidden_size) if next_sentence else None
        # the family's own head, as its children run (refused now, not at the first step, if not a chain)
        self.head_names = mlm_head_names(mlm_model)
        self._sparse = supports_sparse_top_layer(self.backbone)

    @property
    def backbone(self) -> nn.Module:
        return getattr(self.mlm_model, self.mlm_model.base_model_prefix)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits of the model's own MLM head over (n, width) hidden states."""
        return run_head(self.mlm_model, self.head_names, hidden)

    def sampling_noise(self, shape: Tuple[int, int], rng: np.random.Generator) -> None:
        """Masked-LM draws nothing beyond the masks (see `rtd.ReplacedTokenDetection`)."""
        return None

    def objective_state(self) -> Dict[str, Optional[Dict[str, torch.Tensor]]]:
        """What a checkpoint needs beyond the saved HF model to resume."""
        return {"nsp_head": None if self.nsp_head is None else self.nsp_head.state_dict()}

    def load_objective_state(self, state: Dict[str, object]) -> None:
        if self.nsp_head is not None:
            self.nsp_head.load_state_dict(state["nsp_head"])

    def prepare_output(self) -> None:
        """Nothing to fold before the final save (see `rtd.ReplacedTokenDetection`)."""

    def output_files(self) -> List[Tuple[str, Dict[str, torch.Tensor]]]:
        """(file name, tensors) saved beside the final model: the NSP head when there is one."""
        return [] if self.nsp_head is None else [("nsp_head.safetensors", self.nsp_head.state_dict())]

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        nsp_labels: Optional[torch.Tensor] = None,
    ) -> ObjectiveSums:
        segments = segment_inputs(self.mlm_model, token_type_ids)
        chosen = labels != IGNORE_INDEX
        targets = labels[chosen]
        if self._sparse and self.nsp_head is None:
            backbone = self.backbone
            mask = None if attention_mask is None else backbone.get_extended_attention_mask(attention_mask, input_ids.shape)
            hidden = backbone.embeddings(input_ids=input_ids, **segments)
            if getattr(backbone, "embeddings_project", None) is not None:  # ELECTRA: embedding width -> hidden width
                hidden = backbone.embeddings_project(hidden)
            layers = backbone.encoder.layer
            for layer in layers[:-1]:
                hidden = layer(hidden, attention_mask=mask)[0]
            selected = top_layer_at(layers[-1], hidden, mask, chosen)
        else:
            hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, **segments).last_hidden_state
            selected = hidden[chosen]
        logits = self.head(selected)
        loss, correct, n = masked_lm_sums(logits, targets)
        sums = ObjectiveSums(loss, correct, n, mlm_logits=logits.detach())
        if self.nsp_head is not None and nsp_labels is not None:
            nsp_logits = self.nsp_head(hidden[:, 0])
            sums.nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels, reduction="sum")
            sums.nsp_correct = (nsp_logits.detach().argmax(-1) == nsp_labels).sum()
            sums.n_pairs = int(nsp_labels.numel())
        return sums
