"""The sense head: a torch module that maps the encoder's per-layer token
vectors to a space where cosine means "same sense in context".

For a token with per-layer vectors x_0 (the embedding layer) ... x_L and its
sentence's per-layer mean vectors y_0 ... y_L it returns

    (1 + s) * (v(x) + c * v(y)),   v(x) = sum_k softmax(a)_k x_k - b * x_0

with learned layer logits a (which layers carry word sense differs by model:
the middle ones beat the top one on WiC for MiniLM), b (how much of the
word's context-free embedding to take out, as the remove_static transform
does: two occurrences of a word share it whatever their senses), c (how much
the sentence decides the sense: with a small encoder the word's own vector
holds little of its context) and a per-dimension scale s. All start at zero
(a uniform layer mix, nothing removed, no sentence, no rescaling) and the
optimizer's weight decay pulls them back there, so training moves away from
the plain layer mix only as far as the pairs ask.

Why a diagonal scale and not a full width x width projection: on WiC train
pairs split by target word (the dev words are mostly unseen in train), a full
projection (147k weights for MiniLM) fitted the seen words and lost on the
unseen ones (0.55-0.58 accuracy, below the untrained mix with the sentence),
where this head (about 400 weights) gained (0.60-0.62); docs/similarity.md.

The map is linear, so a span's vector (the mean of its tokens') is the map of
the mean, and tokens without pieces stay zero. The learned scale and bias of
the pair loss (`spacy_mlm.similarity.losses`) live here too, so they are
trained and saved with the head.

`spacy_mlm.SenseHead.v2` (`SenseHeadV2`, the default since issue 19's second
round) keeps the word and the sentence apart, side by side, each normalized,
instead of summing them: on the same by-word split of WiC train (three
seeds) it held out 0.652 against 0.639 for v1 (docs/similarity.md).

`spacy_mlm.SenseHead.v1` / `.v2` wrap them for thinc (`models/torch_head.py`,
the seam every torch head shares): input one `DocEncoding` per sentence (built
with every layer's output), output the (n_tokens, width) vectors of all their
tokens in one tensor, in order. In training the component's loss gives their
gradient, which backprop pushes through the head (the encoder stays frozen).
"""
import math
from typing import List, Optional

import torch
from spacy.util import registry
from thinc.api import Model

from ..errors import SpacyMlmError
from ..util.settings import FLAG, NUMBER, check_settings
from .encoding import DocEncoding
from .pooling import TOKEN_POOLINGS, pool_tokens
from .torch_head import build_torch_head, torch_module


class SenseHead(torch.nn.Module):
    def __init__(self, width: int, n_states: int, context: bool, init_scale: float):
        super().__init__()
        self.layer_logits = torch.nn.Parameter(torch.zeros(n_states))
        self.static = torch.nn.Parameter(torch.tensor(0.0))
        self.context = torch.nn.Parameter(torch.tensor(0.0)) if context else None
        self.scale = torch.nn.Parameter(torch.zeros(width))
        self.log_scale = torch.nn.Parameter(torch.tensor(math.log(init_scale)))
        self.bias = torch.nn.Parameter(torch.tensor(0.0))

    def layer_weights(self) -> torch.Tensor:
        return torch.softmax(self.layer_logits, dim=0)

    def _mix(self, states: torch.Tensor) -> torch.Tensor:
        return torch.einsum("s,nsw->nw", self.layer_weights(), states) - self.static * states[:, 0]

    def forward(self, tokens: torch.Tensor, sentences: torch.Tensor) -> torch.Tensor:
        """tokens, sentences: (n, n_states, width) per-layer vectors of each
        token and of its sentence; returns (n, width)."""
        out = self._mix(tokens)
        if self.context is not None:
            out = out + self.context * self._mix(sentences)
        return out * (1.0 + self.scale)


class SenseHeadV2(torch.nn.Module):
    """The word and its sentence side by side instead of summed:

        [ norm((1 + s) * v_a(x)),  exp(g) * norm((1 + r) * v_b(y)) ]

    with v_a, v_b as in `SenseHead` (each its own layer mix and share of the
    embedding layer taken out) and a learned weight exp(g) of the sentence
    part. The cosine of two such vectors is a weighted mean of the word's
    cosine and the sentence's, (cos_a + e^{2g} cos_b) / (1 + e^{2g}), so
    neither side's length can drown the other (in the sum of `SenseHead` a
    long sentence vector does). Tokens without pieces stay zero."""

    def __init__(self, width: int, n_states: int, init_scale: float):
        super().__init__()
        self.layer_logits = torch.nn.Parameter(torch.zeros(n_states))
        self.sentence_logits = torch.nn.Parameter(torch.zeros(n_states))
        self.static = torch.nn.Parameter(torch.tensor(0.0))
        self.sentence_static = torch.nn.Parameter(torch.tensor(0.0))
        self.context = torch.nn.Parameter(torch.tensor(0.0))  # log of the sentence part's weight
        self.scale = torch.nn.Parameter(torch.zeros(width))
        self.sentence_scale = torch.nn.Parameter(torch.zeros(width))
        self.log_scale = torch.nn.Parameter(torch.tensor(math.log(init_scale)))
        self.bias = torch.nn.Parameter(torch.tensor(0.0))

    def layer_weights(self) -> torch.Tensor:
        return torch.softmax(self.layer_logits, dim=0)

    def forward(self, tokens: torch.Tensor, sentences: torch.Tensor) -> torch.Tensor:
        word = torch.einsum("s,nsw->nw", self.layer_weights(), tokens) - self.static * tokens[:, 0]
        sent = torch.einsum("s,nsw->nw", torch.softmax(self.sentence_logits, 0), sentences) - self.sentence_static * sentences[:, 0]
        word = torch.nn.functional.normalize(word * (1.0 + self.scale), dim=-1)
        sent = torch.nn.functional.normalize(sent * (1.0 + self.sentence_scale), dim=-1)
        present = (tokens[:, -1].abs().sum(dim=-1) > 0).to(word.dtype).unsqueeze(-1)
        return torch.cat([word, self.context.exp() * sent], dim=-1) * present


