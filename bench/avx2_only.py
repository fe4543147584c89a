"""Run a command as it would run on a CPU with AVX2 and FMA but no AVX-512,
AVX-VNNI or AMX (AMD Zen 2/3, Intel before Skylake-SP), on a machine that has
them: every library in the command's processes (torch's ATen, oneDNN and MKL,
ONNX Runtime's MLAS, glibc) is told by the CPU itself that those instruction
sets are absent, and picks its kernels accordingly.

    python bench/avx2_only.py .venv/bin/python bench/inference_speed.py --speed-only --threads 1

Why not the environment variables `make test` uses (ATEN_CPU_CAPABILITY=avx2,
ONEDNN_MAX_CPU_ISA=AVX2, MKL_ENABLE_INSTRUCTIONS=AVX2): they hold torch only;
ONNX Runtime has no such setting, so its int8 kernels kept using VNNI and its
figures overstated an AVX2-only CPU. Here the CPUID instruction is made to
fault (Linux's CPUID faulting, the "cpuid_fault" flag of /proc/cpuinfo) and a
small preloaded library answers with those features cleared
(`harness/cpuid_mask.c`, built here with the system's C compiler on first use).

What it cannot change: the cores are still this machine's (their caches,
clocks, and how fast they run AVX2 code), so a figure is "this machine, AVX2
kernels", not a Zen 3's. The bench's JSON records the mask
(`machine.isa_limits.SPACY_MLM_CPUID_MASK`) and the features as the process
saw them. Exits with an error, running nothing, where CPUID faulting is absent.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "harness" / "cpuid_mask.c"
# glibc chose its string functions before the shim loaded: this makes it choose without AVX-512 too
GLIBC_TUNABLES = "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX_VNNI"


def built_shim() -> Path:
    """The shared library, built again whenever its source is newer."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spacy_mlm"
    library = cache / "cpuid_mask.so"
    if not library.exists() or library.stat().st_mtime < SOURCE.stat().st_mtime:
        compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if compiler is None:
            sys.exit("avx2_only: no C compiler (cc or gcc) to build harness/cpuid_mask.c")
        cache.mkdir(parents=True, exist_ok=True)
        partial = library.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(partial), str(SOURCE)], check=True)
        partial.replace(library)
    return library


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with open("/proc/cpuinfo", encoding="utf8") as f:
        if " cpuid_fault" not in f.read():
            sys.exit("avx2_only: this CPU (or its hypervisor) offers no CPUID faulting (no 'cpuid_fault' in "
                     "/proc/cpuinfo), so the features cannot be hidden; use the AVX2 environment variables instead")
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(filter(None, [str(built_shim()), env.get("LD_PRELOAD")]))
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [GLIBC_TUNABLES, env.get("GLIBC_TUNABLES")]))
    env.pop("PYTHONFAULTHANDLER", None)  # its SIGSEGV handler would receive the faults the shim answers
    probe = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('SPACY_MLM_CPUID_MASK'))"],
                           env=env, capture_output=True, text=True)
    if probe.stdout.strip() != "avx2":
        sys.exit(f"avx2_only: the mask did not take hold: {probe.stderr.strip() or probe.stdout.strip()}")
    os.execvpe(sys.argv[1], sys.argv[1:], env)


if __name__ == "__main__":
    main()
