"""`spacy_mlm uncertain`: the texts an NER pipeline is least sure of, for
annotation (active learning), in the JSONL shape annotation tools read."""
import heapq
import json
from pathlib import Path
from typing import Dict, List, Tuple

import typer

from . import app
from .options import force_option, gpu_id_option, quiet_option, use_gpu


def uncertainty_record(doc, expected_errors: float, file: str, line: int) -> Dict:
    """A Doc as `{"text", "spans": [{"start", "end", "label", "score"}], "meta"}`
    (character offsets; the entities of `doc.ents` with their probabilities)."""
    from ..pipeline.ner import SPAN_PROB_ATTR

    spans = [{"start": ent.start_char, "end": ent.end_char, "label": ent.label_,
              "score": round(float(ent._.get(SPAN_PROB_ATTR)), 6)} for ent in doc.ents]
    return {"text": doc.text, "spans": spans,
            "meta": {"expected_errors": round(expected_errors, 6), "file": file, "line": line}}


def expected_errors(doc) -> float:
    """The expected number of wrong entities of the Doc's prediction, summed
    over the pipeline's mlm_ner components (their span groups' attrs)."""
    from ..pipeline.ner import SPAN_PROB_ATTR

    return sum(float(group.attrs["expected_errors"]) for group in doc.spans.values() if SPAN_PROB_ATTR in group.attrs)


def is_uncertain_file(path: Path) -> bool:
    """An earlier OUTPUT of uncertain: empty, or JSON lines with "meta" holding "expected_errors"."""
    try:
        with path.open(encoding="utf8") as f:
            first = f.readline()
        return not first or "expected_errors" in json.loads(first).get("meta", {})
    except (OSError, ValueError, AttributeError):
        return False


@app.command("uncertain", short_help="The texts an NER pipeline is least sure of, for annotation.")
def uncertain_cli(
    model: Path = typer.Argument(..., help="saved spaCy pipeline with an mlm_ner component"),
    texts: Path = typer.Argument(..., help='JSONL file of {"text": ...} lines (or a text file, one text a line)'),
    output: Path = typer.Argument(..., help="where to write the chosen texts (JSONL)"),
    top: int = typer.Option(100, "--top", min=1, help="how many texts to write"),
    text_key: str = typer.Option("text", "--text-key", help="the JSONL field that holds the text"),
    batch_size: int = typer.Option(64, "--batch-size", help="texts per pipeline batch"),
    gpu_id: int = gpu_id_option(),
    quiet: bool = quiet_option(),
    force: bool = force_option("replace OUTPUT even if it is not an earlier output of uncertain"),
):
    """Write the TOP texts of TEXTS with the most expected entity errors, most
    first: the expected number of wrong entities of the prediction (its
    expected false positives, the sum of 1 - p over its entities, plus its
    expected misses, the expected number of entities under the model less the
    sum of p), each with its predicted entities and their probabilities:
    {"text", "spans": [{"start", "end", "label", "score"}], "meta":
    {"expected_errors", "file", "line"}}, character offsets."""
    import spacy

    from ..errors import SpacyMlmError
    from ..evaluation.calibration import entity_recognizers
    from ..inference.records import read_records
    from ..util.io import atomic_write_text
    from ..util.outputs import claim_output
    from ..util.progress import track

    use_gpu(gpu_id)
    nlp = spacy.load(model)
    if not entity_recognizers(nlp):
        raise SpacyMlmError(f"{model} has no mlm_ner component: its entities carry no probability")
    with claim_output(output, "uncertain", directory=False, inputs=[model, texts], force=force,
                      recognise=is_uncertain_file):
        records, _ = read_records(texts, text_key=text_key, max_length=nlp.max_length)
        docs = track(nlp.pipe((r.text for r in records), batch_size=batch_size), len(records), "uncertain",
                     "texts", quiet=quiet)
        chosen: List[Tuple[float, int, Dict]] = []
        for i, (record, doc) in enumerate(zip(records, docs)):
            errors = expected_errors(doc)
            item = (errors, -i, uncertainty_record(doc, errors, record.file, record.line))
            (heapq.heappush if len(chosen) < top else heapq.heappushpop)(chosen, item)
        lines = [json.dumps(item, ensure_ascii=False) for _, _, item in sorted(chosen, reverse=True)]
        atomic_write_text(output, "".join(line + "\n" for line in lines))
    typer.echo(f"wrote the {len(lines)} of {len(records)} texts with the most expected entity errors to {output}")
