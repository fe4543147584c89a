"""Write the project's embedded default data (`assets_default/`).

Every sentence here was written for this project: small templates and word lists
combined with a fixed seed, so the files are reproducible and free of third-party
text. The folder mirrors the layout of the real data sets (`../shared/data`), so
the same project vars select either: `conll2003/` (NER, CoNLL), `sst2/`
(sentiment TSV), `snli/dev.jsonl` + `mnli_sample/dev_matched_sample1000.tsv`
(NLI train / dev), `raw_text/wikitext2/valid.txt` (text for pretraining) and
`wic/` (word in context). The data is tiny and regular on purpose: the demo
must train every model for real in a few minutes on two CPU cores.

    python scripts/make_default_data.py assets_default
"""
import json
import random
import sys
from pathlib import Path

FIRST = ["Anna", "Peter", "Maria", "Tomas", "Lena", "Omar", "Julia", "Kenji", "Sara", "David",
         "Ines", "Marco", "Nadia", "Felix", "Ruth", "Samuel", "Clara", "Ivan", "Elsa", "Hugo"]
LAST = ["Berg", "Grant", "Lopez", "Novak", "Holm", "Haddad", "Weiss", "Tanaka", "Olsen", "Morel",
        "Costa", "Rossi", "Amari", "Brandt", "Keller", "Okafor", "Varga", "Petrov", "Lind", "Moreau"]
ORGS = ["Northwind Company", "Acme Bank", "Bluefield Labs", "the Harbor Trust", "Greenline Motors",
        "Silverlake Press", "the City Council", "Redstone Energy", "Orchard Foods", "Maple Airlines",
        "the River Club", "Brightwater Systems", "Ironbridge Bank", "the Forest Museum", "Lakeside College"]
LOCS = ["Oslo", "Paris", "Berlin", "Lisbon", "Cairo", "Toronto", "Kyoto", "Geneva", "Dublin", "Nairobi",
        "Lima", "Vienna", "Seoul", "Prague", "Madrid", "Chicago", "Helsinki", "Porto", "Quebec", "Athens"]
MISC = ["Olympic", "Nobel", "French", "German", "Japanese", "Spanish", "Brazilian", "Canadian"]

# {P} person, {O} organisation, {L} location, {M} miscellaneous; one template per line of text.
NER_TEMPLATES = [
    "{P} works for {O} in {L} .",
    "{P} flew from {L} to {L} on Monday .",
    "{O} opened a new office in {L} last year .",
    "{P} met {P} at the {M} festival in {L} .",
    "Shares of {O} fell after the report from {L} .",
    "{P} , a spokesman for {O} , declined to comment .",
    "The {M} team arrived in {L} on Friday .",
    "{P} won the {M} prize for her work on rivers .",
    "{O} hired {P} as chief economist .",
    "Rain delayed the match between {L} and {L} .",
    "{P} said {O} would build a bridge near {L} .",
    "Visitors to {L} can now fly with {O} .",
    "{P} moved to {L} to study at {O} .",
    "The {M} minister met {P} in {L} .",
    "{O} and {O} agreed to merge .",
    "{P} painted the old harbour of {L} .",
    "A storm closed the port of {L} for two days .",
    "{P} joined {O} after ten years in {L} .",
    "The {M} novel by {P} sold well in {L} .",
    "{O} reported higher profits in {L} .",
]
# Held-out templates: the dev set also has sentence shapes never seen in training.
NER_DEV_TEMPLATES = [
    "{P} gave a talk about {O} in {L} .",
    "Last week {P} visited {L} with friends from {O} .",
    "{O} moved its headquarters from {L} to {L} .",
    "The {M} singer {P} will perform in {L} .",
]

POSITIVE = ["wonderful", "moving", "delightful", "brilliant", "charming", "warm", "gripping", "beautiful"]
NEGATIVE = ["dull", "tedious", "clumsy", "boring", "shallow", "lifeless", "confused", "grating"]
THINGS = ["film", "story", "book", "play", "script", "ending", "soundtrack", "performance"]
SENTIMENT_TEMPLATES = [
    "the {t} was {a} and {b} .",
    "a {a} , {b} {t} from start to finish .",
    "what a {a} {t} this is .",
    "i found the {t} {a} , even {b} .",
    "the whole {t} feels {a} .",
    "an {a} {t} with a {b} heart .",
]
SENTIMENT_NEGATED = {  # negation flips the label: "not dull" is praise
    1: "the {t} is never {n} .",
    0: "the {t} is not {p} at all .",
}

