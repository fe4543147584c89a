"""Convert the project's data (embedded default or the real sets) into training files.

* NER, CoNLL -> `ner_train.spacy` / `ner_dev.spacy` (DocBin with entities, one sentence
  per Doc) and `ner_train_docs.spacy` / `ner_dev_docs.spacy` (whole documents)
* text classification, any format `spacy_mlm.readers.textcat` reads (SST-2 TSV,
  AG News CSV, TREC, JSONL) -> `textcat_{train,dev}.jsonl` with `text` / `label`
* NLI, any format `spacy_mlm.readers.nli` reads (SNLI/MultiNLI JSONL, GLUE/SICK
  TSV) -> `nli_{train,dev}.jsonl` with `premise` / `hypothesis` / `label`
  (unlabeled rows skipped and counted)
* raw text (plain text or JSONL) -> `pretrain.jsonl`, one document per line
* WiC -> `wic/{train,dev}/...` in the WiC format

so that the training configs read one normalised format whatever the source.
Limits subsample with a fixed seed (the same subsample for every model trained
on it). A relative `--data-dir` is resolved against the folder above the
project: the repository root in a checkout (where the bench scripts'
`../shared/data` also starts), the `--dir` of `spacy_mlm demo`, which unpacks
the packaged project into DIR/project.
"""
import argparse
import json
from pathlib import Path

from spacy_mlm.readers.common import select
from spacy_mlm.readers.conll import conll_documents_to_docs, read_conll
from spacy_mlm.readers.corpus import read_corpus
from spacy_mlm.readers.nli import read_nli
from spacy_mlm.readers.textcat import read_textcat
from spacy_mlm.readers.wic import read_wic_split
from spacy_mlm.util.io import atomic_write_bytes, atomic_write_text

PROJECT_PARENT = Path(__file__).resolve().parents[2]


def resolve(data_dir: str) -> Path:
    path = Path(data_dir)
    return path if path.is_absolute() else PROJECT_PARENT / path


def write_jsonl(path: Path, records) -> int:
    records = list(records)
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return len(records)


def label_names(spec: str):
    """"0=negative,1=positive" -> {"0": "negative", "1": "positive"}; "" -> None."""
    if not spec:
        return None
    return dict(part.split("=", 1) for part in spec.split(","))


def convert_ner(source: Path, output: Path, limit: int) -> str:
    """`conll_to_docbin` plus the subsample: the same DocBin attributes."""
    import spacy
    from spacy.tokens import DocBin

    vocab = spacy.blank("en").vocab
    docs = select(list(conll_documents_to_docs(vocab, read_conll(source))), limit, shuffle=bool(limit), seed=0)
    docbin = DocBin(attrs=["ORTH", "SENT_START", "ENT_IOB", "ENT_TYPE"], store_user_data=False, docs=docs)
    atomic_write_bytes(output, docbin.to_bytes())
    return f"{len(docs)} sentences, {sum(len(d.ents) for d in docs)} entities"


def convert_ner_documents(source: Path, output: Path, limit: int) -> str:
    """Whole documents (`convert-conll --n-sents 0`), for NER that reads each sentence in
    its document; with a limit, seeded whole documents until `limit` sentences."""
    import spacy
    from spacy.tokens import DocBin

    documents = select(read_conll(source), 0, shuffle=bool(limit), seed=0)
    n_sents = 0
    for k, document in enumerate(documents):
        if limit and n_sents >= limit:
            documents = documents[:k]
            break
        n_sents += len(document.sentences)
    docs = list(conll_documents_to_docs(spacy.blank("en").vocab, documents, n_sents=0))
    docbin = DocBin(attrs=["ORTH", "SENT_START", "ENT_IOB", "ENT_TYPE"], store_user_data=False, docs=docs)
    atomic_write_bytes(output, docbin.to_bytes())
    return f"{len(docs)} documents, {n_sents} sentences, {sum(len(d.ents) for d in docs)} entities"


def convert_textcat(source: Path, output: Path, names, limit: int) -> str:
    data = read_textcat(source, label_names=names)
    examples = select(data.examples, limit, shuffle=bool(limit), seed=0)
    n = write_jsonl(output, ({"text": eg.text, "label": list(eg.labels)} for eg in examples))
    return f"{n} texts ({data.summary()})"


