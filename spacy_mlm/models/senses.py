"""The sense head: a torch module that maps the encoder's per-layer token
vectors to a space where cosine means "same sense in context".

For a token with per-layer vectors x_0 (the embedding layer) ... x_L and its
sentence's per-layer mean vectors y_0 ... y_L it returns

    [ norm((1 + s) * v_a(x)),  exp(g) * norm((1 + r) * v_b(y)) ],
    v_a(x) = sum_k softmax(a)_k x_k - b * x_0  (v_b likewise, its own logits and b)

with learned layer logits (which layers carry word sense differs by model:
the middle ones beat the top one on WiC for MiniLM), b (how much of the
word's context-free embedding to take out, as the remove_static transform
does: two occurrences of a word share it whatever their senses), g (how much
the sentence decides the sense: with a small encoder the word's own vector
holds little of its context) and per-dimension scales s, r. All start at zero
(a uniform layer mix, nothing removed, no rescaling) and the optimizer's
weight decay pulls them back there, so training moves away from the plain
layer mix only as far as the pairs ask.

Why a diagonal scale and not a full width x width projection: on WiC train
pairs split by target word (the dev words are mostly unseen in train), a full
projection (147k weights for MiniLM) fitted the seen words and lost on the
unseen ones, below the untrained mix with the sentence, where a head of a few
hundred weights gained (docs/similarity.md has the figures).

The map is linear, so a span's vector (the mean of its tokens') is the map of
the mean, and tokens without pieces stay zero. The learned scale and bias of
the pair loss (`spacy_mlm.similarity.losses`) live here too, so they are
trained and saved with the head.

Word and sentence side by side, each normalized, rather than summed (the
first round's head): it held out more on the same by-word split of WiC train,
over three seeds (docs/similarity.md).

`spacy_mlm.SenseHead.v3` wraps it for thinc (`models/torch_head.py`, the seam
every torch head shares): it reads the encoder through its listener,
`spacy_mlm.EncoderLayersListener.v1` with every hidden state, as every head
does, and outputs the vectors of all the Docs' tokens in one tensor, in order.
A token's sentence is its Doc, or its side of a pair Doc (which the encoder
reads apart, `pairs = "apart"`). In training the component's loss gives their
gradient, which backprop pushes through the head (the encoder stays frozen).
"""
import math
from typing import List

import torch
from spacy.util import registry
from thinc.api import Model

from spacy.tokens import Doc

from ..errors import SettingError, SpacyMlmError
from ..util.settings import NUMBER, check_settings
from .listener import ALL_STATES, EncoderListener, LayerRows
from .torch_head import build_torch_head, torch_module


class SenseHead(torch.nn.Module):
    """The word and its sentence side by side instead of summed:

        [ norm((1 + s) * v_a(x)),  exp(g) * norm((1 + r) * v_b(y)) ]

    with v_a, v_b as in the module docstring (each its own layer mix and share
    of the embedding layer taken out) and a learned weight exp(g) of the
    sentence part. The cosine of two such vectors is a weighted mean of the
    word's cosine and the sentence's, (cos_a + e^{2g} cos_b) / (1 + e^{2g}), so
    neither side's length can drown the other (in a sum a long sentence vector
    does). Tokens without pieces stay zero."""

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


def sentence_states(tokens: torch.Tensor, parts: List[int]) -> torch.Tensor:
    """(n_tokens, n_states, width): for each token, the per-layer mean over the
    tokens with pieces of its sentence (a Doc, or one side of a pair Doc)."""
    sentences = []
    for rows in torch.split(tokens, parts):
        present = rows[:, -1].abs().sum(dim=-1) > 0
        mean = rows[present].mean(dim=0) if bool(present.any()) else rows.new_zeros(rows.shape[1:])
        sentences.append(mean.expand_as(rows))
    return torch.cat(sentences) if sentences else tokens


@registry.architectures("spacy_mlm.SenseHead.v3")
def build_sense_head_v3(tok2vec: Model, init_scale: float = 10.0) -> Model[List[Doc], torch.Tensor]:
    """Sense vectors (n_tokens, 2 * width) of the Docs' tokens, in order, in one
    tensor: the word's normalized layer mix beside its sentence's, with a
    learned weight (`SenseHead`).

    tok2vec: `spacy_mlm.EncoderLayersListener.v1` with layers = null (every
        hidden state; its pooling is how a token's pieces become one vector per
        layer), listening to a frozen encoder with output_hidden_states = true
        and pairs = "apart".
    init_scale: the starting scale of the pair loss's logits (scale * cosine + bias)."""
    check_settings("spacy_mlm.SenseHead", init_scale=(init_scale, NUMBER, "> 0"))
    if not isinstance(tok2vec, EncoderListener) or tok2vec.attrs["layers"] != ALL_STATES:
        raise SettingError(
            "the sense head mixes every hidden state: its tok2vec is spacy_mlm.EncoderLayersListener.v1 with "
            f"layers = null, not {getattr(tok2vec, 'name', tok2vec)!r} with layers = {tok2vec.attrs.get('layers')!r}"
        )
    return build_torch_head("mlm_sense_head", SenseHead, tok2vec=tok2vec, read=_read_layer_rows, init=_init,
                            dims={"nO": None}, attrs={"init_scale": float(init_scale)})


def sense_head(model: Model) -> SenseHead:
    return torch_module(model)


def _init(model: Model, X=None, Y=None):
    """Sizes from the listener: the encoder's width and number of hidden states,
    which it takes when the encoder loads."""
    listener = model.get_ref("tok2vec")
    if not listener.has_dim("nO") or listener.n_states is None:
        raise SpacyMlmError("the sense head is sized from its encoder: initialize (or load) the encoder first")
    width = listener.get_dim("nO")
    model.set_dim("nO", 2 * width, force=True)
    model.shims[0].build(width=width, n_states=listener.n_states, init_scale=model.attrs["init_scale"])
    return model


def _read_layer_rows(model: Model, X: List[LayerRows], rows: List[torch.Tensor]):
    """Every token's per-layer vectors and its sentence's, of all the Docs, on the head's device."""
    head = sense_head(model)
    if not X:
        empty = torch.zeros((0, len(head.layer_logits), len(head.scale)), device=head.layer_logits.device)
        return (empty, empty), {}
    tokens = torch.cat(rows).to(head.layer_logits.device)
    parts = [n for x in X for n in x.parts]
    return (tokens, sentence_states(tokens, parts)), {}
