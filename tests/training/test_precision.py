"""The precision init-config writes: bf16 where this machine runs bfloat16 faster
than fp32 (a CPU with AMX, a GPU from Ampere on), fp32 elsewhere, the reason next to the setting, a warning where an
asked-for bf16 would be emulated, and a clear refusal of a precision that does
not exist (at init-config and in a config)."""
import pytest
import spacy
from thinc.api import Config
from typer.testing import CliRunner

from spacy_mlm.cli import app
from spacy_mlm.errors import SpacyMlmError
from spacy_mlm.training import precision as precision_module
from spacy_mlm.training.precision import choose_precision


@pytest.mark.parametrize("gpu,fast,expected,because", [
    (False, True, "bf16", "CPU has AMX, where bfloat16 trains faster than fp32"),
    (False, False, "fp32", "CPU has no AMX: bf16 would run slower than fp32"),
    (True, True, "bf16", "GPU multiplies bfloat16 natively"),
    (True, False, "fp32", "GPU has no native bfloat16 (before Ampere)"),
    (True, None, "fp32", "no CUDA GPU was visible"),
])
def test_auto_is_bf16_only_where_the_hardware_makes_it_faster(gpu, fast, expected, because):
    choice = choose_precision("auto", gpu=gpu, fast_bf16=fast)
    assert choice.precision == expected and because in choice.reason and choice.warning is None


def test_an_explicit_precision_is_kept_and_a_slow_bf16_warns_why():
    for fast in (True, False, None):
        fp32 = choose_precision("fp32", gpu=False, fast_bf16=fast)
        assert (fp32.precision, fp32.warning) == ("fp32", None)
        # the reason does not depend on the machine: configs/ are written with --precision fp32
        assert fp32.reason == choose_precision("fp32", gpu=False, fast_bf16=True).reason
    assert choose_precision("bf16", gpu=False, fast_bf16=True).warning is None
    slow = choose_precision("bf16", gpu=False, fast_bf16=False, slow_note="this CPU (AMD EPYC 7B13) is slow at it")
    assert slow.precision == "bf16" and "this CPU (AMD EPYC 7B13) is slow at it" in slow.warning  # where, how slow


def test_the_slow_bf16_note_names_the_cpu_and_the_measured_cost(monkeypatch):
    from spacy_mlm.util import machine

    for flags, cost in (("avx2 fma", "a fifth of fp32's words/s"), ("avx2 avx512f avx512_bf16", "0.64x")):
        monkeypatch.setattr(machine, "_cpuinfo", lambda: {"model name": "Some CPU 9000", "flags": flags})
        note = machine.slow_bf16_note()
        assert "this CPU (Some CPU 9000)" in note and cost in note


def test_an_unknown_precision_is_refused_by_name():
    with pytest.raises(SpacyMlmError, match=r"--precision must be one of auto, fp32, bf16, got 'int8' \(int8 is for"):
        choose_precision("int8", gpu=False, fast_bf16=True)


@pytest.mark.parametrize("fast,flags,expected,warns", [
    (True, [], "bf16", False),
    (False, [], "fp32", False),
    (False, ["--precision", "bf16"], "bf16", True),
    (True, ["--precision", "fp32"], "fp32", False),
])
def test_init_config_writes_the_choice_and_its_reason(tiny_model_dir, tmp_path, monkeypatch, fast, flags,
                                                      expected, warns):
    monkeypatch.setattr(precision_module, "machine_bf16_is_faster", lambda gpu: fast)
    path = tmp_path / "ner.cfg"
    result = CliRunner().invoke(app, ["init-config", str(path), "--task", "ner", "--encoder", str(tiny_model_dir),
                                      *flags])
    assert result.exit_code == 0, result.output
    assert ("warning: --precision bf16, but this CPU (" in result.output) == warns
    text = path.read_text(encoding="utf8")
    config = Config().from_str(text, interpolate=False)
    assert config["components"]["encoder"]["model"]["precision"] == expected
    setting = text.index(f'\nprecision = "{expected}"')
    reason = text.rfind("\n# Here ", 0, setting)
    assert reason != -1 and text[reason + len("\n# Here "):].startswith(f"{expected}, ")
    if not flags:
        assert "chosen by init-config" in text[reason:setting]


def test_init_config_refuses_an_unknown_precision(tiny_model_dir, tmp_path):
    path = tmp_path / "x.cfg"
    result = CliRunner().invoke(app, ["init-config", str(path), "--task", "ner", "--encoder", str(tiny_model_dir),
                                      "--precision", "fp16"])
    assert result.exit_code != 0 and "--precision must be one of auto, fp32, bf16, got 'fp16'" in result.output
    assert not path.exists()


def test_a_config_with_an_unknown_precision_names_it(tiny_model_dir):
    from spacy_mlm.training.config_templates import render_pipeline_config

    text = render_pipeline_config("ner", str(tiny_model_dir), precision="fp32")
    config = Config().from_str(text.replace('precision = "fp32"', 'precision = "fp16"'), interpolate=False)
    with pytest.raises(SpacyMlmError, match=r"precision 'fp16' is not available with backend 'torch' \(it offers fp32, bf16\)"):
        spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
