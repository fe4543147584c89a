"""Progress of long work, on a terminal and in a log.

On a terminal a tqdm bar (count, rate, time left) on stderr; anywhere else
(a CI log, `nohup`, a pipe) a bar's carriage returns make one unreadable line,
or tqdm turns itself off, so instead one plain line every `interval` seconds
and one at the end:

    evaluate: 1200/3453 docs (35%), 41.2 docs/s, 0:29 elapsed, 0:55 left

`quiet` shows nothing. Messages written while a bar is shown go through
`Progress.write`, and with `logs_above` log records too, above the bar, never
over it.
"""
import sys
import time
from typing import IO, Iterable, Iterator, Optional, TypeVar

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

T = TypeVar("T")
DEFAULT_INTERVAL = 30.0


def format_duration(seconds: float) -> str:
    """`0:07`, `12:05`, `1:02:03`."""
    seconds = int(round(max(0.0, seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(desc: str, n: int, total: Optional[int], unit: str, elapsed: float, done_here: int) -> str:
    """One progress line: count `n` (and its share of the total), the rate of the
    `done_here` items done in `elapsed` seconds (fewer than `n` after a resume),
    time spent and time left."""
    rate = done_here / elapsed if elapsed > 0 else 0.0
    count = f"{n}/{total} {unit} ({100 * n / total:.0f}%)" if total else f"{n} {unit}"
    parts = [f"{desc}: {count}", f"{rate:.1f} {unit}/s", f"{format_duration(elapsed)} elapsed"]
    if total and rate > 0 and n < total:
        parts.append(f"{format_duration((total - n) / rate)} left")
    return ", ".join(parts)


class Progress:
    """A count of finished work items, shown as a bar or as periodic lines."""

    def __init__(self, total: Optional[int] = None, desc: str = "", unit: str = "it", *, initial: int = 0,
                 quiet: bool = False, interval: float = DEFAULT_INTERVAL, stream: Optional[IO] = None,
                 logs_above: bool = False):
        """logs_above: while the bar is shown, the root logger's console handlers
        write above it (through tqdm.write), until `close`."""
        self.stream = stream if stream is not None else sys.stderr
        self.desc, self.unit, self.total, self.interval = desc, unit, total, float(interval)
        self.quiet = quiet
        self.n = self._start_n = self._shown_n = initial
        self.postfix = ""
        self._start = self._last = time.monotonic()
        self._bar = self._redirect = None
        if not quiet and _is_terminal(self.stream):
            self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=self.stream, dynamic_ncols=True)
            if logs_above:
                self._redirect = logging_redirect_tqdm()
                self._redirect.__enter__()

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
        elif not self.quiet and time.monotonic() - self._last >= self.interval:
            self._print_line()

    def set_postfix(self, text: str) -> None:
        """Shown after the count (e.g. the current loss)."""
        self.postfix = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def write(self, message: str) -> None:
        """A message above the bar (or just a line), unless quiet."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar, self._shown_n = None, self.n
            if self._redirect is not None:
                self._redirect.__exit__(None, None, None)
                self._redirect = None
        elif not self.quiet and self.n != self._shown_n:
            self._print_line()

    def _print_line(self) -> None:
        now = time.monotonic()
        self._last, self._shown_n = now, self.n
        line = progress_line(self.desc, self.n, self.total, self.unit, now - self._start, self.n - self._start_n)
        if self.postfix:
            line = f"{line}, {self.postfix}"
        print(line, file=self.stream, flush=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def track(items: Iterable[T], total: Optional[int] = None, desc: str = "", unit: str = "it", *,
          quiet: bool = False, interval: float = DEFAULT_INTERVAL) -> Iterator[T]:
    """Yield `items`, counting each one as done when the next is asked for."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(total, desc, unit, quiet=quiet, interval=interval) as progress:
        for item in items:
            yield item
            progress.update()


def _is_terminal(stream: IO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