# NLI: (subject, a more general subject) x (activity, a more general activity, its setting)
SUBJECTS = [("A woman", "A person"), ("A man", "A person"), ("Two children", "Some kids"),
            ("An old man", "A man"), ("A young girl", "A child"), ("A group of friends", "Some people"),
            ("A boy", "A child"), ("A chef", "A cook")]
ACTIVITIES = [
    ("is playing a guitar", "is playing an instrument", "on a stage"),
    ("is riding a bicycle", "is riding something", "down a hill"),
    ("is reading a newspaper", "is reading", "in a cafe"),
    ("is swimming", "is in the water", "in a lake"),
    ("is cooking soup", "is making food", "in a kitchen"),
    ("is painting a fence", "is painting", "in a garden"),
    ("is climbing a tree", "is climbing", "in a park"),
    ("is walking a dog", "is outside with an animal", "on a beach"),
]
PLURAL = {"Two children", "Some kids", "Some people"}
OPPOSITES = ["is sleeping at home", "is sitting still in a dark room", "is lying in bed"]
EXTRAS = ["for a prize", "to impress a friend", "for the first time", "after a long day at work"]

# WiC: (lemma, PoS, {sense: [sentences with the target written in *stars*]})
WIC_WORDS = [
    ("bank", "N", {
        "river": ["We sat on the *bank* and watched the boats .", "The river flooded its *bank* after the storm .",
                  "Reeds grow along the muddy *bank* ."],
        "money": ["She opened an account at the *bank* .", "The *bank* raised its interest rates .",
                  "He works as a clerk in a *bank* downtown ."]}),
    ("bat", "N", {
        "animal": ["A *bat* flew out of the cave at dusk .", "The *bat* hung upside down in the barn .",
                   "Each *bat* eats thousands of insects ."],
        "club": ["He swung the *bat* and hit the ball .", "She bought a new cricket *bat* .",
                 "The *bat* cracked during the game ."]}),
    ("plant", "N", {
        "flora": ["Water the *plant* twice a week .", "A tall *plant* stood by the window .",
                  "This *plant* needs plenty of sun ."],
        "factory": ["The car *plant* employs two thousand workers .", "The power *plant* closed last year .",
                    "They built a steel *plant* near the port ."]}),
    ("light", "N", {
        "lamp": ["Turn off the *light* before you leave .", "The *light* in the hall is broken .",
                 "A small *light* glowed above the door ."],
        "sun": ["Morning *light* filled the room .", "Plants need *light* to grow .",
                "The painting shows the soft *light* of autumn ."]}),
    ("match", "N", {
        "game": ["Our team won the *match* by two goals .", "The tennis *match* lasted four hours .",
                 "Rain stopped the *match* at half time ."],
        "fire": ["He struck a *match* to light the candle .", "The *match* went out in the wind .",
                 "Keep the *match* away from the children ."]}),
    ("run", "V", {
        "move": ["The children *run* across the field .", "I *run* five miles every morning .",
                 "Dogs *run* faster than cats ."],
        "manage": ["They *run* a small hotel by the sea .", "Her parents *run* the village shop .",
                   "Engineers *run* the plant at night ."]}),
    ("spring", "N", {
        "season": ["The garden blooms in *spring* .", "We plan to travel next *spring* .",
                   "Birds return every *spring* ."],
        "water": ["Fresh water flows from the *spring* .", "The village drinks from a mountain *spring* .",
                  "A cold *spring* rises under the rocks ."]}),
    ("seal", "N", {
        "animal": ["A *seal* rested on the rocks by the shore .", "The *seal* dived for fish .",
                   "We saw a grey *seal* in the harbour ."],
        "stamp": ["The letter carried the royal *seal* .", "Break the *seal* to open the box .",
                  "The *seal* on the jar was tight ."]}),
    ("pitch", "N", {
        "field": ["The players walked onto the *pitch* .", "Rain turned the *pitch* into mud .",
                  "The football *pitch* is behind the school ."],
        "sound": ["She sang at a very high *pitch* .", "The *pitch* of the engine rose .",
                  "Tune the string to the right *pitch* ."]}),
    ("crane", "N", {
        "bird": ["A *crane* stood in the shallow water .", "The *crane* spread its long wings .",
                 "We watched a *crane* catch a fish ."],
        "machine": ["The *crane* lifted the steel beam .", "A tall *crane* towers over the building site .",
                    "The *crane* operator started work early ."]}),
    ("file", "N", {
        "document": ["Save the *file* before you close it .", "The *file* was too large to send .",
                     "She deleted the old *file* ."],
        "tool": ["He smoothed the edge with a *file* .", "A metal *file* lay on the bench .",
                 "Use a fine *file* for the nails ."]}),
    ("rock", "N", {
        "stone": ["He sat on a *rock* by the lake .", "A *rock* fell from the cliff .",
                  "The path winds between *rock* and sand ."],
        "music": ["They play loud *rock* in the garage .", "She loves classic *rock* from the seventies .",
                  "The radio station plays only *rock* ."]}),
]
WIC_DEV_WORDS = {"pitch", "crane", "file", "rock"}  # words never seen in WiC training