def layer_stacks(encoding: DocEncoding, pooling: str):
    """(n_tokens, n_states, width) per-layer token vectors of one doc and the
    (n_tokens, n_states, width) per-layer mean over its tokens with pieces
    (the sentence), as ordinary tensors (an encoder's inference tensors cannot
    be saved for backward)."""
    layers = encoding.layers_tensor
    if layers is None:
        raise SpacyMlmError(
            "the sense head mixes the encoder's layers: build the mlm_encoder model with output_hidden_states = true"
        )
    tokens = torch.stack([pool_tokens(layers[k], encoding.alignment, pooling) for k in range(len(layers))], dim=1).clone()
    present = tokens[:, -1].abs().sum(dim=-1) > 0
    sentence = tokens[present].mean(dim=0) if bool(present.any()) else tokens.new_zeros(tokens.shape[1:])
    return tokens, sentence.expand_as(tokens)


@registry.architectures("spacy_mlm.SenseHead.v1")
def build_sense_head_v1(pooling: str = "mean", context: bool = True, init_scale: float = 10.0) -> Model[List[DocEncoding], List[torch.Tensor]]:
    """Sense vectors (n_tokens, width) per Doc from its `doc._.mlm_encoding`.

    pooling: how a token's pieces become one vector (per layer): mean | first | last | max.
    context: add the sentence's (learned weight) to each token's vector (see the module docstring).
    init_scale: the starting scale of the pair loss's logits (scale * cosine + bias)."""
    check_settings("spacy_mlm.SenseHead.v1", context=(context, FLAG))
    return _sense_head_model(SenseHead, pooling, init_scale, context=bool(context))


@registry.architectures("spacy_mlm.SenseHead.v2")
def build_sense_head_v2(pooling: str = "mean", init_scale: float = 10.0) -> Model[List[DocEncoding], List[torch.Tensor]]:
    """Sense vectors (n_tokens, 2 * width) per Doc: the target word's normalized
    layer mix beside its sentence's, with a learned weight (`SenseHeadV2`).

    pooling: how a token's pieces become one vector (per layer): mean | first | last | max.
    init_scale: the starting scale of the pair loss's logits (scale * cosine + bias)."""
    return _sense_head_model(SenseHeadV2, pooling, init_scale, version=2)


def _sense_head_model(module: type, pooling: str, init_scale: float, **attrs) -> Model:
    if pooling not in TOKEN_POOLINGS:
        raise SpacyMlmError(f"unknown pooling {pooling!r}: expected one of {', '.join(TOKEN_POOLINGS)}")
    check_settings("spacy_mlm.SenseHead", init_scale=(init_scale, NUMBER, "> 0"))
    return build_torch_head("mlm_sense_head", module, read=_read_layer_stacks, init=_init, dims={"nO": None},
                            attrs={"pooling": pooling, "init_scale": float(init_scale), **attrs})


def sense_head(model: Model) -> SenseHead:
    return torch_module(model)


def _init(model: Model, X: Optional[List[DocEncoding]] = None, Y=None):
    """Sizes from a sample encoding: its width and number of hidden states."""
    if not X:
        raise SpacyMlmError("the sense head is initialized from sample encodings (to read the encoder's width and layers)")
    tokens, _ = layer_stacks(X[0], model.attrs["pooling"])
    width = int(tokens.shape[-1])
    if model.attrs.get("version", 1) == 2:
        model.set_dim("nO", 2 * width, force=True)
        model.shims[0].build(width=width, n_states=int(tokens.shape[1]), init_scale=model.attrs["init_scale"])
    else:
        model.set_dim("nO", width, force=True)
        model.shims[0].build(width=width, n_states=int(tokens.shape[1]),
                             context=model.attrs["context"], init_scale=model.attrs["init_scale"])
    return model


def _read_layer_stacks(model: Model, encodings: List[DocEncoding], rows: None):
    """Every token's per-layer vectors and its sentence's, of all the encodings, on the head's device."""
    head = sense_head(model)
    stacks = [layer_stacks(e, model.attrs["pooling"]) for e in encodings]
    if not stacks:
        empty = torch.zeros((0, len(head.layer_logits), len(head.scale)), device=head.layer_logits.device)
        return (empty, empty), {}
    device = head.layer_logits.device
    return (torch.cat([t for t, _ in stacks]).to(device), torch.cat([s for _, s in stacks]).to(device)), {}
