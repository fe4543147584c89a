"""The precision fine-tuning runs in, chosen when `init-config` writes a config.

With `precision = "bf16"` the encoder's transformer runs its forward pass under
`torch.autocast` in bfloat16 (`models/encoder.py`); its outputs come back as
float32, so the heads, their losses and the CRF run in float32 outside the
autocast region, and the weights and the optimizer's moments stay float32
(`models.torch_shim.TorchShim`, `models.torch_stepper.TorchStepper`). On a CPU
with AMX or a GPU from Ampere on that trains faster (bench/ner_conll.py and
bench/classify.py with --precision fp32,bf16 measure the time and accuracy of
both); on other CPUs bfloat16 is emulated (no AVX512-BF16) or, with AVX512-BF16
alone, still measured slower than fp32 (docs/speed.md). So `init-config` writes
bf16 only where it is faster here, and says why in a comment next to the setting.
"""
from dataclasses import dataclass
from typing import Optional

from ..errors import SpacyMlmError
from ..util.machine import cpu_bf16_is_faster, slow_bf16_note

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
    "without --precision, init-config writes bf16 where the CPU (AMX) or, with --gpu, the GPU (Ampere on) "
    "runs bfloat16 faster than fp32, else fp32"
)


def check_requested(requested: str) -> None:
    """Refuses a precision init-config cannot write, naming the ones it can."""
    if requested not in (AUTO, *TRAINING_PRECISIONS):
        raise SpacyMlmError(
            f"--precision must be one of {AUTO}, {', '.join(TRAINING_PRECISIONS)}, got {requested!r} "
            "(int8 is for inference on the onnx backend: python -m spacy_mlm optimize)"
        )


def choose_precision(requested: str, *, gpu: bool, fast_bf16: Optional[bool], slow_note: str = "") -> PrecisionChoice:
    """The precision for `requested` ("auto", "fp32" or "bf16") on a machine whose
    CPU (or GPU, with `gpu`) runs bfloat16 faster than fp32 (`fast_bf16` True) or
    not; None: unknown (`gpu` asked but no CUDA device to ask). `slow_note`: why
    bf16 is slow on this CPU, for the warning. Pure: the facts come from
    `machine_bf16_is_faster` and `slow_bf16_note`. Only "auto"'s reason depends on
    the machine, so a config written with an explicit precision (the shipped ones)
    is the same everywhere."""
    check_requested(requested)
    if fast_bf16 is None:
        has = "no CUDA GPU was visible to ask whether it has native bfloat16"
    elif gpu:
        has = ("this machine's GPU multiplies bfloat16 natively (torch.cuda.is_bf16_supported)" if fast_bf16
               else "this machine's GPU has no native bfloat16 (before Ampere): bf16 would be emulated and slower")
    else:
        has = ("this machine's CPU has AMX, where bfloat16 trains faster than fp32" if fast_bf16
               else "this machine's CPU has no AMX: bf16 would run slower than fp32 (emulated without AVX512-BF16, "
                    "slower with it alone)")
    if requested == AUTO:
        precision = "bf16" if fast_bf16 else "fp32"
        return PrecisionChoice(precision, f"{precision}, chosen by init-config: {has}")
    warning = None
    if requested == "bf16" and fast_bf16 is False:
        warning = f'--precision bf16, but {slow_note or has}; --precision fp32 trains faster here'
    return PrecisionChoice(requested, f"{requested}, set with --precision {requested}; {UNSET_REASON}", warning)


def machine_bf16_is_faster(gpu: bool) -> Optional[bool]:
    """Whether this machine's CPU (AMX, `util.machine.cpu_bf16_is_faster`) or,
    with `gpu`, its first CUDA GPU runs bfloat16 faster than fp32 (emulation does
    not count); None for `gpu` without a visible CUDA device."""
    import torch

    if not gpu:
        return cpu_bf16_is_faster()
    if not torch.cuda.is_available():
        return None
    return bool(torch.cuda.is_bf16_supported(including_emulation=False))


def precision_setting(requested: str = AUTO, gpu: bool = False) -> PrecisionChoice:
    """`choose_precision` on this machine (asked only where the answer matters)."""
    check_requested(requested)
    fast = machine_bf16_is_faster(gpu) if requested in (AUTO, "bf16") else None
    return choose_precision(requested, gpu=gpu, fast_bf16=fast, slow_note="" if gpu else slow_bf16_note())
