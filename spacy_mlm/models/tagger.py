"""The token-tagging head: a torch module over the encoder's vectors.

`TaggerHead` owns the emission scores (a linear layer, one row of tag scores
per token or per subword row) and, for the CRF variant, the start /
transition / end scores; the sequence maths that uses them (losses, Viterbi,
marginals) is pure (`spacy_mlm.tagging`). The thinc model
`spacy_mlm.TokenTagger.v3` runs the listener, then the head on the same
device (`models/torch_head.py`, the seam every torch head shares), and hands
the component one `TagScores` per batch; in training the component's loss
gives the gradient for its scores (`loss_and_gradient`), which the backprop
callback pushes through the head and the listener into the encoder.
"""
from typing import List, Optional, Tuple

import torch
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from ..tagging.emissions import TagScores
from ..util.settings import FLAG, INT, NUMBER, check_settings, optional
from .initialization import init_output_layer
from .listener import PieceRows, initialized_width
from .torch_head import build_torch_head, torch_module


class TaggerHead(torch.nn.Module):
    def __init__(self, width: int, n_tags: int, crf: bool, init_std: float):
        super().__init__()
        self.output = torch.nn.Linear(width, n_tags)
        init_output_layer(self.output, init_std)
        self.crf = crf
        if crf:
            # a CRF that starts out as the softmax tagger and learns the moves that help
            self.start = torch.nn.Parameter(torch.zeros(n_tags))
            self.transitions = torch.nn.Parameter(torch.zeros(n_tags, n_tags))  # [i, j]: tag j after tag i
            self.end = torch.nn.Parameter(torch.zeros(n_tags))

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        return self.output(vectors)

    def transition_scores(self) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(start, transitions, end): the CRF's learned scores, zeros for the softmax."""
        if self.crf:
            return self.start, self.transitions, self.end
        weight = self.output.weight
        n = weight.shape[0]
        return weight.new_zeros(n), weight.new_zeros((n, n)), weight.new_zeros(n)


@registry.architectures("spacy_mlm.TokenTagger.v3")
def build_token_tagger_v3(
    tok2vec: Model[List[Doc], List[Floats2d]], nO: Optional[int] = None, crf: bool = False, init_std: float = 0.02
) -> Model[List[Doc], TagScores]:
    """Tag scores per doc from `tok2vec`: `spacy_mlm.EncoderListener.v1` (one row
    per token) or `spacy_mlm.EncoderPieceListener.v1` (one row per subword,
    grouped by token). `nO` (the number of tags) is set by the component from
    its labels. `crf = true` adds a linear-chain CRF over the token scores
    (likelihood training, Viterbi decoding). `init_std`: the output weights
    start as Normal(0, init_std), as in Hugging Face's token-classification head."""
    check_settings("spacy_mlm.TokenTagger.v3", nO=(nO, optional(INT), ">= 1"), crf=(crf, FLAG),
                   init_std=(init_std, NUMBER, ">= 0"))
    return build_torch_head("token_tagger", TaggerHead, tok2vec=tok2vec, read=_read_rows, wrap=_tag_scores,
                            init=_tagger_init, dims={"nO": nO, "nI": None}, attrs={"crf": crf, "init_std": init_std})


def tagger_head(model: Model) -> TaggerHead:
    return torch_module(model)


def _tagger_init(model: Model, X=None, Y=None):
    model.set_dim("nI", initialized_width(model.get_ref("tok2vec"), "tagger"), force=True)
    model.shims[0].build(
        width=model.get_dim("nI"), n_tags=model.get_dim("nO"), crf=model.attrs["crf"], init_std=model.attrs["init_std"]
    )
    return model


def _read_rows(model: Model, X: List, rows: List[torch.Tensor]):
    """Every row of every doc (token or subword rows) in one tensor."""
    if not rows:
        return (torch.zeros((0, model.get_dim("nI")), device=tagger_head(model).output.weight.device),), {}
    return (torch.cat(rows),), {}


def _tag_scores(model: Model, scores: torch.Tensor, X: List) -> TagScores:
    pieces = bool(X) and isinstance(X[0], PieceRows)
    rows_per_doc = [len(x.rows) if pieces else len(x) for x in X]
    return TagScores(scores, rows_per_doc, [x.pieces_per_token for x in X] if pieces else None)
