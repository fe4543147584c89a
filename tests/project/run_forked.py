"""`python -m spacy project run ARGS...` with each `python ...` command of the
workflow run in a forked copy of this process instead of a new interpreter.

    python tests/project/run_forked.py all PROJECT_DIR --vars.x=1 ...

Why: every command of the project is a fresh Python that spends ~10 s of CPU
importing torch, spaCy and transformers before it does a second of work on the
tiny test budgets, and the workflow runs 14 of them. Here those third-party
libraries are imported once, before spaCy's CLI starts, and each command runs
in a child forked from that state: its own process (its exit status, output,
global state and atexit handlers are its own, as before), with weasel deciding
what runs, in which order and with which variables, exactly as
`spacy project run` does. spacy_mlm's modules are NOT imported before the fork
(checked below; srsly's entry point loads the light msgpack codec module in any
process that uses msgpack, as it would in a new interpreter): each command
imports them afresh and finds spaCy's registered names through the package's
entry points, as a new interpreter would.
Commands that are not `python ...` (rm, mkdir) and the processes the commands
start themselves (pip, check_package.py's clean interpreters) run as before.
"""
import atexit
import os
import runpy
import sys
import traceback

# The expensive third-party imports every command of the project makes
# (spaCy and thinc with torch, transformers' auto classes with what they pull in).
import spacy  # noqa: F401
import thinc.api  # noqa: F401
import torch  # noqa: F401
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer  # noqa: F401
from weasel.cli import run as weasel_run


def exit_code(err: SystemExit) -> int:
    """The status a Python process ends with after `sys.exit(err.code)`."""
    if err.code is None:
        return 0
    if isinstance(err.code, int):
        return err.code
    print(err.code, file=sys.stderr)
    return 1


def run_python(argv) -> int:
    """Run `python -m MODULE ARGS` or `python SCRIPT ARGS` (argv without the
    interpreter) in this process, as a new interpreter would; return its status."""
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
        return 0
    except SystemExit as err:
        return exit_code(err)
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to a process
        traceback.print_exc()
        return 1


# what srsly's msgpack entry point (setup.py) imports in every process that packs or unpacks msgpack
SRSLY_ENTRY_POINT_MODULES = {"spacy_mlm", "spacy_mlm.models", "spacy_mlm.models.encoding_codec"}


def run_command(command, *, stdin=None, capture=False):
    """weasel's run_command, with `python ...` forked rather than started."""
    if stdin is not None or capture or command[0] != sys.executable or command[1:2] == ["-c"]:
        return original_run_command(command, stdin=stdin, capture=capture)
    loaded = {name for name in sys.modules if name.split(".")[0] == "spacy_mlm"} - SRSLY_ENTRY_POINT_MODULES
    assert not loaded, f"spacy_mlm must be imported by each command, not before the fork: {sorted(loaded)}"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the command's process
        status = run_python(command[1:])
        try:
            atexit._run_exitfuncs()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status != 0:
        sys.exit(status)  # what weasel's run_command does when a command fails


original_run_command = weasel_run.run_command
weasel_run.run_command = run_command

if __name__ == "__main__":
    from spacy.cli import setup_cli

    sys.argv = ["spacy", "project", "run", *sys.argv[1:]]
    setup_cli()
