"""Tag schemes for entity tagging as pure functions on lists.

Entities are spans `(start, end, label)` over token indices, `end` exclusive. A
scheme turns them into one tag per token and back:

* ``IO``: ``I-X`` inside an entity, ``O`` outside. Two adjacent entities of the
  same type cannot be told apart (they merge when decoded); that is the price of
  the smallest label set (``n + 1`` tags).
* ``BIO`` (IOB2): ``B-X`` opens every entity, ``I-X`` continues it (``2n + 1``).
* ``IOB1``: the same tags, but ``I-X`` opens an entity too; ``B-X`` opens only one
  that directly follows another of its type (CoNLL-2003's original files, and
  some fine-tuned Hugging Face taggers).
* ``BIOES`` (BILUO is the same scheme with ``L``/``U`` for ``E``/``S``): single-token
  entities get ``S-X``, the last token of longer ones ``E-X`` (``4n + 1``).

Reading tags back is lenient so that foreign input (IOB1, where ``I-X`` may open
an entity, or a softmax tagger's unconstrained output) still gives spans: a tag
that cannot continue the current entity opens a new one, the rule of conlleval.
The transition tables below say which tag pairs a well-formed sequence may hold,
so that decoders can rule the others out.
"""
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy

from ..errors import SpacyMlmError

Span = Tuple[int, int, str]
OUTSIDE = "O"
SCHEMES = ("IO", "BIO", "IOB1", "BIOES")
_ALIASES = {"IOB2": "BIO", "BILUO": "BIOES", "IOBES": "BIOES"}
_PREFIXES = {"IO": ("I",), "BIO": ("B", "I"), "IOB1": ("B", "I"), "BIOES": ("B", "I", "E", "S")}
_BILUO_LETTERS = {"L": "E", "U": "S"}
# the prefixes a well-formed sequence may start with
_OPENERS = {"IO": (OUTSIDE, "I"), "BIO": (OUTSIDE, "B"), "IOB1": (OUTSIDE, "I"), "BIOES": (OUTSIDE, "B", "S")}


def normalize_scheme(scheme: str) -> str:
    """The canonical name of a scheme (accepts IOB2 and BILUO as aliases)."""
    name = scheme.upper()
    name = _ALIASES.get(name, name)
    if name not in SCHEMES:
        raise SpacyMlmError(
            f"Unknown tag scheme {scheme!r}: use one of {', '.join(SCHEMES)} (or the aliases IOB2, BILUO)"
        )
    return name


def make_tag_labels(entity_types: Iterable[str], scheme: str) -> List[str]:
    """All tags of `scheme` for the given entity types: ``O`` first, then each
    type's tags together, types sorted so the label order does not depend on the
    order in which the types were seen."""
    scheme = normalize_scheme(scheme)
    labels = [OUTSIDE]
    for label in sorted(set(entity_types)):
        labels.extend(f"{prefix}-{label}" for prefix in _PREFIXES[scheme])
    return labels


