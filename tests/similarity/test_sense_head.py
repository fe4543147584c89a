"""SenseHead.v3's module: tokens without pieces stay zero, and the cosine of two
outputs is the weighted mean of the word's and the sentence's cosines."""
import math

import torch

from spacy_mlm.models.senses import SenseHead


def test_cosine_is_a_weighted_mean_of_word_and_sentence_cosines():
    torch.manual_seed(0)
    head = SenseHead(width=8, n_states=3, init_scale=10.0)
    with torch.no_grad():
        head.context.fill_(math.log(2.0))  # sentence weight 2: (cos_a + 4 cos_b) / 5
        head.layer_logits.copy_(torch.tensor([0.0, 1.0, 2.0]))
    tokens, sentences = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    out = head(tokens, sentences)
    cos = torch.nn.functional.cosine_similarity
    mix = lambda x, logits: torch.einsum("s,nsw->nw", torch.softmax(logits, 0), x)  # noqa: E731
    word, sent = mix(tokens, head.layer_logits), mix(sentences, head.sentence_logits)
    expected = (cos(word[0], word[1], dim=0) + 4 * cos(sent[0], sent[1], dim=0)) / 5
    assert abs(float(cos(out[0], out[1], dim=0)) - float(expected)) < 1e-5


def test_tokens_without_pieces_stay_zero():
    head = SenseHead(width=4, n_states=2, init_scale=10.0)
    tokens, sentences = torch.randn(3, 2, 4), torch.randn(3, 2, 4)
    tokens[1] = 0.0
    out = head(tokens, sentences)
    assert out.shape == (3, 8) and float(out[1].abs().sum()) == 0.0 and float(out[0].abs().sum()) > 0
