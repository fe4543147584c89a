"""A pipeline's predictions against transformers' own pipelines on the same
fine-tuned directory: entities and tag probabilities against
`pipeline("token-classification", aggregation_strategy="first")`, scores
against `pipeline("text-classification", top_k=None)` for texts and pairs.
Used on `import_hf`'s pipelines and on those that `spacy train` initializes
from an `init-config --from-hf` config."""
import numpy
import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline

import spacy_mlm

from .sentences import SENTENCES

HYPOTHESIS = "A man is playing music."


def hf_words(tokenizer, text):
    """transformers' words of `text` as (start, end) character spans, by the
    token-classification pipeline's own rule for which pieces continue a word."""
    enc = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    word_aware = getattr(tokenizer._tokenizer.model, "continuing_subword_prefix", None)
    words = []
    for piece, (start, end), special in zip(enc.tokens(), enc["offset_mapping"], enc["special_tokens_mask"]):
        if special:
            continue
        subword = len(piece) != end - start if word_aware else start > 0 and " " not in text[start - 1 : start + 1]
        if piece == tokenizer.unk_token:
            subword = False
        if subword and words:
            words[-1] = (words[-1][0], end)
        else:
            words.append((start, end))
    return words


def assert_transformers_entities(nlp, ner_dir, name: str) -> int:
    """On SENTENCES: every token's tag probabilities of the tagger `name` are the
    softmax of its first piece's logits (within 1e-5), and where transformers'
    words are spaCy's tokens the entities and their scores are its pipeline's.
    Returns the number of sentences with the same words."""
    ner = nlp.get_pipe(name)
    ner.cfg["store_probs"] = True
    hf = pipeline("token-classification", model=str(ner_dir), aggregation_strategy="first")
    model = AutoModelForTokenClassification.from_pretrained(str(ner_dir)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(ner_dir))
    columns = [model.config.label2id[tag] for tag in ner.tag_labels]
    same_words = 0
    for doc in nlp.pipe(SENTENCES):
        # every token's tag probabilities are the softmax of its first piece's logits
        enc = tokenizer(doc.text, return_offsets_mapping=True, return_tensors="pt")
        with torch.no_grad():
            probs = torch.softmax(model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits[0], -1)
        offsets = enc["offset_mapping"][0].tolist()
        for token in doc:
            first = next(i for i, (s, e) in enumerate(offsets) if e > s and s < token.idx + len(token) and e > token.idx)
            numpy.testing.assert_allclose(doc._.tag_probs[token.i], probs[first, columns].numpy(), atol=1e-5)
        if hf_words(tokenizer, doc.text) != [(t.idx, t.idx + len(t)) for t in doc]:
            continue  # tokenization differs: transformers groups other pieces into words
        same_words += 1
        ours = [(e.start_char, e.end_char, e.label_) for e in doc.ents]
        theirs = hf(doc.text)
        assert ours == [(e["start"], e["end"], e["entity_group"]) for e in theirs], doc.text
        scores = [float(numpy.mean([doc._.tag_probs[t.i].max() for t in e])) for e in doc.ents]
        numpy.testing.assert_allclose(scores, [float(e["score"]) for e in theirs], atol=1e-5)
    return same_words


def assert_transformers_scores(nlp, directory, labels) -> None:
    """doc.cats on 20 of SENTENCES: `labels` in that order, with transformers'
    text-classification scores within 1e-5."""
    hf = pipeline("text-classification", model=str(directory), top_k=None)
    texts = SENTENCES[:20]
    for doc, theirs in zip(nlp.pipe(texts), hf(texts)):
        expected = {row["label"]: row["score"] for row in theirs}
        assert list(doc.cats) == list(labels)
        numpy.testing.assert_allclose([doc.cats[k] for k in expected], list(expected.values()), atol=1e-5)


def assert_transformers_pair_scores(nlp, directory, labels) -> None:
    """classify_pairs on 12 (sentence, HYPOTHESIS) pairs: `labels` in that order,
    with transformers' text-classification scores of the pairs within 1e-5."""
    hf = pipeline("text-classification", model=str(directory), top_k=None)
    pairs = [(text, HYPOTHESIS) for text in SENTENCES[:12]]
    ours = spacy_mlm.classify_pairs(nlp, pairs)
    theirs = hf([{"text": a, "text_pair": b} for a, b in pairs])
    for cats, rows in zip(ours, theirs):
        assert list(cats) == list(labels)
        numpy.testing.assert_allclose([cats[r["label"]] for r in rows], [r["score"] for r in rows], atol=1e-5)
