"""`python -m spacy train ...` that stops at one point of one checkpoint save, for
test_train_interruption: the test sends the real SIGKILL from outside.

    python train_with_pause.py POINT SAVE RECORD_DIR train CONFIG --output OUT ...

POINT: `model-last` = in save number SAVE of model-last, just before the
mlm_textcat component is written (the encoder of that save is already written);
`model-best` = while spaCy copies that save to model-best, before the middle file.
Each finished `nlp.to_disk` leaves RECORD_DIR/save-<n>.json (sha256 of every
file it wrote); reaching POINT writes RECORD_DIR/paused, then the process sleeps.
"""
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path


def fingerprint(path: Path) -> dict:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*"))
            if p.is_file()}


def pause(record: Path) -> None:
    (record / "paused").write_text("paused")
    while True:
        time.sleep(60)


def main() -> None:
    point, save, record, args = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
    from spacy.cli import setup_cli
    from spacy.language import Language

    from spacy_mlm.pipeline.textcat import MLMTextCategorizer

    saves = []
    language_to_disk = Language.to_disk

    def recorded_to_disk(self, path, *, exclude=tuple()):
        language_to_disk(self, path, exclude=exclude)
        saves.append(path)
        (record / f"save-{len(saves)}.json").write_text(json.dumps(fingerprint(Path(path))))

    Language.to_disk = recorded_to_disk
    if point == "model-last":
        textcat_to_disk = MLMTextCategorizer.to_disk

        def paused_to_disk(self, path, *, exclude=tuple()):
            if len(saves) + 1 == save:
                pause(record)
            textcat_to_disk(self, path, exclude=exclude)

        MLMTextCategorizer.to_disk = paused_to_disk
    elif point == "model-best":
        copyfile = shutil.copyfile
        copied = []

        def paused_copyfile(src, dst, *a, **kw):
            if len(saves) == save and "model-best" in Path(dst).parts:
                copied.append(dst)
                if len(copied) > len(json.loads((record / f"save-{save}.json").read_text())) // 2:
                    pause(record)
            return copyfile(src, dst, *a, **kw)

        shutil.copyfile = paused_copyfile
    else:
        raise SystemExit(f"unknown POINT {point!r}")
    sys.argv = ["spacy", *args]
    setup_cli()


if __name__ == "__main__":
    main()
