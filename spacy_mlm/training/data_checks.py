"""What `python -m spacy_mlm debug-data` checks in a config's corpora, beyond
`spacy debug data` (whose NER and textcat checks look for the factories
`ner` and `textcat` by name, so skip `mlm_ner` and `mlm_textcat`).

Per split: label counts (entity types, classes) and labels of dev that train
never has; entities whose boundaries are not token boundaries of the Doc the
pipeline sees (they cannot be tagged: spaCy trains those tokens as unknown);
entities a tag scheme cannot express (IO merges adjacent entities of one
type) or that have no encoder pieces at all; docs longer than the encoder's
window (split into overlapping windows) and pairs longer than it (truncated,
longest side first); the share of unknown pieces; pair docs and their side
lengths. `SplitStats` holds the counts, `check_messages` turns two splits into
(level, message) lines.
"""
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from spacy.training import Example

from ..tagging.schemes import normalize_scheme
from ..tokenization.pair import pair_char_split

SHOWN = 3  # examples quoted per problem
UNKNOWN_WARN = 0.01  # share of unknown pieces worth a warning
BATCH = 256


@dataclass
class SplitStats:
    """The counts of one split (train or dev)."""

    name: str
    n_docs: int = 0
    entity_labels: Counter = field(default_factory=Counter)
    cat_labels: Counter = field(default_factory=Counter)
    misaligned: List[str] = field(default_factory=list)  # entities not on token boundaries, quoted
    merged_in_io: int = 0  # adjacent same-type entity pairs
    without_pieces: List[str] = field(default_factory=list)
    n_pieces: int = 0
    n_unknown: int = 0
    long_docs: int = 0  # single docs longer than one window
    longest: int = 0  # pieces of the longest single doc
    side_a: List[int] = field(default_factory=list)  # pieces of each pair's first side
    side_b: List[int] = field(default_factory=list)
    truncated_pairs: int = 0

    @property
    def n_pairs(self) -> int:
        return len(self.side_a)


@dataclass(frozen=True)
class PieceLimits:
    """What the encoder's tokenizer allows: content pieces of one window, and
    all pieces of a pair with its specials."""

    window_content: int
    max_length: int
    pair_specials: int


def piece_limits(piece_tokenizer) -> PieceLimits:
    """The limits of an initialized encoder's `PieceTokenizer` (model.attrs["tokenizer"])."""
    return PieceLimits(piece_tokenizer.content_length, piece_tokenizer.max_length,
                       piece_tokenizer.hf.num_special_tokens_to_add(pair=True))


def entity_problems(reference: Doc, predicted: Doc, scheme: Optional[str]) -> Tuple[List[str], int]:
    """The reference's entities that do not start and end on `predicted`'s
    token boundaries (quoted), and, for the IO scheme, how many adjacent
    same-type entities would merge."""
    misaligned = [f"{ent.text!r} ({ent.label_})" for ent in reference.ents
                  if predicted.char_span(ent.start_char, ent.end_char) is None]
    merged = 0
    if scheme is not None and normalize_scheme(scheme) == "IO":
        ents = list(reference.ents)
        merged = sum(a.end == b.start and a.label_ == b.label_ for a, b in zip(ents, ents[1:]))
    return misaligned, merged


def uncovered_spans(starts: numpy.ndarray, ends: numpy.ndarray, spans: Iterable[Tuple[int, int, str]]) -> List[str]:
    """The (start_char, end_char, text) spans that no piece (starts, ends) overlaps."""
    starts, ends = numpy.asarray(starts), numpy.asarray(ends)
    nonempty = ends > starts
    return [text for start, end, text in spans
            if not numpy.any(nonempty & (starts < end) & (ends > start))]


def split_stats(name: str, examples: Sequence[Example], hf_tokenizer, limits: PieceLimits,
                scheme: Optional[str] = None) -> SplitStats:
    """Count everything `check_messages` reports for one split. Pieces are those
    of the Docs the pipeline sees (`eg.predicted`); entities and classes those of
    the gold Docs (`eg.reference`)."""
    stats = SplitStats(name, n_docs=len(examples))
    unknown = hf_tokenizer.unk_token_id
    for eg in examples:
        stats.entity_labels.update(ent.label_ for ent in eg.reference.ents)
        stats.cat_labels.update(label for label, value in eg.reference.cats.items() if value >= 0.5)
        misaligned, merged = entity_problems(eg.reference, eg.predicted, scheme)
        stats.misaligned.extend(misaligned)
        stats.merged_in_io += merged
    for start in range(0, len(examples), BATCH):
        docs = [eg.predicted for eg in examples[start:start + BATCH]]
        references = [eg.reference for eg in examples[start:start + BATCH]]
        pieces = hf_tokenizer([doc.text for doc in docs], add_special_tokens=False, return_offsets_mapping=True,
                              return_attention_mask=False, return_token_type_ids=False, verbose=False)
        for doc, reference, ids, offsets in zip(docs, references, pieces["input_ids"], pieces["offset_mapping"]):
            offsets = numpy.asarray(offsets, dtype=numpy.int64).reshape(-1, 2)
            stats.n_pieces += len(ids)
            stats.n_unknown += sum(i == unknown for i in ids) if unknown is not None else 0
            spans = [(e.start_char, e.end_char, f"{e.text!r} ({e.label_})") for e in reference.ents]
            stats.without_pieces.extend(uncovered_spans(offsets[:, 0], offsets[:, 1], spans))
            split = pair_char_split(doc)
            if split is None:
                stats.long_docs += len(ids) > limits.window_content
                stats.longest = max(stats.longest, len(ids))
            else:
                n_a = int(numpy.sum(offsets[:, 1] <= split[0]))
                stats.side_a.append(n_a)
                stats.side_b.append(len(ids) - n_a)
                stats.truncated_pairs += len(ids) + limits.pair_specials > limits.max_length
    return stats


