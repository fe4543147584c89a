"""How every command's failure reaches the user: one `error: ...` line on
stderr and a non-zero exit status, the same for all commands.

The commands themselves catch nothing: a `SpacyMlmError` (a bad data file or
model, with the file and line in its message), a missing file (`OSError`), a
bad option or argument (typer's usage errors), a spaCy config that does not
validate, or a bug, all propagate to `CommandGroup.main`, which prints them.
A traceback is printed only with `--verbose` (accepted anywhere on the
command line), so a user sees what to fix, and a developer can still see
where it came from.
"""
import sys
from typing import List, Optional, Sequence, Tuple

import typer
from thinc.api import ConfigValidationError
# typer carries its own copy of click; its errors are these classes, not click's
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer.core import TyperGroup
from typer.exceptions import Abort

from ..errors import SpacyMlmError

VERBOSE = "--verbose"


def one_line(text: str) -> str:
    """A message on one line: its lines joined with "; ", blank ones dropped."""
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def describe_failure(err: BaseException) -> str:
    """The `error: ...` line for an exception that ended a command."""
    if isinstance(err, ConfigValidationError):
        problems = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in err.errors or ())
        return f"error: {err.title or 'invalid config'}{': ' + problems if problems else ''}"
    if isinstance(err, UsageError):
        hint = f" (see '{err.ctx.command_path} --help')" if err.ctx is not None else ""
        return f"error: {one_line(err.format_message())}{hint}"
    if isinstance(err, ClickException):
        return f"error: {one_line(err.format_message())}"
    if isinstance(err, (SpacyMlmError, OSError)):
        return f"error: {one_line(err)}"
    return f"error: {type(err).__name__}: {one_line(err)} (an internal error; rerun with {VERBOSE} for the traceback)"


def split_verbose(args: Sequence[str]) -> Tuple[List[str], bool]:
    """The arguments without `--verbose` (before a `--`), and whether it was there."""
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    kept = [arg for arg in args[:end] if arg != VERBOSE] + args[end:]
    return kept, len(kept) != len(args)


class CommandGroup(TyperGroup):
    """The `spacy_mlm` command group: typer's own handling, except that a
    failure is one `error: ...` line (traceback only with `--verbose`)."""

    def main(self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None,
             complete_var: Optional[str] = None, standalone_mode: bool = True, **extra):
        args, verbose = split_verbose(sys.argv[1:] if args is None else args)
        if not standalone_mode:  # a caller that handles failures itself
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as err:
            err.show()
            sys.exit(err.exit_code)
        except Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        except Exception as err:  # noqa: BLE001 - every failure is reported the same way
            if verbose:
                raise
            typer.echo(describe_failure(err), err=True)
            sys.exit(err.exit_code if isinstance(err, ClickException) else 1)
        # typer returns the exit status of typer.Exit(n), and the command's return value (None) otherwise
        sys.exit(status if isinstance(status, int) else 0)