def convert_nli(source: Path, output: Path, limit: int) -> str:
    data = read_nli(source)
    examples = select(data.examples, limit, shuffle=bool(limit), seed=0)
    n = write_jsonl(output, ({"premise": e.premise, "hypothesis": e.hypothesis, "label": e.label} for e in examples))
    return f"{n} pairs ({data.summary()})"


def convert_raw(source: Path, output: Path, max_chars: int) -> str:
    records, total = [], 0
    for segments in read_corpus(source):
        text = "\n".join(segments)
        records.append({"text": text})
        total += len(text)
        if max_chars and total >= max_chars:
            break
    write_jsonl(output, records)
    return f"{len(records)} documents, {total} characters"


def convert_wic(source: Path, output: Path, split: str, limit: int) -> str:
    examples = select(read_wic_split(source, split), limit, shuffle=bool(limit), seed=0)
    rows = [f"{e.target}\t{e.pos}\t{e.index1}-{e.index2}\t{e.sentence1}\t{e.sentence2}\n" for e in examples]
    atomic_write_text(output / split / f"{split}.data.txt", "".join(rows))
    atomic_write_text(output / split / f"{split}.gold.txt", "".join("T\n" if e.label else "F\n" for e in examples))
    return f"{len(examples)} items"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--output", type=Path, default=Path("corpus"))
    parser.add_argument("--ner-train", required=True)
    parser.add_argument("--ner-dev", required=True)
    parser.add_argument("--textcat-train", required=True)
    parser.add_argument("--textcat-dev", required=True)
    parser.add_argument("--textcat-labels", default="", help='rename raw labels, e.g. "0=negative,1=positive"')
    parser.add_argument("--nli-train", required=True)
    parser.add_argument("--nli-dev", required=True)
    parser.add_argument("--raw-text", required=True)
    parser.add_argument("--wic", required=True, help="WiC folder with train/ and dev/")
    parser.add_argument("--train-limit", type=int, default=0, help="sentences / texts / pairs / WiC items kept per training set (0 = all)")
    parser.add_argument("--dev-limit", type=int, default=0, help="sentences / texts / pairs kept per dev set (0 = all; WiC dev is kept whole)")
    parser.add_argument("--raw-chars", type=int, default=0, help="stop reading raw text after this many characters (0 = all)")
    args = parser.parse_args()
    data = resolve(args.data_dir)
    out = args.output
    steps = [
        ("ner train", lambda: convert_ner(data / args.ner_train, out / "ner_train.spacy", args.train_limit)),
        ("ner dev", lambda: convert_ner(data / args.ner_dev, out / "ner_dev.spacy", args.dev_limit)),
        ("ner train docs", lambda: convert_ner_documents(data / args.ner_train, out / "ner_train_docs.spacy",
                                                         args.train_limit)),
        ("ner dev docs", lambda: convert_ner_documents(data / args.ner_dev, out / "ner_dev_docs.spacy",
                                                       args.dev_limit)),
        ("textcat train", lambda: convert_textcat(data / args.textcat_train, out / "textcat_train.jsonl",
                                                  label_names(args.textcat_labels), args.train_limit)),
        ("textcat dev", lambda: convert_textcat(data / args.textcat_dev, out / "textcat_dev.jsonl",
                                                label_names(args.textcat_labels), args.dev_limit)),
        ("nli train", lambda: convert_nli(data / args.nli_train, out / "nli_train.jsonl", args.train_limit)),
        ("nli dev", lambda: convert_nli(data / args.nli_dev, out / "nli_dev.jsonl", args.dev_limit)),
        ("raw text", lambda: convert_raw(data / args.raw_text, out / "pretrain.jsonl", args.raw_chars)),
        ("wic train", lambda: convert_wic(data / args.wic, out / "wic", "train", args.train_limit)),
        ("wic dev", lambda: convert_wic(data / args.wic, out / "wic", "dev", 0)),
    ]
    for name, run in steps:
        print(f"{name:<14} {run()}")


if __name__ == "__main__":
    main()
