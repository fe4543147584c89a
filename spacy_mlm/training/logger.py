"""`spacy train`'s console logger, with progress that also shows in a log file.

spaCy's `ConsoleLogger` prints the table of losses and scores at each
evaluation and can show a tqdm bar between them, but it turns the bar off
when stderr is not a terminal, so a run under `nohup`, CI or `spacy project
run | tee` is silent for a whole `eval_frequency`. This logger prints spaCy's
own table (and its JSONL `output_file`) and counts steps with
`spacy_mlm.util.progress.Progress`: a bar on a terminal, a line with the
step, rate and time left every `progress_interval` seconds elsewhere.
"""
import sys
from pathlib import Path
from typing import IO, Any, Callable, Dict, Optional, Tuple, Union

from spacy.language import Language
from spacy.training.loggers import console_logger_v3
from spacy.util import registry

from ..errors import SpacyMlmError
from ..util.progress import DEFAULT_INTERVAL, Progress

PROGRESS_KINDS = ("train", "eval")


@registry.loggers("spacy_mlm.ConsoleLogger.v1")
def make_console_logger(
    progress_bar: Optional[str] = "train",
    progress_interval: float = DEFAULT_INTERVAL,
    console_output: bool = True,
    output_file: Optional[Union[str, Path]] = None,
) -> Callable[..., Tuple[Callable[[Optional[Dict[str, Any]]], None], Callable[[], None]]]:
    """spaCy's `ConsoleLogger.v3` table, with step progress on terminals and in logs.

    progress_bar: "train" (steps of the whole run, up to training.max_steps),
        "eval" (steps to the next evaluation) or null (none).
    progress_interval: seconds between progress lines when stderr is not a terminal.
    console_output, output_file: as for spacy.ConsoleLogger.v3."""
    if progress_bar is not None and progress_bar not in PROGRESS_KINDS:
        raise SpacyMlmError(f"progress_bar must be one of {', '.join(PROGRESS_KINDS)} or null, got {progress_bar!r}")
    table_logger = console_logger_v3(progress_bar=None, console_output=console_output, output_file=output_file)

    def setup(nlp: Language, stdout: IO = sys.stdout, stderr: IO = sys.stderr):
        log_table, finalize_table = table_logger(nlp, stdout, stderr)
        training = nlp.config["training"]
        progress: Optional[Progress] = None

        def log_step(info: Optional[Dict[str, Any]]) -> None:
            nonlocal progress
            if info is None:
                if progress is not None:
                    progress.update()
                return
            if progress is not None:
                progress.update(info["step"] - progress.n)  # the step just evaluated is done too
                progress.close()
            log_table(info)
            if progress_bar is not None and console_output:
                progress = _next_progress(progress_bar, info, training, progress_interval, stderr)

        def finalize() -> None:
            if progress is not None:
                progress.close()
            finalize_table()

        return log_step, finalize

    return setup


def _next_progress(kind: str, info: Dict[str, Any], training: Dict[str, Any], interval: float, stream: IO) -> Progress:
    """The counter from one evaluation to the next (kind "eval") or to the end of training."""
    desc = f"train, epoch {info['epoch']}"
    if kind == "eval":
        return Progress(training["eval_frequency"], desc, "steps", interval=interval, stream=stream)
    total = training["max_steps"] or None  # 0: epochs decide, no known total
    return Progress(total, desc, "steps", initial=info["step"], interval=interval, stream=stream)
