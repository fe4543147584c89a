"""Progress: a bar on a terminal; elsewhere one line per interval and one at
the end, with count, share, rate and time left; nothing when quiet."""
import io

from spacy_mlm.util.progress import Progress, format_duration, progress_line, track


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_line_counts_rate_and_time_left():
    line = progress_line("evaluate", 50, 200, "docs", elapsed=10.0, done_here=50)
    assert line == "evaluate: 50/200 docs (25%), 5.0 docs/s, 0:10 elapsed, 0:30 left"
    assert progress_line("fit", 7, None, "docs", elapsed=2.0, done_here=7) == "fit: 7 docs, 3.5 docs/s, 0:02 elapsed"
    # resumed at 600: the rate is of the steps done in this run
    assert progress_line("pretrain", 700, 1000, "steps", 50.0, 100).endswith("2.0 steps/s, 0:50 elapsed, 2:30 left")


def test_format_duration():
    assert [format_duration(s) for s in (0, 7.4, 725, 3723)] == ["0:00", "0:07", "12:05", "1:02:03"]


def test_lines_when_not_a_terminal_and_a_last_one_at_the_end():
    out = io.StringIO()
    with Progress(3, "convert", "docs", interval=0, stream=out) as progress:
        for _ in range(3):
            progress.update()
        progress.write("a message")
    lines = out.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "convert: 1/3 docs (33%)", "convert: 2/3 docs (67%)", "convert: 3/3 docs (100%)", "a message"]
    assert "\r" not in out.getvalue()


def test_long_interval_prints_only_the_final_line():
    out = io.StringIO()
    with Progress(None, "fit", "docs", interval=3600, stream=out) as progress:
        progress.update(5)
    assert out.getvalue().startswith("fit: 5 docs, ") and out.getvalue().count("\n") == 1


def test_quiet_prints_nothing():
    out = io.StringIO()
    with Progress(3, "x", quiet=True, interval=0, stream=out) as progress:
        progress.update()
        progress.write("hidden")
    assert out.getvalue() == ""


def test_a_terminal_gets_a_bar_and_messages_above_it():
    out = Terminal()
    with Progress(4, "pretrain", "steps", stream=out) as progress:
        progress.update(2)
        progress.write("step 2 loss=1.0")
    text = out.getvalue()
    assert "\r" in text and "2/4" in text and "step 2 loss=1.0\n" in text


def test_track_yields_everything():
    assert list(track(range(4), desc="x", quiet=True)) == [0, 1, 2, 3]
