"""`--precision` of bench/ner_conll.py and bench/classify.py: which precision
each system trains (and predicts) in, and the training-time ratios that follow.

Every system that has bf16 runs at each precision asked for: ours (the
encoder's `precision = "bf16"`, torch autocast over the transformer's forward)
and Hugging Face (autocast over forward and loss, as `Trainer(bf16=True)` does
on a CPU: its "cpu_amp" backend). spacy-transformers has no bf16 on a CPU (its
`mixed_precision` is CUDA's autocast with a grad scaler), so it runs fp32 only,
and the output says so. `--precision default` (the default) runs every system
at its own default: ours at what `init-config` writes on this machine (bf16
where the CPU multiplies bfloat16 natively), the peers at fp32 (what `Trainer`
and `spacy train` do unless told otherwise).

A run is named `<system>_<precision>` (ours_bf16, hf_fp32, ...): the JSON keys
`<run>_train_s` and the others are per system and precision.
"""
from typing import Dict, List, Tuple

from spacy_mlm import precision_setting

PRECISIONS = ("fp32", "bf16")
DEFAULT = "default"
FP32_ONLY = {"spacy_trf": "spacy-transformers' mixed precision is CUDA-only, so it trains in fp32 on a CPU"}


def add_precision_option(parser) -> None:
    parser.add_argument(
        "--precision", default=DEFAULT,
        help="fp32, bf16 or both (fp32,bf16): each system that has it trains at each (spacy_trf: fp32 only); "
             "default: each system at its own default (ours: what init-config writes here; peers: fp32)",
    )


def precision_runs(systems: List[str], requested: str, ours: Tuple[str, ...]) -> List[Tuple[str, str, str]]:
    """(run name, system, precision) for each system in `systems` at each precision
    of `requested`, in that order; `ours` names our systems (the others are peers)."""
    if requested == DEFAULT:
        chosen = None
    else:
        chosen = [p for p in requested.split(",") if p]
        if not chosen or any(p not in PRECISIONS for p in chosen) or len(set(chosen)) < len(chosen):
            raise SystemExit(f"--precision takes {DEFAULT} or a list of {', '.join(PRECISIONS)}, got {requested!r}")
    runs = []
    for system in systems:
        # ours at init-config's choice for this machine, a peer at fp32
        default = precision_setting().precision if system in ours else "fp32"
        wanted = [default] if chosen is None else chosen
        if system in FP32_ONLY and wanted != ["fp32"]:
            print(f"note: {system} runs fp32 only: {FP32_ONLY[system]}", flush=True)
            wanted = ["fp32"]
        runs += [(f"{system}_{precision}", system, precision) for precision in wanted]
    return runs


def split_run(run: str) -> Tuple[str, str]:
    """(system, precision) of a run's name; a name without a precision (an earlier
    run's, joined) is that system at fp32."""
    system, _, precision = run.rpartition("_")
    return (system, precision) if precision in PRECISIONS else (run, "fp32")


def train_speedups(train_s: Dict[str, float], ours: Tuple[str, ...]) -> Dict[str, float]:
    """For each of our runs: the fastest fp32 peer's training seconds over its own
    (`<run>_train_speedup`) and the fastest bf16 peer's (`<run>_train_speedup_vs_bf16_peer`)."""
    out = {}
    for baseline, suffix in (("fp32", "train_speedup"), ("bf16", "train_speedup_vs_bf16_peer")):
        peers = [s for run, s in train_s.items() if split_run(run)[0] not in ours and split_run(run)[1] == baseline]
        for run, seconds in train_s.items():
            if peers and split_run(run)[0] in ours:
                out[f"{run}_{suffix}"] = round(min(peers) / seconds, 3)
    return out
