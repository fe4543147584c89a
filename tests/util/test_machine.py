"""The machine a figure came from: what `machine_info` records (every bench's last
JSON line carries it), and that the AVX2 settings `make test` uses for its second
run of the numerically sensitive tests reach torch."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_mlm.util import machine
from spacy_mlm.util.machine import FEATURES, ISA_LIMITS, cpu_flags, cpu_model, machine_info

AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def test_machine_info_names_the_cpu_its_features_and_the_libraries():
    info = machine_info()
    assert info["cpu"] == cpu_model() and info["cpu"]
    assert set(info["features"]) <= set(FEATURES) and set(info["features"]) <= cpu_flags()
    assert info["cores"] >= 1 and info["torch_threads"] >= 1
    assert info["torch_cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256")
    assert info["torch"] and "transformers" in info and "onnxruntime" in info
    json.dumps(info)  # goes into a JSON line as it is


def test_the_cpu_is_read_from_proc_cpuinfo(monkeypatch, tmp_path):
    monkeypatch.setattr(machine, "_cpuinfo", lambda: {"model name": "AMD EPYC 7B13", "vendor_id": "AuthenticAMD",
                                                      "cpu family": "25", "model": "1", "stepping": "0",
                                                      "flags": "fpu sse2 avx2 fma avx512f"})
    info = machine_info()
    assert info["cpu"] == "AMD EPYC 7B13" and info["cpu_id"] == "vendor_id AuthenticAMD cpu family 25 model 1 stepping 0"
    assert info["features"] == ["avx2", "avx512f", "fma"]  # only the ones that decide kernels


def test_the_avx2_settings_reach_torch_and_are_recorded():
    script = "import json; from spacy_mlm.util.machine import machine_info; print(json.dumps(machine_info()))"
    env = {k: v for k, v in os.environ.items() if k not in ISA_LIMITS}
    out = subprocess.run([sys.executable, "-c", script], env={**env, **AVX2_ONLY}, capture_output=True, text=True,
                         check=True, timeout=120)
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["isa_limits"] == AVX2_ONLY
    # held to AVX2 (or below, on a CPU without it): never the AVX-512 kernels
    assert info["torch_cpu_capability"] == ("AVX2" if "avx2" in cpu_flags() else "DEFAULT")


def test_a_cpuid_mask_hides_its_flags_from_what_is_recorded(monkeypatch):
    monkeypatch.setattr(machine, "_cpuinfo", lambda: {"flags": "avx2 fma avx512f avx512_vnni avx_vnni amx_int8"})
    monkeypatch.setenv(machine.CPUID_MASK, "avx2")
    assert cpu_flags() == {"avx2", "fma"}
    assert machine_info()["isa_limits"][machine.CPUID_MASK] == "avx2"
    monkeypatch.delenv(machine.CPUID_MASK)
    assert "avx512_vnni" in cpu_flags()


AVX2_ONLY_SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "avx2_only.py"


def _cpuid_faulting() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf8") as f:
            return " cpuid_fault" in f.read() and bool(shutil.which("cc") or shutil.which("gcc"))
    except OSError:
        return False


@pytest.mark.skipif(not _cpuid_faulting(), reason="needs Linux CPUID faulting and a C compiler")
def test_avx2_only_makes_torch_and_onnxruntime_see_no_avx512(tmp_path):
    """bench/avx2_only.py: the CPU itself answers without AVX-512, so torch picks
    AVX2 kernels with no environment variable of its own, and the record says so."""
    script = ("import json, onnxruntime; from spacy_mlm.util.machine import machine_info; "
              "print(json.dumps(machine_info()))")
    env = {k: v for k, v in os.environ.items() if k not in ISA_LIMITS}
    out = subprocess.run([sys.executable, str(AVX2_ONLY_SCRIPT), sys.executable, "-c", script],
                         env={**env, "XDG_CACHE_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["torch_cpu_capability"] == "AVX2"
    assert info["isa_limits"] == {machine.CPUID_MASK: "avx2"}
    assert not any(f.startswith(("avx512", "amx")) or f == "avx_vnni" for f in info["features"])