def split_tag(tag: str) -> Tuple[str, str]:
    """``"B-PER"`` -> ``("B", "PER")``; ``"O"`` -> ``("O", "")``. BILUO letters are
    read as their BIOES equivalents."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, sep, label = tag.partition("-")
    prefix = _BILUO_LETTERS.get(prefix, prefix)
    if not sep or not label or prefix not in ("B", "I", "E", "S"):
        raise SpacyMlmError(f"Malformed tag {tag!r}: expected 'O' or '<B|I|E|S|L|U>-<TYPE>'")
    return prefix, label


def spans_to_tags(n_tokens: int, spans: Iterable[Span], scheme: str) -> List[str]:
    """One tag per token for non-overlapping `spans`."""
    scheme = normalize_scheme(scheme)
    tags = [OUTSIDE] * n_tokens
    for start, end, label in sorted(spans):
        if not 0 <= start < end <= n_tokens:
            raise SpacyMlmError(f"Span ({start}, {end}, {label!r}) is outside 0..{n_tokens}")
        if any(tag != OUTSIDE for tag in tags[start:end]):
            raise SpacyMlmError(f"Span ({start}, {end}, {label!r}) overlaps another span")
        follows_its_type = start > 0 and tags[start - 1] in (f"B-{label}", f"I-{label}")
        for i in range(start, end):
            tags[i] = f"I-{label}"
        if scheme == "BIO" or (scheme == "IOB1" and follows_its_type):
            tags[start] = f"B-{label}"
        elif scheme == "BIOES":
            if end - start == 1:
                tags[start] = f"S-{label}"
            else:
                tags[start] = f"B-{label}"
                tags[end - 1] = f"E-{label}"
    return tags


def tags_to_spans(tags: Sequence[str]) -> List[Span]:
    """Entity spans from tags of any scheme (IO, IOB1, BIO, BIOES, BILUO).

    ``B``/``S`` always open an entity; ``I``/``E`` continue the open one if it
    has the same type and has not been closed, else open a new one; ``E``/``S``
    close it. Well-formed sequences of each scheme give back exactly the spans
    they were made from."""
    spans: List[Span] = []
    start, label, is_open = -1, "", False
    for i, tag in enumerate(tags):
        prefix, tag_label = split_tag(tag)
        if prefix == OUTSIDE:
            if label:
                spans.append((start, i, label))
            start, label, is_open = -1, "", False
            continue
        continues = is_open and tag_label == label and prefix in ("I", "E")
        if not continues:
            if label:
                spans.append((start, i, label))
            start, label = i, tag_label
        is_open = prefix in ("B", "I")
    if label:
        spans.append((start, len(tags), label))
    return spans


def convert_tags(tags: Sequence[str], scheme: str) -> List[str]:
    """Re-express a tag sequence (any scheme) in `scheme`."""
    return spans_to_tags(len(tags), tags_to_spans(tags), scheme)


def _can_follow(prev: str, tag: str, scheme: str) -> bool:
    prev_prefix, prev_label = split_tag(prev)
    prefix, label = split_tag(tag)
    if scheme == "IO":
        return True
    if scheme == "IOB1":  # I-X may open an entity; B-X only right after one of its type
        return prefix != "B" or (prev_prefix in ("B", "I") and prev_label == label)
    if prefix in ("I", "E"):
        return prev_prefix in ("B", "I") and prev_label == label
    if scheme == "BIOES":
        # A new entity or O may only come after the previous one was closed.
        return prev_prefix in (OUTSIDE, "E", "S")
    return True


def transition_constraints(labels: Sequence[str], scheme: str) -> Dict[str, numpy.ndarray]:
    """Boolean tables of what a well-formed `scheme` sequence over `labels` allows:
    ``start`` (K,) first tag, ``end`` (K,) last tag, ``transitions`` (K, K) with
    ``[i, j]`` = tag j may follow tag i."""
    scheme = normalize_scheme(scheme)
    allowed_prefixes = set(_PREFIXES[scheme]) | {OUTSIDE}
    for tag in labels:
        if split_tag(tag)[0] not in allowed_prefixes:
            raise SpacyMlmError(f"Tag {tag!r} does not belong to the {scheme} scheme")
    n = len(labels)
    prefixes = [split_tag(tag)[0] for tag in labels]
    start = numpy.array([p in _OPENERS[scheme] for p in prefixes], dtype=bool)
    end = numpy.array(
        [p in (OUTSIDE, "E", "S") or scheme != "BIOES" for p in prefixes], dtype=bool
    )
    transitions = numpy.zeros((n, n), dtype=bool)
    for i, prev in enumerate(labels):
        for j, tag in enumerate(labels):
            transitions[i, j] = _can_follow(prev, tag, scheme)
    return {"start": start, "end": end, "transitions": transitions}


def first_invalid_position(tags: Sequence[str], scheme: str) -> Optional[int]:
    """Index of the first tag that breaks `scheme` (a tag of another scheme, a
    continuation without an opening, an entity left open at the end), or None
    if the sequence is well formed."""
    scheme = normalize_scheme(scheme)
    allowed = set(_PREFIXES[scheme]) | {OUTSIDE}
    for i, tag in enumerate(tags):
        prefix = split_tag(tag)[0]
        if prefix not in allowed:
            return i
        if i == 0:
            if prefix not in _OPENERS[scheme]:
                return i
        elif not _can_follow(tags[i - 1], tag, scheme):
            return i
    if tags and scheme == "BIOES" and split_tag(tags[-1])[0] in ("B", "I"):
        return len(tags) - 1
    return None


def is_valid_sequence(tags: Sequence[str], scheme: str) -> bool:
    """Whether `tags` is a well-formed sequence of `scheme`."""
    return first_invalid_position(tags, scheme) is None


class UnknownEntityLabels(SpacyMlmError):
    def __init__(self, unknown: List[str], known: List[str]):
        super().__init__(f"entity labels {unknown} are not among the tagger's labels {known}")
        self.unknown, self.known = unknown, known


def allowed_tag_mask(biluo: Sequence[Optional[str]], tag_labels: Sequence[str], scheme: str) -> numpy.ndarray:
    """(n_tokens, n_tags) bool: the tags each token may have, from spaCy's
    aligned BILUO annotation (`Example.get_aligned_ner()`): one tag for an
    annotated token, every tag where the annotation is missing (None or "-"),
    so that training treats missing annotation as partial labels. Entity
    types outside `tag_labels` raise: their tokens would otherwise be
    trained as outside any entity."""
    known = numpy.array([t not in (None, "-") for t in biluo], dtype=bool)
    spans = tags_to_spans([t if k else OUTSIDE for t, k in zip(biluo, known)])
    index = {tag: i for i, tag in enumerate(tag_labels)}
    types = {split_tag(tag)[1] for tag in tag_labels if tag != OUTSIDE}
    unknown = sorted({label for _, _, label in spans if label not in types})
    if unknown:
        raise UnknownEntityLabels(unknown, sorted(types))
    gold = spans_to_tags(len(biluo), spans, scheme)
    allowed = numpy.ones((len(biluo), len(tag_labels)), dtype=bool)
    rows = numpy.flatnonzero(known)
    allowed[rows] = False
    allowed[rows, [index[gold[r]] for r in rows]] = True
    return allowed