EXTRA_TEXT = [
    "The pond lies in a quiet wood near the town .",
    "Every morning the baker opens his shop at six .",
    "The museum keeps old maps of the harbour .",
    "Fishermen mend their nets on the pier .",
    "The train to the coast leaves every hour .",
    "A new library opened next to the school .",
    "Snow covered the mountain road for a week .",
    "The council voted to plant more trees in the square .",
    "She wrote a letter to her brother in the city .",
    "The orchestra played until late in the evening .",
]


def ner_sentence(rng, template):
    """Tokens and BIO tags for one filled template."""
    words, tags = [], []
    for piece in template.split():
        if piece.startswith("{") and piece[1] in "POLM":
            kind = piece[1]
            if kind == "P":
                name = [rng.choice(FIRST), rng.choice(LAST)] if rng.random() < 0.8 else [rng.choice(LAST)]
                label = "PER"
            elif kind == "O":
                name = rng.choice(ORGS).split()
                if name[0] == "the":
                    words.append("the")
                    tags.append("O")
                    name = name[1:]
                label = "ORG"
            elif kind == "L":
                name, label = [rng.choice(LOCS)], "LOC"
            else:
                name, label = [rng.choice(MISC)], "MISC"
            for i, word in enumerate(name):
                words.append(word)
                tags.append(("B-" if i == 0 else "I-") + label)
            if piece[3:]:  # punctuation glued to the slot, e.g. "{O},"
                words.append(piece[3:])
                tags.append("O")
        else:
            words.append(piece)
            tags.append("O")
    if words and words[0][0].islower():
        words[0] = words[0].capitalize()
    return words, tags


def write_conll(path, sentences, per_doc=8):
    lines = []
    for i, (words, tags) in enumerate(sentences):
        if i % per_doc == 0:
            lines += ["-DOCSTART- O", ""]
        lines += [f"{w} {t}" for w, t in zip(words, tags)] + [""]
    write(path, "\n".join(lines) + "\n")


def sentiment_rows(rng, n):
    rows = []
    for i in range(n):
        label = i % 2
        if rng.random() < 0.15:
            text = SENTIMENT_NEGATED[label].format(t=rng.choice(THINGS), p=rng.choice(POSITIVE), n=rng.choice(NEGATIVE))
        else:
            adjectives = POSITIVE if label else NEGATIVE
            a, b = rng.sample(adjectives, 2)
            text = _article(rng.choice(SENTIMENT_TEMPLATES).format(t=rng.choice(THINGS), a=a, b=b))
        rows.append((text, label))
    return rows


def _article(text):
    """a / an before the next word."""
    words = text.split()
    for i in range(len(words) - 1):
        if words[i] in ("a", "an"):
            words[i] = "an" if words[i + 1][0] in "aeiou" else "a"
    return " ".join(words)


def agree(subject, predicate):
    """Subject-verb agreement for the predicates, which are written with "is"."""
    if subject in PLURAL and predicate.startswith("is "):
        predicate = "are " + predicate[3:]
    return f"{subject} {predicate}"


def nli_pairs(rng, n):
    pairs = []
    for i in range(n):
        (subject, general), (activity, general_activity, place) = rng.choice(SUBJECTS), rng.choice(ACTIVITIES)
        premise = f"{agree(subject, activity)} {place} ."
        kind = i % 3
        if kind == 0:
            hypothesis, label = f"{agree(general, general_activity)} .", "entailment"
        elif kind == 1:
            hypothesis, label = f"{agree(general, rng.choice(OPPOSITES))} .", "contradiction"
        else:
            hypothesis, label = f"{agree(subject, activity)} {rng.choice(EXTRAS)} .", "neutral"
        pairs.append((premise, hypothesis, label))
    return pairs


