import pytest
from typer.testing import CliRunner

from spacy_mlm.cli import app
from spacy_mlm.errors import ModelLoadError, SpacyMlmError
from spacy_mlm.fill_mask import FillMask, fill_mask


def test_top_k_per_blank_sorted_probabilities(pretrained_dir):
    fill = FillMask(pretrained_dir / "model")
    results = fill("The ___ lies in a quiet wood near the ___ of Concord.", top_k=3)
    assert len(results) == 2
    for candidates in results:
        probs = [p for _, p in candidates]
        assert len(candidates) == 3 and probs == sorted(probs, reverse=True) and 0 < probs[-1] <= probs[0] <= 1
        assert not any(piece in fill.tokenizer.all_special_tokens for piece, _ in candidates)
    assert fill(f"The {fill.tokenizer.mask_token} lies in a quiet wood.", top_k=3)[0] == \
        fill("The ___ lies in a quiet wood.", top_k=3)[0]


def test_learned_something(pretrained_dir, tiny_model_dir):
    """Pretrained on SAMPLE_TEXT ("The cat sleeps on the warm stone wall."), the
    model ranks the word of a seen context higher than the source model did."""
    def rank_of_wall(model_dir):
        candidates = fill_mask(model_dir, "The cat sleeps on the warm stone ___ .", top_k=100_000)[0]  # every piece
        return [piece for piece, _ in candidates].index("wall")

    before, after = rank_of_wall(tiny_model_dir), rank_of_wall(pretrained_dir / "model")
    assert after < before, (before, after)


def test_errors(pretrained_dir):
    fill = FillMask(pretrained_dir / "model")
    with pytest.raises(SpacyMlmError, match="no blank"):
        fill("Nothing is missing here.")
    with pytest.raises(SpacyMlmError, match="top_k must be at least 1, got 0"):
        fill("The ___ .", top_k=0)


def test_a_model_without_an_mlm_head_is_refused(minilm_path):
    with pytest.raises(ModelLoadError, match="no MLM head"):
        FillMask(minilm_path)


def test_cli(pretrained_dir):
    result = CliRunner().invoke(app, ["fill-mask", str(pretrained_dir / "model"), "The ___ of Walden Pond", "-k", "2"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "blank 1:" and len(lines) == 3 and float(lines[1].split()[-1]) > 0
    bad = CliRunner().invoke(app, ["fill-mask", str(pretrained_dir / "model"), "no blanks"])
    assert bad.exit_code == 1 and "no blank" in bad.output


def test_fill_mask_runs_where_it_is_told(pretrained_dir, device, monkeypatch):
    """FillMask follows thinc's current device (the GPU after require_gpu / --gpu-id)
    and an explicit device wins."""
    import thinc.api
    import torch

    model = FillMask(pretrained_dir / "model")
    assert next(model.model.parameters()).device.type == device
    assert model("the ___ of the town")[0]
    # thinc's device is read, not assumed: one that is neither the CPU nor the GPU ("meta")
    monkeypatch.setattr(thinc.api, "get_torch_default_device", lambda: torch.device("meta"))
    assert next(FillMask(pretrained_dir / "model").model.parameters()).device.type == "meta"
    told = FillMask(pretrained_dir / "model", device=device)
    assert next(told.model.parameters()).device.type == device
    assert told("the ___ of the town")[0]
