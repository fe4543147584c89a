"""Pretraining runs as bench/transfer.py and bench/rtd_start.py make them:
`spacy_mlm pretrain` on the benches' raw text, resumed when a session stopped
it, not run again once finished (so runs can be split over sessions and
machines)."""
import json
import os
import shutil
from pathlib import Path

from .common import Stopwatch, write_json


def raw_text_dir(args) -> Path:
    """The pretraining corpus as a directory pretrain reads (JSONL + plain text);
    --quick: the first 300 documents / 600 lines."""
    folder = args.out / "corpus"
    if not folder.is_dir():
        tmp = args.out / "corpus.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for source, name, limit in ((args.wiki, "wiki.jsonl", 300), (args.wikitext, "wikitext_valid.txt", 600)):
            lines = Path(source).read_text(encoding="utf8").splitlines(keepends=True)
            (tmp / name).write_text("".join(lines[:limit] if args.quick else lines), encoding="utf8")
        os.replace(tmp, folder)
    return folder


def run_pretraining(args, settings: dict, output: Path, tokenizer: Path = None) -> dict:
    """`spacy_mlm pretrain` into `output` (resumed if a session stopped it), unless
    an earlier invocation finished it (its output/stats.json, which is all a
    finished run needs besides output/model: pretraining on one machine and
    fine-tuning on another brings back no checkpoints). Its model directory
    (relative to OUT), steps, time and training positions per second."""
    from spacy_mlm import load_pretraining_config, pretrain

    done = output / "stats.json"
    # what the run was asked for, paths aside (they differ between the machines)
    asked = {key: value for key, value in settings.items() if not key.startswith("paths.")}
    if done.exists():
        stats = json.loads(done.read_text(encoding="utf8"))
        if stats["settings"] != asked:
            changed = sorted(key for key in asked.keys() | stats["settings"].keys()
                             if asked.get(key) != stats["settings"].get(key))
            raise SystemExit(f"{done}: that run was pretrained with other settings ({', '.join(changed)}); "
                             "use another --out, or the run's own options")
        print(f"   pretrained earlier: {stats['steps']} steps in {stats['seconds']:.0f} s", flush=True)
        return stats
    if tokenizer is not None and not (output / "tokenizer").exists():
        output.mkdir(parents=True, exist_ok=True)
        shutil.copytree(tokenizer, output / "tokenizer")
    with Stopwatch() as clock:
        model = pretrain(load_pretraining_config(None, settings), output, resume=(output / "checkpoints").is_dir(),
                         quiet=True)
    seconds = clock.seconds
    history = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    steps = history[-1]["step"]
    positions = steps * settings["pretraining.batch_size"] * settings["pretraining.max_length"]
    last_eval = next((row for row in reversed(history) if "eval_loss" in row), {})
    stats = {"model": os.path.relpath(model, args.out), "settings": asked, "steps": steps, "seconds": round(seconds, 1),
             "tokens_per_s": round(positions / seconds, 1),
             **{key: round(value, 4) for key, value in last_eval.items() if key.startswith("eval_")}}
    print(f"   pretrained {steps} steps of {settings['pretraining.batch_size']} x {settings['pretraining.max_length']} "
          f"in {seconds:.0f} s ({stats['tokens_per_s']:.0f} tokens/s, setup included); held-out {last_eval}", flush=True)
    write_json(done, stats)
    return stats
