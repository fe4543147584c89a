"""How far two fp32 runs of one model may differ when they are not the same
computation, and the comparisons that allow for it.

Two runs are the same computation only where they run the same kernels on the
same inputs: the same call twice, or a serialization round trip. Anything else
(another batch size, a worker process with another thread count, another CPU's
matmul kernels) adds its sums in another order. fp32 keeps 24 bits (eps
1.2e-7), so such a sum differs in the last bits of its largest terms, and a
transformer passes that on: MiniLM's hidden states differ by about 2e-6 (of
values up to 6) between a batch of 8 and one Doc, on AVX-512 and AVX2 kernels
alike. A tiny model trained a few steps on two examples has steep decision
surfaces and amplifies it: on an AVX2-only AMD CPU its class probabilities
moved by 3e-4 between batch sizes (issue 47). Hence:

- what is decided by a comparison (entities, tags, argmax labels) must agree
  exactly: a margin below these tolerances would be a test built on a tie;
- activations and vectors within ACTIVATION_ATOL, probabilities and
  similarities within PROBABILITY_ATOL: both far below what any real change of
  behaviour moves (a wrong Doc's encoding, a dropped layer, a head not loaded).

`make test` runs the tests marked `numerics` a second time with torch held to
AVX2 kernels (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS),
so an assumption of one CPU's rounding shows on an AVX-512 machine too.
"""
import math
from numbers import Real

ACTIVATION_ATOL = 1e-4
PROBABILITY_ATOL = 2e-3


def assert_close_nested(got, expected, atol: float = PROBABILITY_ATOL, where: str = "") -> None:
    """`got == expected` for nested dicts, lists and tuples, except that floats
    may differ by `atol`; every other value (labels, offsets, strings, ints)
    exactly. The message names the path of the first difference."""
    if isinstance(expected, float) or (isinstance(got, float) and isinstance(expected, Real)):
        assert isinstance(got, Real) and not isinstance(got, bool), f"{where}: {got!r} is not a number"
        assert math.isclose(got, expected, rel_tol=0, abs_tol=atol), f"{where}: {got} vs {expected} (atol {atol})"
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), f"{where}: keys {sorted(got)} vs {sorted(expected)}"
        for key in expected:
            assert_close_nested(got[key], expected[key], atol, f"{where}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected), f"{where}: {got!r} vs {expected!r}"
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_close_nested(a, b, atol, f"{where}[{i}]")
    else:
        assert got == expected, f"{where}: {got!r} vs {expected!r}"
