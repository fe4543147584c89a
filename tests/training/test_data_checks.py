"""debug-data's checks on hand-made examples with known problems, and the
command on a shipped config."""
from collections import Counter

import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from typer.testing import CliRunner

from spacy_mlm.tokenization.pair import make_pair_doc
from spacy_mlm.training.data_checks import (
    PieceLimits, check_messages, entity_problems, label_table, piece_limits, split_stats, uncovered_spans,
)


@pytest.fixture(scope="module")
def pieces(encoder_nlp):
    return encoder_nlp.get_pipe("mlm_encoder").model.attrs["tokenizer"]


def ner_example(nlp, text, words, ents, predicted_words=None):
    """Gold `words` of `text` with entities; the pipeline's Doc has `predicted_words`."""
    reference = Doc(nlp.vocab, words=words, spaces=spaces_of(text, words))
    reference.ents = [Span(reference, s, e, label=label) for s, e, label in ents]
    predicted_words = predicted_words or words
    predicted = Doc(nlp.vocab, words=predicted_words, spaces=spaces_of(text, predicted_words))
    assert reference.text == predicted.text == text
    return Example(predicted, reference)


def spaces_of(text, words):
    spaces, at = [], 0
    for word in words:
        at = text.index(word, at) + len(word)
        spaces.append(text[at:at + 1] == " ")
    return spaces


def test_entity_off_token_boundaries_and_adjacent_entities_in_io(encoder_nlp):
    nlp = encoder_nlp
    # the pipeline's tokenizer keeps "U.S.-based" whole: the gold entity "U.S." ends inside a token
    eg = ner_example(nlp, "U.S.-based Anna Berg", ["U.S.", "-based", "Anna", "Berg"],
                     [(0, 1, "LOC"), (2, 3, "PER"), (3, 4, "PER")],
                     predicted_words=["U.S.-based", "Anna", "Berg"])
    misaligned, merged = entity_problems(eg.reference, eg.predicted, "IO")
    assert misaligned == ["'U.S.' (LOC)"] and merged == 1
    assert entity_problems(eg.reference, eg.predicted, "BIO")[1] == 0


def test_uncovered_spans():
    starts, ends = [0, 5], [4, 9]
    assert uncovered_spans(starts, ends, [(0, 4, "a"), (4, 5, "gap"), (8, 12, "b")]) == ["gap"]


def test_split_stats_counts_pieces_windows_unknowns_and_pairs(encoder_nlp, pieces):
    nlp = encoder_nlp
    limits = piece_limits(pieces)
    assert limits == PieceLimits(pieces.content_length, pieces.max_length, 3)
    long_text = " ".join(["the pond"] * 40)  # 80 pieces > one 62-piece window
    single = [Example(nlp.make_doc(t), nlp.make_doc(t)) for t in ("zzqx Oslo", long_text)]
    single[0].reference.cats = {"A": 1.0, "B": 0.0}
    stats = split_stats("train", single, pieces.hf, limits)
    assert (stats.n_docs, stats.n_pieces, stats.n_unknown) == (2, 82, 1)
    assert (stats.long_docs, stats.longest, stats.n_pairs) == (1, 80, 0)
    assert stats.cat_labels == Counter({"A": 1})
    pair = make_pair_doc(nlp, "The pond lies in a quiet wood.", long_text)
    stats = split_stats("dev", [Example(pair, pair.copy())], pieces.hf, limits)
    assert stats.side_a == [8] and stats.side_b == [80] and stats.truncated_pairs == 1 and stats.long_docs == 0


def test_entity_with_no_pieces(encoder_nlp, pieces):
    nlp = encoder_nlp
    # the BERT normalizer drops the zero-width space: that "entity" has no pieces to be tagged from
    eg = ner_example(nlp, "Anna \u200b lives", ["Anna", "\u200b", "lives"], [(0, 1, "PER"), (1, 2, "MISC")])
    stats = split_stats("train", [eg], pieces.hf, piece_limits(pieces), "BIO")
    assert stats.without_pieces == ["'\\u200b' (MISC)"]


def test_messages_name_each_problem(encoder_nlp, pieces):
    nlp = encoder_nlp
    limits = piece_limits(pieces)
    train = split_stats("train", [ner_example(nlp, "Anna Berg Oslo", ["Anna", "Berg", "Oslo"],
                                              [(0, 1, "PER"), (1, 2, "PER")])], pieces.hf, limits, "IO")
    dev = split_stats("dev", [ner_example(nlp, "AcmeOslo", ["Acme", "Oslo"], [(0, 1, "ORG"), (1, 2, "LOC")],
                                          predicted_words=["AcmeOslo"])], pieces.hf, limits, "IO")
    messages = check_messages(train, dev, limits, "IO", ner=True)
    text = "\n".join(f"{level} {message}" for level, message in messages)
    assert "info entity labels (train/dev): PER 2/0, LOC 0/1, ORG 0/1" in text
    assert "warn entity labels in dev but never in train (the model cannot predict them): LOC, ORG" in text
    assert "warn train: 1 pairs of adjacent entities of one type, which the IO scheme cannot tell apart" in text
    assert "warn dev: 2 entities do not start and end on token boundaries" in text
    assert "good train: every entity starts and ends on token boundaries" in text


def test_pairs_in_train_but_not_in_dev_is_a_warning(encoder_nlp, pieces):
    nlp = encoder_nlp
    limits = piece_limits(pieces)
    pair = make_pair_doc(nlp, "A man plays.", "Nobody plays.")
    single = nlp.make_doc("A man plays. Nobody plays.")
    train = split_stats("train", [Example(pair, pair.copy())], pieces.hf, limits)
    dev = split_stats("dev", [Example(single, single.copy())], pieces.hf, limits)
    messages = check_messages(train, dev, limits, textcat=True)
    assert ("warn", "train has pair docs but dev has none: the classifier is scored on single texts") in messages
    assert any(m.startswith("train: 1 pair docs; first side 5.0 pieces") for _, m in messages)


def test_label_table_orders_by_train_count():
    assert label_table(Counter(a=1, b=3), Counter(c=2)) == [("b", 3, 0), ("a", 1, 0), ("c", 0, 2)]


def test_debug_data_command_on_the_shipped_ner_config(tiny_model_dir, tmp_path):
    from pathlib import Path

    from spacy.tokens import DocBin

    from spacy_mlm.cli import app

    nlp = spacy.blank("en")
    paths = {}
    for split, ents in (("train", [(0, 2, "PER")]), ("dev", [(0, 2, "PER"), (4, 5, "LOC")])):
        doc = Doc(nlp.vocab, words=["Anna", "Berg", "lives", "in", "Oslo"])
        doc.ents = [Span(doc, s, e, label=label) for s, e, label in ents]
        paths[split] = tmp_path / f"{split}.spacy"
        DocBin(docs=[doc]).to_disk(paths[split])
    config = Path(__file__).resolve().parents[2] / "configs" / "ner.cfg"
    result = CliRunner().invoke(app, ["debug-data", str(config), "--paths.train", str(paths["train"]),
                                      "--paths.dev", str(paths["dev"]), "--paths.encoder", str(tiny_model_dir)])
    assert result.exit_code == 0, result.output
    assert "entity labels in dev but never in train (the model cannot predict them): LOC" in " ".join(result.output.split())
    assert "tag scheme BIO" in result.output
