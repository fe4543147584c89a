"""Memory bounded by the input, not by its longest line: corpus readers cut a
long line into segments of at most `MAX_SEGMENT_CHARS` characters before any
tokenizer sees it, and `tokenize_documents` hands the tokenizer bounded chunks."""
import json
import os
import random
import subprocess
import sys

import numpy as np

from spacy_mlm.pretraining.data import tokenize_documents
from spacy_mlm.readers.common import MAX_SEGMENT_CHARS, bounded_segments
from spacy_mlm.readers.corpus import read_corpus
from spacy_mlm.testing import SAMPLE_TEXT

# One interpreter imports the libraries once (seconds), then tokenizes each file in
# a child forked from it, so that each file starts from the same heap, as in a fresh
# process. The child's peak RSS is reset to its current RSS before it tokenizes
# (`5` to /proc/self/clear_refs): at the fork it is the parent's RSS, pages the
# child has not touched yet included.
PEAKS_OF_TOKENIZING = """
import json, os, resource, sys
from transformers import AutoTokenizer
from spacy_mlm.pretraining.data import tokenize_documents
from spacy_mlm.readers.corpus import read_corpus
peaks = {}
for path in sys.argv[2:]:
    read, write = os.pipe()
    if os.fork() == 0:
        tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        pieces = sum(len(s[0]) for d in tokenize_documents(tokenizer, read_corpus(path)) for s in d)
        os.write(write, json.dumps([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, pieces]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as child:
        peaks[os.path.basename(path)] = json.loads(child.read())
    assert os.waitstatus_to_exitcode(os.wait()[1]) == 0
print(json.dumps(peaks))
"""


def test_a_long_single_line_takes_no_more_memory_than_the_same_text_in_lines(tmp_path, tiny_model_dir):
    """Before: a 1.8 MB line grew the process by 262 MB, the same text in lines by 35 MB."""
    rng = random.Random(0)
    sentences = [rng.choice(SAMPLE_TEXT) for _ in range(40_000)]  # 1.8 MB
    (tmp_path / "lines.txt").write_text("\n".join(sentences) + "\n", encoding="utf8")
    (tmp_path / "one_line.txt").write_text(" ".join(sentences) + "\n", encoding="utf8")
    done = subprocess.run([sys.executable, "-c", PEAKS_OF_TOKENIZING, str(tiny_model_dir), str(tmp_path / "lines.txt"),
                           str(tmp_path / "one_line.txt")],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    peaks = json.loads(done.stdout.strip().splitlines()[-1])
    assert peaks["lines.txt"][1] == peaks["one_line.txt"][1]  # the same pieces
    assert peaks["one_line.txt"][0] <= 1.25 * peaks["lines.txt"][0], peaks


def test_a_line_that_fits_is_read_as_before_and_a_long_one_gives_the_same_pieces(tmp_path, tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    fits = " ".join(SAMPLE_TEXT)
    assert len(fits) < MAX_SEGMENT_CHARS and bounded_segments(f"  {fits} ") == [fits]
    long_line = " ".join(SAMPLE_TEXT * 60)
    (tmp_path / "c.txt").write_text(f"{fits}\n{long_line}\n\nsecond document\n", encoding="utf8")
    (tmp_path / "c.jsonl").write_text(f'{{"text": "{fits}\\n{long_line}"}}\n{{"text": "second document"}}\n',
                                      encoding="utf8")
    for name in ("c.txt", "c.jsonl"):
        documents = read_corpus(tmp_path / name)
        assert documents[0][0] == fits and documents[1] == ["second document"]
        cut = documents[0][1:]
        assert len(cut) > 1 and max(map(len, cut)) <= MAX_SEGMENT_CHARS and " ".join(cut) == long_line
        whole = tokenize_documents(tokenizer, [[long_line]])[0][0]
        pieces = tokenize_documents(tokenizer, [cut])[0]
        np.testing.assert_array_equal(np.concatenate([p[0] for p in pieces]), whole[0])
        np.testing.assert_array_equal(np.concatenate([p[1] for p in pieces]), whole[1])


def test_a_word_longer_than_the_limit_is_cut_inside_it():
    assert bounded_segments("ab " + "x" * 25 + " cd", limit=10) == ["ab", "x" * 10, "x" * 10, "x" * 5 + " cd"]
