"""Every command's --help renders whole at 80 columns: no line wider, nothing
cut off ("..." / "…"), nothing eaten as markup ("[pretraining]",
"[default: ...]"), and every argument and option has a help text."""
import pytest
import typer
from typer.testing import CliRunner

from spacy_mlm.cli import app

COMMANDS = sorted(typer.main.get_command(app).commands)


def render(args):
    result = CliRunner().invoke(app, [*args, "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def test_the_command_list_fits_without_cutting_summaries():
    text = render([])
    for name in COMMANDS:
        line = next(line for line in text.splitlines() if line.strip().startswith(name + " "))
        assert not line.rstrip().endswith(("...", "…")), line
    assert all(len(line) <= 80 for line in text.splitlines())


@pytest.mark.parametrize("name", COMMANDS)
def test_help_fits_80_columns_and_every_parameter_has_help(name):
    text = render([name])
    too_wide = [line for line in text.splitlines() if len(line) > 80]
    assert not too_wide, too_wide
    assert "…" not in text
    command = typer.main.get_command(app).commands[name]
    missing = [p.name for p in command.params if p.name != "help" and not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"{name}: no help for {missing}"


def test_square_brackets_survive():
    assert "config file with a [pretraining] section" in " ".join(render(["pretrain"]).split())
    assert "[default: -1 or the saved setting]" in " ".join(render(["wic"]).split())


@pytest.mark.parametrize("name", ["evaluate", "evaluate-ner", "compare", "wic", "fit-transform", "pretrain",
                                  "encode", "debug-data"])
def test_commands_that_predict_or_train_take_gpu_id(name):
    assert "--gpu-id" in render([name])


@pytest.mark.parametrize("name", ["evaluate", "evaluate-ner", "compare", "wic", "fit-transform", "pretrain",
                                  "convert-conll"])
def test_long_commands_can_be_quiet(name):
    assert "--quiet" in render([name])
