import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.tagging.schemes import (
    convert_tags,
    first_invalid_position,
    is_valid_sequence,
    make_tag_labels,
    spans_to_tags,
    tags_to_spans,
    transition_constraints,
)

SPANS = [(0, 2, "PER"), (2, 3, "PER"), (5, 6, "LOC"), (6, 9, "ORG")]


def test_labels_per_scheme():
    assert make_tag_labels(["PER", "LOC"], "IO") == ["O", "I-LOC", "I-PER"]
    assert make_tag_labels(["PER", "LOC"], "BIO") == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert len(make_tag_labels(["PER", "LOC", "ORG"], "BIOES")) == 4 * 3 + 1
    assert make_tag_labels(["X"], "BILUO") == make_tag_labels(["X"], "BIOES")
    with pytest.raises(SpacyMlmError, match="Unknown tag scheme"):
        make_tag_labels(["X"], "BIOLU")


def test_hand_made_tags():
    assert spans_to_tags(10, SPANS, "BIO") == [
        "B-PER", "I-PER", "B-PER", "O", "O", "B-LOC", "B-ORG", "I-ORG", "I-ORG", "O"
    ]
    assert spans_to_tags(10, SPANS, "BIOES") == [
        "B-PER", "E-PER", "S-PER", "O", "O", "S-LOC", "B-ORG", "I-ORG", "E-ORG", "O"
    ]
    assert spans_to_tags(4, [(0, 2, "PER"), (2, 3, "PER")], "IO") == ["I-PER", "I-PER", "I-PER", "O"]
    assert spans_to_tags(10, SPANS, "IOB1") == [  # B only where an entity follows one of its type
        "I-PER", "I-PER", "B-PER", "O", "O", "I-LOC", "I-ORG", "I-ORG", "I-ORG", "O"
    ]


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES"])
def test_round_trip(scheme):
    tags = spans_to_tags(10, SPANS, scheme)
    assert is_valid_sequence(tags, scheme)
    assert tags_to_spans(tags) == SPANS
    for other in ("BIO", "IOB1", "BIOES"):
        assert convert_tags(convert_tags(tags, other), scheme) == tags


def test_io_merges_adjacent_same_type():
    assert tags_to_spans(spans_to_tags(10, SPANS, "IO")) == [(0, 3, "PER"), (5, 6, "LOC"), (6, 9, "ORG")]


def test_iob1_and_biluo_letters_are_read():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]
    assert tags_to_spans(iob1) == [(0, 2, "PER"), (2, 3, "PER"), (4, 5, "LOC")]
    assert convert_tags(iob1, "BIO") == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert tags_to_spans(["B-PER", "L-PER", "U-LOC"]) == [(0, 2, "PER"), (2, 3, "LOC")]


def test_lenient_reading_of_ill_formed_sequences():
    assert tags_to_spans(["O", "I-PER", "I-LOC", "E-LOC", "E-LOC"]) == [(1, 2, "PER"), (2, 4, "LOC"), (4, 5, "LOC")]


def test_first_invalid_position():
    assert first_invalid_position(["B-PER", "I-PER", "I-LOC"], "BIO") == 2
    assert first_invalid_position(["I-PER"], "BIO") == 0
    assert first_invalid_position(["I-PER"], "IO") is None
    assert first_invalid_position(["B-PER", "I-PER"], "BIOES") == 1  # left open
    assert first_invalid_position(["B-PER", "O"], "BIOES") == 1
    assert first_invalid_position(["S-PER"], "BIO") == 0  # not a BIO tag
    assert first_invalid_position(["I-PER", "B-PER", "O", "I-LOC"], "IOB1") is None
    assert first_invalid_position(["B-PER"], "IOB1") == 0  # B-X follows an entity of its type
    assert first_invalid_position(["I-PER", "B-LOC"], "IOB1") == 1


@pytest.mark.parametrize("scheme", ["IO", "BIO", "IOB1", "BIOES"])
def test_constraint_tables_agree_with_validity_on_every_short_sequence(scheme):
    labels = make_tag_labels(["A", "B"], scheme)
    allowed = transition_constraints(labels, scheme)
    for length in (1, 2, 3):
        for seq in itertools.product(range(len(labels)), repeat=length):
            by_table = (
                allowed["start"][seq[0]]
                and allowed["end"][seq[-1]]
                and all(allowed["transitions"][i, j] for i, j in zip(seq, seq[1:]))
            )
            assert by_table == is_valid_sequence([labels[i] for i in seq], scheme)


def test_some_constraints_by_hand():
    labels = make_tag_labels(["PER", "LOC"], "BIO")  # O B-LOC I-LOC B-PER I-PER
    allowed = transition_constraints(labels, "BIO")
    assert not allowed["start"][2] and allowed["start"][1]
    assert allowed["transitions"][1, 2] and not allowed["transitions"][1, 4] and not allowed["transitions"][0, 4]


def test_spans_must_fit_and_not_overlap():
    with pytest.raises(SpacyMlmError, match="overlaps"):
        spans_to_tags(5, [(0, 2, "A"), (1, 3, "B")], "BIO")
    with pytest.raises(SpacyMlmError, match="outside"):
        spans_to_tags(2, [(1, 3, "A")], "BIO")


@st.composite
def span_sets(draw):
    n = draw(st.integers(0, 12))
    spans, i = [], 0
    while i < n:
        if draw(st.booleans()):
            length = draw(st.integers(1, n - i))
            spans.append((i, i + length, draw(st.sampled_from(["A", "B", "C"]))))
            i += length
        else:
            i += 1
    return n, spans


@settings(max_examples=200, deadline=None)
@given(span_sets(), st.sampled_from(["BIO", "IOB1", "BIOES"]))
def test_any_spans_round_trip(case, scheme):
    n, spans = case
    tags = spans_to_tags(n, spans, scheme)
    assert is_valid_sequence(tags, scheme)
    assert tags_to_spans(tags) == spans
