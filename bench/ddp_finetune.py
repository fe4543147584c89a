"""Data-parallel fine-tuning: MiniLM NER on CoNLL-2003 train with `spacy_mlm train`
on 1 process of 1 thread, 1 process of 2 threads and, under torchrun, 2 processes
of 1 thread each, run in turn with the same budget in examples.

Every run is configs/ner.cfg (softmax tagger) on a fixed seeded subsample of
CoNLL train sentences, the same global batch of `--batch-size` sentences per
step and `--steps` steps (2 processes take half of each batch each). Train
seconds are the wall time between the start of step 1 and the start of the
last step (after the step-0 evaluation spaCy always runs, before the final
save), read from a `before_update` callback on the first process; dev F1 is
`nlp.evaluate` of each run's model-last on the dev sentences. 2 processes reach
the weights of 1 (tests/training/test_distributed.py), so their F1 should
differ only within the spread of seeds.

    python bench/ddp_finetune.py                 # 3 seeds, ~20 min on an idle 2-core CPU (~24 min with 2proc_independent, ~28 with 2proc_collectives)
    python bench/ddp_finetune.py --quick         # 5 steps, 1 seed: ~2 min idle (5 min on a loaded 2-core box)

Needs an otherwise idle machine for the timings: the runs compete for the
same cores with anything else running. `--runs` adds 2proc_collectives (2
processes summing with gloo's all-reduce, `--no-shared-memory`, as they would
between machines) and 2proc_independent: two plain runs at once, each with half
the batch and nothing exchanged, the time (the slower one's) no data-parallel run
can beat on this machine; its speedup_ceiling shows what two cores give this
work when both are busy (on a VM whose two vCPUs slow each other down, well
under 2). `--precision bf16` runs every run in bf16 (default: configs/ner.cfg's
fp32). Last line: one JSON object with train_s_<run> for each run (means over
seeds), speedup (1 process of 1 thread / 2 processes), speedup_vs_threads (1
process of 2 threads / 2 processes), speedup_collectives and speedup_ceiling
(with those runs), f1_<run> (means), and per-seed lists.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import spacy
import spacy_mlm
from spacy.tokens import DocBin
from spacy.training import Example

from harness import ner
from harness.common import REPO, BenchParser, print_result

# Registered in every training process (`--code`): the first process appends
# "step wall-time" at the start of each step.
STEP_CLOCK = '''
import os, time
from spacy.util import registry

@registry.callbacks("bench.step_clock.v1")
def make_step_clock(path: str):
    def before_update(nlp, info):
        if os.environ.get("RANK", "0") == "0":
            with open(path, "a") as out:
                out.write(f"{info['step']} {time.perf_counter()}\\n")
    return before_update
'''

RUNS = {  # name: (processes, threads per process, extra options of spacy_mlm train)
    "1proc": (1, 1, []),
    "1proc_2threads": (1, 2, []),
    "2proc": (2, 1, []),  # on one machine's CPUs: gradients and weights through shared memory
    "2proc_collectives": (2, 1, ["--no-shared-memory"]),  # gloo's all-reduce instead (as between machines)
    # Two plain runs at once, each taking half the batch and talking to no one: the work of one 2proc
    # process with nothing exchanged, so the bound on what any data-parallel run reaches on this machine.
    "2proc_independent": (2, 1, []),
}
INDEPENDENT = {"2proc_independent"}
DEFAULT_RUNS = "1proc,1proc_2threads,2proc"


def write_sentences(source: str, out: Path, limit: int, seed: int) -> None:
    DocBin(docs=ner.load_sentences(source, spacy.blank("en").vocab, limit, seed)).to_disk(out)


def train_command(output: Path, clock: Path, batch_size: int, work: Path, seed: int, args) -> list:
    """The options of `spacy_mlm train` for one run: configs/ner.cfg on the bench's data and budget."""
    return [
        "-m", "spacy_mlm", "train", str(REPO / "configs" / "ner.cfg"), "--output", str(output),
        "--code", str(work / "step_clock.py"),
        "--paths.encoder", args.model,
        "--paths.train", str(work / "train.spacy"), "--paths.dev", str(work / "dev.spacy"),
        "--system.seed", str(seed), "--training.max_steps", str(args.steps), "--training.max_epochs", "0",
        "--training.eval_frequency", str(args.steps + 1), "--training.batcher.size", str(batch_size),
        "--training.optimizer.learn_rate.warmup_steps", str(max(1, args.steps // 10)),
        "--training.optimizer.learn_rate.initial_rate", str(args.lr),
        "--training.logger.progress_bar", "null",
        "--training.before_update", json.dumps({"@callbacks": "bench.step_clock.v1", "path": str(clock)}),
        "--components.encoder.model.precision", args.precision,
    ]


def train_seconds(clock: Path, steps: int) -> float:
    times = dict(line.split() for line in clock.read_text().splitlines())
    return float(times[str(steps)]) - float(times["1"])


def train(run: str, work: Path, seed: int, args) -> dict:
    """One run: its train seconds and (but for the independent pair, whose halves are
    not one model) the dev F1 of its model-last."""
    processes, threads, options = RUNS[run]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false")
    name = f"{run}-seed{seed}"
    if run in INDEPENDENT:
        clocks = [work / f"{name}-{i}.steps" for i in range(processes)]
        started = [
            subprocess.Popen([sys.executable] + train_command(
                work / f"{name}-{i}", clock, args.batch_size // processes, work, seed, args) + options,
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for i, clock in enumerate(clocks)
        ]
        for process in started:
            _, stderr = process.communicate()
            if process.returncode != 0:
                sys.exit(f"{run} (seed {seed}) failed:\n{stderr[-3000:]}")
        # a data-parallel step waits for the slower process
        train_s = max(train_seconds(clock, args.steps) for clock in clocks)
        print(f"{run} seed {seed}: {train_s:.1f} s for steps 1-{args.steps - 1}", file=sys.stderr)
        return {"train_s": train_s}
    output, clock = work / name, work / f"{name}.steps"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
    command = (launcher if processes > 1 else [sys.executable]) + train_command(
        output, clock, args.batch_size, work, seed, args) + options
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{run} (seed {seed}) failed:\n{done.stderr[-3000:]}")
    train_s = train_seconds(clock, args.steps)
    nlp = spacy.load(output / "model-last")
    dev = [Example(nlp.make_doc(doc.text), doc) for doc in DocBin().from_disk(work / "dev.spacy").get_docs(nlp.vocab)]
    f1 = nlp.evaluate(dev)["ents_f"]
    print(f"{run} seed {seed}: {train_s:.1f} s for steps 1-{args.steps - 1}, dev F1 {f1:.4f}", file=sys.stderr)
    return {"train_s": train_s, "f1": f1}


def main():
    parser = BenchParser(__doc__)
    ner.add_data_options(parser, n_dev=1000)
    parser.add_argument("--steps", type=int, default=250, help="optimizer steps (the budget: steps x batch size)")
    parser.add_argument("--batch-size", type=int, default=16, help="sentences per step, over all processes")
    parser.lr(5e-5)
    parser.seeds([0, 1, 2])
    parser.add_argument("--runs", default=DEFAULT_RUNS,
                        help=f"which runs, in turn, of {', '.join(RUNS)} (speedup needs 1proc and 2proc)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="the encoder's precision in every run (default: configs/ner.cfg's, fp32)")
    parser.quick("5 steps of 8 sentences, 40 dev sentences, seed 0 (unless --seed(s) given)")
    args = parser.parse_args()
    runs = args.runs.split(",")
    if not set(runs) <= set(RUNS) or not {"1proc", "2proc"} <= set(runs):
        parser.error(f"--runs: a choice of {', '.join(RUNS)} with 1proc and 2proc among them")
    if args.quick:
        args.n_train, args.n_dev, args.steps, args.batch_size = 80, 40, 5, 8
        if args.seed is None and args.seeds is None:
            args.seed_list = [0]
    seeds = args.seed_list
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_sentences(args.train, work / "train.spacy", args.n_train, 0)
        write_sentences(args.dev, work / "dev.spacy", args.n_dev, 0)
        (work / "step_clock.py").write_text(STEP_CLOCK)
        results = {run: [] for run in runs}
        for seed in seeds:  # each seed's runs in turn, so that a change of load falls on all alike
            for run in runs:
                results[run].append(train(run, work, seed, args))
    mean = {run: {k: statistics.mean(r[k] for r in rows) for k in rows[0]} for run, rows in results.items()}
    summary = {f"train_s_{run}": round(mean[run]["train_s"], 2) for run in runs}
    summary["speedup"] = round(mean["1proc"]["train_s"] / mean["2proc"]["train_s"], 3)
    if "1proc_2threads" in mean:
        summary["speedup_vs_threads"] = round(mean["1proc_2threads"]["train_s"] / mean["2proc"]["train_s"], 3)
    if "2proc_collectives" in mean:
        summary["speedup_collectives"] = round(mean["1proc"]["train_s"] / mean["2proc_collectives"]["train_s"], 3)
    if "2proc_independent" in mean:
        summary["speedup_ceiling"] = round(mean["1proc"]["train_s"] / mean["2proc_independent"]["train_s"], 3)
    summary.update({f"f1_{run}": round(mean[run]["f1"], 4) for run in runs if run not in INDEPENDENT})
    summary.update({
        "per_seed": {run: [{k: round(v, 4) for k, v in r.items()} for r in rows] for run, rows in results.items()},
        "seeds": seeds, "steps": args.steps, "batch_size": args.batch_size, "n_train": args.n_train,
        "n_dev": args.n_dev, "precision": args.precision, "cpu_count": os.cpu_count(),
    })
    print_result(summary)


if __name__ == "__main__":
    main()