Message = Tuple[str, str]  # (level: "good" | "info" | "warn", text)


def label_table(train: Counter, dev: Counter) -> List[Tuple[str, int, int]]:
    """(label, train count, dev count) for every label of either split, by train count."""
    labels = sorted(set(train) | set(dev), key=lambda label: (-train[label], label))
    return [(label, train[label], dev[label]) for label in labels]


def label_messages(kind: str, train: Counter, dev: Counter) -> List[Message]:
    if not train and not dev:
        return []
    counts = ", ".join(f"{label} {n_train}/{n_dev}" for label, n_train, n_dev in label_table(train, dev))
    messages = [("info", f"{kind} (train/dev): {counts}")]
    missing = sorted(set(dev) - set(train))
    if missing:
        messages.append(("warn", f"{kind} in dev but never in train (the model cannot predict them): {', '.join(missing)}"))
    else:
        messages.append(("good", f"{kind}: every one of dev is in train"))
    return messages


def _quoted(items: List[str]) -> str:
    more = f", ... ({len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _mean_max(values: List[int]) -> str:
    return f"{numpy.mean(values):.1f} pieces on average (max {max(values)})"


def split_messages(stats: SplitStats, limits: PieceLimits, scheme: Optional[str], ner: bool) -> List[Message]:
    """The piece, pair and entity checks of one split."""
    name, out = stats.name, []
    share = stats.n_unknown / stats.n_pieces if stats.n_pieces else 0.0
    level = "warn" if share > UNKNOWN_WARN else "info"
    out.append((level, f"{name}: {stats.n_docs} docs, {stats.n_pieces} pieces, {100 * share:.2f}% unknown pieces"))
    if stats.long_docs:
        out.append(("warn", f"{name}: {stats.long_docs} docs longer than the encoder's window of "
                            f"{limits.window_content} text pieces (longest {stats.longest}): each is split into "
                            "overlapping windows"))
    if stats.n_pairs:
        out.append(("info", f"{name}: {stats.n_pairs} pair docs; first side {_mean_max(stats.side_a)}, "
                            f"second side {_mean_max(stats.side_b)}"))
        if stats.n_pairs < stats.n_docs:
            out.append(("warn", f"{name}: {stats.n_docs - stats.n_pairs} of {stats.n_docs} docs are single texts, "
                                "not pairs"))
    if stats.truncated_pairs:
        out.append(("warn", f"{name}: {stats.truncated_pairs} pairs longer than {limits.max_length} pieces with "
                            "their specials: truncated, longest side first"))
    if ner:
        if stats.misaligned:
            out.append(("warn", f"{name}: {len(stats.misaligned)} entities do not start and end on token "
                                f"boundaries (those tokens are trained as unknown): {_quoted(stats.misaligned)}"))
        else:
            out.append(("good", f"{name}: every entity starts and ends on token boundaries"))
        if stats.merged_in_io:
            out.append(("warn", f"{name}: {stats.merged_in_io} pairs of adjacent entities of one type, which the "
                                f"{scheme} scheme cannot tell apart (they merge into one)"))
        if stats.without_pieces:
            out.append(("warn", f"{name}: {len(stats.without_pieces)} entities have no encoder pieces (the subword "
                                f"tokenizer drops their characters): {_quoted(stats.without_pieces)}"))
    return out


def check_messages(train: SplitStats, dev: SplitStats, limits: PieceLimits, scheme: Optional[str] = None,
                   ner: bool = False, textcat: bool = False) -> List[Message]:
    """Every check, for a pipeline with an entity tagger (`ner`, its `scheme`)
    and/or a classifier (`textcat`)."""
    out: List[Message] = []
    if ner:
        out += label_messages("entity labels", train.entity_labels, dev.entity_labels)
    if textcat:
        out += label_messages("classes", train.cat_labels, dev.cat_labels)
    if train.n_pairs and not dev.n_pairs:
        out.append(("warn", "train has pair docs but dev has none: the classifier is scored on single texts"))
    for stats in (train, dev):
        out += split_messages(stats, limits, scheme, ner)
    return out
