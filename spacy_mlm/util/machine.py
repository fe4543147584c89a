"""What this machine's CPU is and which of its instruction sets torch may use.

Speed (and the last bits of fp32 results) depend on the kernels torch, oneDNN,
MKL and ONNX Runtime pick for the CPU: AVX-512 or AVX2 matmuls, VNNI for int8,
AVX512-BF16 or AMX for bfloat16. A figure means little without the machine it
came from, so every bench records `machine_info()` in its last JSON line, and
the warning for a bfloat16 that runs slower than fp32 here names `cpu_model()`.

The kernels torch runs can be held below what the CPU has with
`ATEN_CPU_CAPABILITY=avx2`, `ONEDNN_MAX_CPU_ISA=AVX2` and
`MKL_ENABLE_INSTRUCTIONS=AVX2` (what `make test` does for its second run of the
numerically sensitive tests); `machine_info` records those settings and the
capability torch then reports. ONNX Runtime has no such setting: its kernels
follow what the CPU says it has. `bench/avx2_only.py` makes the CPU itself
say less (CPUID faulting, `bench/harness/cpuid_mask.c`), for every library in
the process; the shim sets SPACY_MLM_CPUID_MASK, and `cpu_flags` then lists
what the process sees, not what /proc/cpuinfo lists.
"""
import os
import platform
import warnings
from functools import lru_cache
from typing import Dict, FrozenSet

# the instruction sets that decide which kernels run: fp32 matmuls (avx2, fma, avx512f),
# int8 (avx512_vnni, avx_vnni, amx_int8) and bfloat16 (avx512_bf16, amx_bf16); on ARM their kin
FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8",
            "amx_bf16", "asimd", "asimddp", "i8mm", "bf16", "sve")
# the environment variables that hold torch's kernels below the CPU's best
ISA_LIMITS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
# set by bench/harness/cpuid_mask.c where it hides these flags from the process's CPUID
CPUID_MASK = "SPACY_MLM_CPUID_MASK"
# what the "avx2" mask hides besides every avx512* and amx* flag
_ALSO_HIDDEN_BY_AVX2_MASK = ("avx_vnni", "avx_ifma", "avx_vnni_int8", "avx_ne_convert")


@lru_cache(maxsize=1)
def _cpuinfo() -> Dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    if fields:
                        break
                    continue
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC 7B13", "Intel(R) Xeon(R) Processor"), or
    what the platform says where /proc/cpuinfo does not name it."""
    info = _cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine() or "unknown CPU"


def cpu_flags() -> FrozenSet[str]:
    """The CPU's feature flags as the kernel lists them (x86 "flags", ARM "Features"),
    less those a CPUID mask hides from this process."""
    info = _cpuinfo()
    flags = (info.get("flags") or info.get("Features") or "").split()
    if os.environ.get(CPUID_MASK) == "avx2":
        flags = [f for f in flags if not (f.startswith(("avx512", "amx")) or f in _ALSO_HIDDEN_BY_AVX2_MASK)]
    return frozenset(flags)


def machine_info() -> Dict[str, object]:
    """What a bench figure depends on: the CPU and its features that matter,
    cores this process may use, torch threads, the kernel level torch runs
    (and any variable that lowered it), and the versions of the libraries
    doing the work."""
    import torch

    flags = cpu_flags()
    cpuinfo = _cpuinfo()
    info: Dict[str, object] = {
        "cpu": cpu_model(),
        # a virtual machine's model name may be generic ("Intel(R) Xeon(R) Processor"): the ids still tell
        "cpu_id": " ".join(f"{key} {cpuinfo[key]}" for key in ("vendor_id", "cpu family", "model", "stepping")
                           if key in cpuinfo),
        "features": sorted(f for f in FEATURES if f in flags),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "isa_limits": {name: os.environ[name] for name in ISA_LIMITS + (CPUID_MASK,) if name in os.environ},
        "torch": torch.__version__,
    }
    for package in ("transformers", "onnxruntime", "spacy"):
        try:
            info[package] = __import__(package).__version__
        except ImportError:
            info[package] = None
    return info


@lru_cache(maxsize=1)
def cpu_bf16_is_faster() -> bool:
    """Whether bfloat16 matmuls beat fp32 on this CPU: only with AMX (and where
    oneDNN may use bfloat16 at all, so ONEDNN_MAX_CPU_ISA=AVX2 says no). Without
    AMX they are emulated (no AVX512-BF16) or, with AVX512-BF16 alone, measured
    slower than fp32 all the same (docs/speed.md, "Which precision on which CPU")."""
    import torch

    onednn_bf16 = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if onednn_bf16 is None or amx is None:  # a torch without the checks: the CPU's flags
        return "amx_bf16" in cpu_flags()
    return bool(onednn_bf16()) and bool(amx())


def slow_bf16_note() -> str:
    """Why bfloat16 is a bad choice on this CPU, naming it, with the cost measured."""
    flags = cpu_flags()
    if "avx512_bf16" in flags or "bf16" in flags:
        why = ("has no AMX, and with AVX512-BF16 alone bfloat16 measured slower than fp32: fine-tuning at 0.64x "
               "and inference at 0.55x of fp32's speed on an Intel Xeon without AMX")
    else:
        why = ("has no AVX512-BF16 or AMX, so its bfloat16 matmuls are emulated: inference at a fifth of fp32's "
               "words/s with torch held to AVX2")
    return f"this CPU ({cpu_model()}) {why} (bench/ner_conll.py, bench/inference_speed.py; docs/speed.md)"


@lru_cache(maxsize=None)
def warn_slow_bf16(advice: str) -> None:
    """The slow-bfloat16 warning, once per process and advice (each training or
    inference pass would repeat it)."""
    warnings.warn(f"{slow_bf16_note()}; {advice}", stacklevel=3)
