"""Run a command, show its output, and save the JSON object it prints last.

spaCy project commands run without a shell (no `> file`), and the spacy_mlm
commands that report figures (`wic`, `compare`) end their output with one JSON
line, so this keeps that line as a metrics file for later steps.

    python scripts/save_json.py metrics/wic.json python -m spacy_mlm wic MODEL DATA
"""
import json
import subprocess
import sys
from pathlib import Path

from spacy_mlm.util.io import atomic_write_text


def main(output: str, command) -> int:
    if command and command[0] in ("python", "python3"):
        command = [sys.executable] + command[1:]
    proc = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode:
        return proc.returncode
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        print(f"error: the command's last line is not JSON: {lines[-1:] or 'no output'}", file=sys.stderr)
        return 1
    atomic_write_text(Path(output), json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
