"""The precision fine-tuning runs in, chosen when `init-config` writes a config.

With `precision = "bf16"` the encoder's transformer runs its forward pass under
`torch.autocast` in bfloat16 (`models/encoder.py`); its outputs come back as
float32, so the heads, their losses and the CRF run in float32 outside the
autocast region, and the weights and the optimizer's moments stay float32
(`models.torch_shim.TorchShim`, `models.torch_stepper.TorchStepper`). On hardware that multiplies
bfloat16 natively (a CPU with AVX512-BF16 or AMX, a GPU from Ampere on) that
trains faster (bench/ner_conll.py and bench/classify.py with --precision
fp32,bf16 measure the time and accuracy of both); elsewhere bfloat16 is
emulated and slower than fp32. So `init-config` writes bf16 only where this
machine has it, and says why in a comment next to the setting.
"""
from dataclasses import dataclass
from typing import Optional

from ..errors import SpacyMlmError
from ..util.machine import EMULATED_BF16_COST, cpu_model

# what a trained encoder can run in (int8 is the ONNX backend's, for inference only)
TRAINING_PRECISIONS = ("fp32", "bf16")
AUTO = "auto"


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a config gets, the reason written next to it, and a warning
    for the user where the choice will be slow on this machine (else None)."""

    precision: str
    reason: str
    warning: Optional[str] = None


UNSET_REASON = (
    "without --precision, init-config writes bf16 where the CPU (AVX512-BF16 or AMX) or, with --gpu, the GPU "
    "(Ampere on) multiplies bfloat16 natively, else fp32"
)


def check_requested(requested: str) -> None:
    """Refuses a precision init-config cannot write, naming the ones it can."""
    if requested not in (AUTO, *TRAINING_PRECISIONS):
        raise SpacyMlmError(
            f"--precision must be one of {AUTO}, {', '.join(TRAINING_PRECISIONS)}, got {requested!r} "
            "(int8 is for inference on the onnx backend: python -m spacy_mlm optimize)"
        )


def choose_precision(requested: str, *, gpu: bool, native_bf16: Optional[bool], cpu: str = "") -> PrecisionChoice:
    """The precision for `requested` ("auto", "fp32" or "bf16") on a machine whose
    CPU (or GPU, with `gpu`) does (`native_bf16` True) or does not multiply
    bfloat16 natively; None: unknown (`gpu` asked but no CUDA device to ask).
    `cpu`: the CPU's name, for the warning. Pure: the facts come from
    `machine_has_native_bf16`. Only "auto"'s reason depends on the machine, so a
    config written with an explicit precision (the shipped ones) is the same everywhere."""
    check_requested(requested)
    device = "GPU" if gpu else "CPU"
    if native_bf16 is None:
        has = "no CUDA GPU was visible to ask whether it has native bfloat16"
    elif native_bf16:
        has = f"this machine's {device} multiplies bfloat16 natively" + (
            " (torch.cuda.is_bf16_supported)" if gpu else " (AVX512-BF16 or AMX)")
    else:
        has = f"this machine's {device} has no native bfloat16" + (
            " (before Ampere)" if gpu else " (no AVX512-BF16 or AMX)") + ": bf16 would be emulated and slower"
    if requested == AUTO:
        precision = "bf16" if native_bf16 else "fp32"
        return PrecisionChoice(precision, f"{precision}, chosen by init-config: {has}")
    warning = None
    if requested == "bf16" and native_bf16 is False:
        cost = "" if gpu else f" ({cpu + '; ' if cpu else ''}{EMULATED_BF16_COST})"
        warning = f'--precision bf16, but {has}{cost}; --precision fp32 trains faster here'
    return PrecisionChoice(requested, f"{requested}, set with --precision {requested}; {UNSET_REASON}", warning)


def machine_has_native_bf16(gpu: bool) -> Optional[bool]:
    """Whether this machine's CPU (oneDNN's check, which the encoder's own warning
    uses) or, with `gpu`, its first CUDA GPU multiplies bfloat16 natively
    (emulation does not count); None for `gpu` without a visible CUDA device."""
    import torch

    if not gpu:
        from ..models.encoder import cpu_has_bf16

        return cpu_has_bf16()
    if not torch.cuda.is_available():
        return None
    return bool(torch.cuda.is_bf16_supported(including_emulation=False))


def precision_setting(requested: str = AUTO, gpu: bool = False) -> PrecisionChoice:
    """`choose_precision` on this machine (asked only where the answer matters)."""
    check_requested(requested)
    native = machine_has_native_bf16(gpu) if requested in (AUTO, "bf16") else None
    return choose_precision(requested, gpu=gpu, native_bf16=native, cpu=cpu_model())
