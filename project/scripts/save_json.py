"""Run a command, show its output, and save the JSON object it prints last.

spaCy project commands run without a shell (no `> file`), and the spacy_mlm
commands that report figures (`wic`, `compare`) end their output with one JSON
line, so this keeps that line as a metrics file for later steps. A
`python -m MODULE` command runs in this process, which has imported spacy_mlm
already (one interpreter start instead of two).

    python scripts/save_json.py metrics/wic.json python -m spacy_mlm wic MODEL DATA
"""
import contextlib
import io
import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Tuple

from spacy_mlm.util.io import atomic_write_text


def run_module(argv) -> Tuple[int, str]:
    """`python -m MODULE ARGS` (argv: MODULE ARGS) run in this process: its
    exit status and what it printed."""
    sys.argv = list(argv)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
            status = 0
        except SystemExit as err:
            if err.code is not None and not isinstance(err.code, int):
                print(err.code, file=sys.stderr)
            status = err.code if isinstance(err.code, int) else 0 if err.code is None else 1
    return status, printed.getvalue()


def main(output: str, command) -> int:
    if command[:2] in (["python", "-m"], ["python3", "-m"]):
        returncode, stdout = run_module(command[2:])
    else:
        if command and command[0] in ("python", "python3"):
            command = [sys.executable] + command[1:]
        proc = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        returncode, stdout = proc.returncode, proc.stdout
    sys.stdout.write(stdout)
    if returncode:
        return returncode
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        print(f"error: the command's last line is not JSON: {lines[-1:] or 'no output'}", file=sys.stderr)
        return 1
    atomic_write_text(Path(output), json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