def wic_items(words, rng):
    """Every pair of sentences of a word: same sense -> T, different senses -> F,
    balanced by keeping as many F pairs as T pairs."""
    items = []
    for lemma, pos, senses in words:
        uses = [(sense, s) for sense, sentences in senses.items() for s in sentences]
        same, different = [], []
        for i in range(len(uses)):
            for j in range(i + 1, len(uses)):
                (sense_a, a), (sense_b, b) = uses[i], uses[j]
                (same if sense_a == sense_b else different).append((a, b))
        rng.shuffle(different)
        for (a, b), gold in [(p, "T") for p in same] + [(p, "F") for p in different[: len(same)]]:
            items.append((lemma, pos, a, b, gold))
    rng.shuffle(items)
    return items


def wic_row(lemma, pos, a, b):
    def locate(sentence):
        words = sentence.split()
        index = next(i for i, w in enumerate(words) if w.startswith("*"))
        return index, " ".join(w.strip("*") for w in words)

    i, s1 = locate(a)
    j, s2 = locate(b)
    return f"{lemma}\t{pos}\t{i}-{j}\t{s1}\t{s2}"


def detokenize(text):
    for punct in (" .", " ,", " ?", " !"):
        text = text.replace(punct, punct[1:])
    return text


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf8")


def main(out_dir):
    out = Path(out_dir)
    rng = random.Random(7)
    ner_train = [ner_sentence(rng, rng.choice(NER_TEMPLATES)) for _ in range(240)]
    ner_dev = [ner_sentence(rng, rng.choice(NER_TEMPLATES + NER_DEV_TEMPLATES * 3)) for _ in range(60)]
    write_conll(out / "conll2003" / "train.txt", ner_train)
    write_conll(out / "conll2003" / "valid.txt", ner_dev)

    sst_train, sst_dev = sentiment_rows(rng, 200), sentiment_rows(rng, 60)
    for name, rows in (("train", sst_train), ("dev", sst_dev)):
        write(out / "sst2" / f"{name}.tsv", "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))

    nli_train, nli_dev = nli_pairs(rng, 240), nli_pairs(rng, 60)
    records = [{"sentence1": p, "sentence2": h, "gold_label": y} for p, h, y in nli_train]
    # Two pairs the annotators "disagreed" on, as in SNLI: the reader skips and counts them.
    records[5:5] = [{"sentence1": "A man is standing near a door .", "sentence2": "A man is waiting .", "gold_label": "-"}]
    records[50:50] = [{"sentence1": "A dog runs on the sand .", "sentence2": "A dog is happy .", "gold_label": "-"}]
    write(out / "snli" / "dev.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    write(out / "mnli_sample" / "dev_matched_sample1000.tsv", "".join(f"{y}\t{p}\t{h}\n" for p, h, y in nli_dev))

    train_words = [w for w in WIC_WORDS if w[0] not in WIC_DEV_WORDS]
    dev_words = [w for w in WIC_WORDS if w[0] in WIC_DEV_WORDS]
    for split, words in (("train", train_words), ("dev", dev_words)):
        items = wic_items(words, rng)
        write(out / "wic" / split / f"{split}.data.txt", "".join(wic_row(*item[:4]) + "\n" for item in items))
        write(out / "wic" / split / f"{split}.gold.txt", "".join(item[4] + "\n" for item in items))

    # Raw text for pretraining: the unlabeled text of the same domain, a few
    # sentences per line (paragraph), blank lines between documents.
    sentences = [" ".join(w) for w, _ in ner_train] + [t for t, _ in sst_train] + [p for p, _, _ in nli_train]
    sentences += [s.replace("*", "") for _, _, senses in WIC_WORDS for ss in senses.values() for s in ss]
    sentences += EXTRA_TEXT
    rng.shuffle(sentences)
    paragraphs = [" ".join(detokenize(s[0].upper() + s[1:]) for s in sentences[i : i + 4]) for i in range(0, len(sentences), 4)]
    documents = ["\n".join(paragraphs[i : i + 5]) for i in range(0, len(paragraphs), 5)]
    write(out / "raw_text" / "wikitext2" / "valid.txt", "\n\n".join(documents) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "assets_default")
