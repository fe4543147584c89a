"""Sentence pairs end to end: segment ids reach the transformer in prediction and
training, batches of pairs give what one pair at a time gives, and symmetric
scoring averages both orders."""
import pytest
import spacy
from spacy.training import Example
from thinc.api import Adam
from transformers import AutoTokenizer

import spacy_mlm
from spacy_mlm.models.attention import plain_attention
from spacy_mlm.models.window_packing import packing_verified

LABELS = ["entailment", "neutral", "contradiction"]
PAIRS = [
    ("The cat sleeps on the warm stone wall.", "A cat is resting."),
    ("A man is playing a guitar on the stage.", "Nobody is playing any music tonight."),
    ("Children play football in the park every Saturday.", "Kids play."),
    ("It rains.", "The river bank was muddy after the rain in the town of Concord."),
    ("Prices rose sharply in the second quarter.", "Prices fell."),
]


@pytest.fixture(scope="module")
def pair_nlp(tiny_model_dir):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.add_pipe("mlm_textcat", config={"model": {"tok2vec": {"pooling": "cls"}}})
    nlp.initialize(lambda: examples(nlp))
    return nlp


def examples(nlp):
    return [Example.from_dict(spacy_mlm.make_pair_doc(nlp, a, b), {"cats": {l: float(l == LABELS[i % 3]) for l in LABELS}})
            for i, (a, b) in enumerate(PAIRS)]


class TypeIdsSeen:
    """Records the token_type_ids (and input ids) of every forward pass."""

    def __init__(self, hf_model):
        self.calls = []
        self.handle = hf_model.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        self.calls.append((kwargs["input_ids"].clone(), kwargs.get("token_type_ids"), kwargs["attention_mask"].clone()))

    def rows(self):
        """(input ids, type ids) of each window: a row's real positions, or in a
        packed training pass (a 3-d mask) each diagonal block of a row."""
        for ids, types, mask in self.calls:
            for row in range(len(ids)):
                if mask.dim() == 2:
                    blocks = [(0, int(mask[row].sum()))]
                else:  # a window's positions attend to exactly its own positions
                    starts = [i for i in range(mask.shape[1]) if mask[row, i, i] and (i == 0 or not mask[row, i, i - 1])]
                    blocks = [(s, s + int(mask[row, s].sum())) for s in starts]
                for start, end in blocks:
                    yield ids[row, start:end].tolist(), None if types is None else types[row, start:end].tolist()


def test_segment_ids_of_pairs_reach_the_model(pair_nlp, tiny_model_dir):
    hf_model = spacy_mlm.get_hf_model(pair_nlp.get_pipe("mlm_encoder").model)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    expected = {tuple(enc["input_ids"]): enc["token_type_ids"] for enc in (tokenizer(a, b) for a, b in PAIRS)}
    with plain_attention(hf_model):  # its probe, run once per model at the first training pass, is not recorded
        pass
    assert packing_verified(hf_model)  # likewise window packing's: the training pass packs the pairs
    seen = TypeIdsSeen(hf_model)
    try:
        list(pair_nlp.pipe(spacy_mlm.make_pair_doc(pair_nlp, a, b) for a, b in PAIRS))  # prediction
        pair_nlp.update(examples(pair_nlp), sgd=Adam(1e-5))  # training
    finally:
        seen.handle.remove()
    rows = list(seen.rows())
    assert len(rows) == 2 * len(PAIRS)
    for ids, types in rows:
        assert types == expected[tuple(ids)]
        sep = ids.index(tokenizer.sep_token_id)
        assert set(types[: sep + 1]) == {0} and set(types[sep + 1 :]) == {1}  # side B (and its [SEP]) is segment 1


def test_single_texts_have_segment_zero(pair_nlp):
    seen = TypeIdsSeen(spacy_mlm.get_hf_model(pair_nlp.get_pipe("mlm_encoder").model))
    try:
        pair_nlp(PAIRS[0][0])
    finally:
        seen.handle.remove()
    ((_, types),) = list(seen.rows())
    assert set(types) == {0}


def test_batched_pairs_equal_one_by_one(pair_nlp):
    one_by_one = [spacy_mlm.classify_pair(pair_nlp, a, b) for a, b in PAIRS]
    for batch_size in (2, 64):
        batched = spacy_mlm.classify_pairs(pair_nlp, PAIRS, batch_size=batch_size)
        for got, want in zip(batched, one_by_one, strict=True):
            assert got == pytest.approx(want, abs=1e-5)
    # the same through nlp.pipe over pair Docs, streamed from a generator
    docs = pair_nlp.pipe((spacy_mlm.make_pair_doc(pair_nlp, a, b) for a, b in PAIRS), batch_size=3)
    for doc, want in zip(docs, one_by_one, strict=True):
        assert dict(doc.cats) == pytest.approx(want, abs=1e-5)


def test_symmetric_scoring_averages_both_orders(pair_nlp):
    forward = spacy_mlm.classify_pairs(pair_nlp, PAIRS)
    backward = spacy_mlm.classify_pairs(pair_nlp, [(b, a) for a, b in PAIRS])
    assert any(f != pytest.approx(b, abs=1e-4) for f, b in zip(forward, backward))  # the order matters to the model
    both = spacy_mlm.classify_pairs(pair_nlp, iter(PAIRS), batch_size=3, symmetric=True)
    assert len(both) == len(PAIRS)
    for got, f, b in zip(both, forward, backward):
        assert got == pytest.approx({label: (f[label] + b[label]) / 2 for label in f}, abs=1e-5)
        assert sum(got.values()) == pytest.approx(1.0, abs=1e-5)
