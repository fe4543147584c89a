"""Write the project's embedded default data (`assets_default/`, see its README.md).

Samples of real, redistributable data sets, drawn with a fixed seed from the
copies in `../shared/data` (`--source`), plus the two sets no shippable source
covers, written for this project:

* NER: WikiANN English (Wikipedia, CC BY-SA), sentences of at least 6 tokens,
  in CoNLL's `word TAG` format with `-DOCSTART-` before each sentence (WikiANN's
  sentences come from unrelated articles) -> `conll2003/{train,valid}.txt`
* NLI: SNLI 1.0 dev (CC BY-SA 4.0) -> `snli/dev.jsonl` (training pairs) and
  MultiNLI's matched sample (OANC / CC BY-SA 3.0) -> `mnli_sample/...` (dev pairs)
* raw text: WikiText-2 validation + test (CC BY-SA 3.0), paragraphs without `<unk>`,
  its ` @-@ ` style joins undone -> `raw_text/wikitext2/valid.txt`
* WiC: written here from the templates below (WiC itself is CC BY-NC) -> `wic/`
* sentiment (`sst2/*.tsv`): written by hand for this project and kept as is
  (SST-2 has no licence to redistribute); this script does not touch it.

The file names mirror `../shared/data`, so the project's vars select the
embedded samples or the full sets by `data_dir` alone.

    python scripts/make_default_data.py --source ../../shared/data --output assets_default
"""
import argparse
import json
import random
import re
from pathlib import Path

SEED = 0
N_NER = {"train": 400, "dev": 200}
MIN_NER_TOKENS = 6
N_NLI = {"train": 600, "dev": 200}
N_RAW_PARAGRAPHS = 400
# WikiText's tokenisation of number and word joins: "1 @,@ 000", "well @-@ known".
WIKITEXT_JOINS = re.compile(r" @([-,.])@ ")

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


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf8")


def read_wikiann(path):
    """Sentences of (token, tag) from WikiANN's `lang:token<TAB>tag` lines."""
    sentence = []
    for line in path.read_text(encoding="utf8").splitlines():
        if not line.strip():
            if sentence:
                yield sentence
            sentence = []
            continue
        token, tag = line.split("\t")
        sentence.append((token.split(":", 1)[1], tag))
    if sentence:
        yield sentence


def sample_ner(source, n, rng):
    sentences = [s for s in read_wikiann(source) if len(s) >= MIN_NER_TOKENS]
    lines = []
    for sentence in rng.sample(sentences, n):
        lines += ["-DOCSTART- O", ""] + [f"{token} {tag}" for token, tag in sentence] + [""]
    return "\n".join(lines) + "\n"


def sample_raw(sources, rng):
    """Whole paragraphs of WikiText-2 (no headings, none with `<unk>`), in file
    order, one per line with blank lines between them (documents)."""
    paragraphs = [line.strip() for source in sources for line in source.read_text(encoding="utf8").splitlines()
                  if line.strip() and not line.strip().startswith("=") and "<unk>" not in line]
    keep = sorted(rng.sample(range(len(paragraphs)), min(N_RAW_PARAGRAPHS, len(paragraphs))))
    return "\n\n".join(WIKITEXT_JOINS.sub(r"\1", paragraphs[i]) for i in keep) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="the folder with the layout of ../shared/data")
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parents[1] / "assets_default")
    args = parser.parse_args()
    src, out = args.source, args.output
    rng = random.Random(SEED)
    write(out / "conll2003" / "train.txt", sample_ner(src / "wikiann" / "en" / "train", N_NER["train"], rng))
    write(out / "conll2003" / "valid.txt", sample_ner(src / "wikiann" / "en" / "dev", N_NER["dev"], rng))

    snli = [json.loads(line) for line in (src / "snli" / "dev.jsonl").read_text(encoding="utf8").splitlines()]
    write(out / "snli" / "dev.jsonl", "".join(json.dumps(r) + "\n" for r in rng.sample(snli, N_NLI["train"])))
    mnli = (src / "mnli_sample" / "dev_matched_sample1000.tsv").read_text(encoding="utf8").splitlines()
    write(out / "mnli_sample" / "dev_matched_sample1000.tsv", "".join(row + "\n" for row in rng.sample(mnli, N_NLI["dev"])))

    write(out / "raw_text" / "wikitext2" / "valid.txt", sample_raw([src / "raw_text" / "wikitext2" / f"{split}.txt" for split in ("valid", "test")], rng))

    train_words = [w for w in WIC_WORDS if w[0] not in WIC_DEV_WORDS]
    dev_words = [w for w in WIC_WORDS if w[0] in WIC_DEV_WORDS]
    for split, words in (("train", train_words), ("dev", dev_words)):
        items = wic_items(words, rng)
        write(out / "wic" / split / f"{split}.data.txt", "".join(wic_row(*item[:4]) + "\n" for item in items))
        write(out / "wic" / split / f"{split}.gold.txt", "".join(item[4] + "\n" for item in items))


if __name__ == "__main__":
    main()
