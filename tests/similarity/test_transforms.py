import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_mlm.errors import ModelLoadError, NotInitializedError, SpacyMlmError
from spacy_mlm.similarity.transforms import (
    MeanCenter,
    RemoveStatic,
    RemoveTopComponents,
    Standardize,
    TransformChain,
    Whiten,
    build_vector_transform_v1,
    make_transform_chain,
    parse_steps,
)


def anisotropic(n=400, width=12, seed=0):
    """Vectors with a big shared offset, one dominant direction and uneven scales,
    like raw contextual embeddings."""
    rng = numpy.random.default_rng(seed)
    X = rng.normal(size=(n, width)) * rng.uniform(0.2, 5.0, size=width)
    X += 10.0 + rng.normal(size=(n, 1)) * 30.0 * rng.normal(size=width)
    return X.astype("float32")


def test_center_gives_zero_mean():
    X = anisotropic()
    out = MeanCenter().fit(X).apply(X)
    assert numpy.abs(out.mean(axis=0)).max() < 1e-3
    assert numpy.abs(X.mean(axis=0)).max() > 1.0


def test_standardize_gives_zero_mean_unit_variance():
    X = anisotropic()
    out = Standardize().fit(X).apply(X)
    numpy.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-3)
    numpy.testing.assert_allclose(out.std(axis=0), 1.0, atol=1e-3)


def test_standardize_leaves_constant_dimension_finite():
    X = anisotropic()
    X[:, 3] = 7.0
    out = Standardize().fit(X).apply(X)
    assert numpy.isfinite(out).all()
    numpy.testing.assert_allclose(out[:, 3], 0.0, atol=1e-6)


@pytest.mark.parametrize("n_components", [1, 3])
def test_abtt_output_orthogonal_to_removed_components(n_components):
    X = anisotropic()
    step = RemoveTopComponents(n_components).fit(X)
    U = step.arrays["components"]
    assert U.shape == (n_components, X.shape[1])
    numpy.testing.assert_allclose(U @ U.T, numpy.eye(n_components), atol=1e-5)
    out = step.apply(X)
    assert numpy.abs(out @ U.T).max() < 1e-3
    assert numpy.abs(out.mean(axis=0)).max() < 1e-3
    # Also for vectors it was not fitted on.
    new = anisotropic(n=20, seed=5)
    assert numpy.abs(step.apply(new) @ U.T).max() < 1e-3


def test_abtt_removes_the_directions_of_largest_variance():
    X = anisotropic()
    centered = X - X.mean(axis=0)
    _, _, vt = numpy.linalg.svd(centered, full_matrices=False)
    step = RemoveTopComponents(2).fit(X)
    # Same subspace as the top-2 right singular vectors (sign-free comparison).
    overlap = numpy.abs(step.arrays["components"] @ vt[:2].T)
    numpy.testing.assert_allclose(numpy.linalg.svd(overlap)[1], 1.0, atol=1e-4)
    # And the residual variance equals the sum of the remaining eigenvalues.
    out = step.apply(X)
    sv = numpy.linalg.svd(centered, compute_uv=False)
    numpy.testing.assert_allclose((out**2).sum(), (sv[2:] ** 2).sum(), rtol=1e-3)


def test_abtt_makes_cosines_less_uniform():
    rng = numpy.random.default_rng(1)
    X = (rng.normal(size=(300, 10)) + 20.0 + rng.normal(size=(300, 1)) * 8.0).astype("float32")

    def mean_cos(M):
        M = M / numpy.linalg.norm(M, axis=1, keepdims=True)
        return float((M @ M.T).mean())

    assert mean_cos(X) > 0.9
    assert abs(mean_cos(RemoveTopComponents(1).fit(X).apply(X))) < 0.05


def test_chain_fits_each_step_on_previous_output():
    X = anisotropic()
    chain = make_transform_chain(["standardize", "abtt"], n_components=2).fit(X)
    assert chain.kinds == ["standardize", "abtt"]
    out = chain.apply(X)
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    manual = RemoveTopComponents(2).fit(Z).apply(Z)
    numpy.testing.assert_allclose(out, manual, atol=1e-3)
    assert numpy.abs(out @ chain.steps[1].arrays["components"].T).max() < 1e-3


def test_empty_chain_is_identity_and_fitted():
    X = anisotropic(n=5)
    chain = build_vector_transform_v1(steps=[])
    assert chain.is_fitted
    numpy.testing.assert_array_equal(chain.apply(X), X)
    assert chain.describe() == "raw"


def test_apply_accepts_single_vector():
    X = anisotropic()
    chain = make_transform_chain(["center", "abtt"]).fit(X)
    numpy.testing.assert_allclose(chain.apply(X[7]), chain.apply(X)[7], atol=1e-5)


def test_unfitted_and_width_errors():
    with pytest.raises(NotInitializedError, match="not fitted"):
        make_transform_chain(["center"]).apply(numpy.zeros((2, 4)))
    step = MeanCenter().fit(anisotropic(width=6))
    with pytest.raises(SpacyMlmError, match="width 6"):
        step.apply(numpy.zeros((3, 5)))
    with pytest.raises(SpacyMlmError, match="unknown transform step"):
        make_transform_chain(["pca"])
    with pytest.raises(SpacyMlmError, match="n_components"):
        RemoveTopComponents(12).fit(anisotropic(width=12))
    with pytest.raises(SpacyMlmError, match="at least 2"):
        MeanCenter().fit(numpy.zeros((1, 4)))


def test_chain_survives_bytes_and_disk(tmp_path):
    X = anisotropic()
    chain = make_transform_chain(["center", "standardize", "abtt"], n_components=3).fit(X)
    probe = anisotropic(n=7, seed=3)
    expected = chain.apply(probe)
    again = TransformChain.from_bytes(chain.to_bytes())
    assert again.describe() == chain.describe() == "center+standardize(eps=1e-06)+abtt(n_components=3)"
    numpy.testing.assert_array_equal(again.apply(probe), expected)
    path = tmp_path / "sub" / "transform.bin"
    chain.to_disk(path)
    numpy.testing.assert_array_equal(TransformChain.from_disk(path).apply(probe), expected)


def test_broken_files_raise_model_load_error(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        TransformChain.from_disk(tmp_path / "missing.bin")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x93garbage")
    with pytest.raises(ModelLoadError, match="bad.bin"):
        TransformChain.from_disk(bad)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(min_value=6, max_value=40),
    width=st.integers(min_value=3, max_value=8),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_abtt_orthogonality_property(n, width, seed):
    X = anisotropic(n=n, width=width, seed=seed)
    step = RemoveTopComponents(1).fit(X)
    out = step.apply(X)
    scale = numpy.abs(X - X.mean(axis=0)).max()
    assert numpy.abs(out @ step.arrays["components"].T).max() <= 1e-4 * max(scale, 1.0)


def test_parse_steps():
    assert parse_steps("standardize+abtt") == ["standardize", "abtt"]
    assert parse_steps(" center, abtt ") == ["center", "abtt"]
    assert parse_steps("raw") == [] and parse_steps("") == []
    assert parse_steps("abtt+whiten") == ["abtt", "whiten"]
    with pytest.raises(SpacyMlmError, match="pca"):
        parse_steps("center+pca")


def covariance(X):
    centered = X - X.mean(axis=0)
    return centered.T @ centered / X.shape[0]


def test_whiten_gives_zero_mean_identity_covariance():
    X = anisotropic(n=500, width=12)
    assert numpy.abs(covariance(X) - numpy.eye(12)).max() > 10.0  # far from white before
    out = Whiten().fit(X).apply(X)
    assert out.shape == X.shape
    numpy.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-3)
    numpy.testing.assert_allclose(covariance(out), numpy.eye(12), atol=1e-3)


def test_whiten_drops_directions_without_variance():
    # Rows in a 4-dimensional subspace of 7 dimensions: only 4 directions can be whitened.
    rng = numpy.random.default_rng(2)
    X = (rng.normal(size=(300, 4)) * [5.0, 2.0, 1.0, 0.3]) @ rng.normal(size=(4, 7)) + 3.0
    out = Whiten().fit(X).apply(X)
    assert out.shape == (300, 4) and numpy.isfinite(out).all()
    numpy.testing.assert_allclose(covariance(out), numpy.eye(4), atol=1e-3)
    with pytest.raises(SpacyMlmError, match="no variance"):
        Whiten().fit(numpy.ones((5, 3)))
    with pytest.raises(SpacyMlmError, match="rel_eps"):
        Whiten(rel_eps=0.0)


def test_abtt_then_whiten_is_whitening_without_the_top_components():
    X = anisotropic(n=500, width=10)
    chain = make_transform_chain(["abtt", "whiten"], n_components=2).fit(X)
    out = chain.apply(X)
    assert out.shape == (500, 8)
    numpy.testing.assert_allclose(covariance(out), numpy.eye(8), atol=1e-3)
    # The kept axes span the complement of the two removed principal directions.
    removed = chain.steps[0].arrays["components"]
    assert numpy.abs(removed @ chain.steps[1].arrays["projection"]).max() < 1e-4


def test_whiten_is_affine_so_means_commute():
    X = anisotropic()
    step = Whiten().fit(X)
    rows = anisotropic(n=5, seed=9)
    numpy.testing.assert_allclose(step.apply(rows.mean(axis=0)), step.apply(rows).mean(axis=0), atol=1e-4)


def test_whiten_chain_survives_bytes_and_disk(tmp_path):
    X = anisotropic()
    chain = make_transform_chain(["abtt", "whiten"], n_components=1).fit(X)
    probe = anisotropic(n=7, seed=3)
    expected = chain.apply(probe)
    again = TransformChain.from_bytes(chain.to_bytes())
    assert again.describe() == chain.describe() == "abtt(n_components=1)+whiten(rel_eps=1e-05)"
    numpy.testing.assert_array_equal(again.apply(probe), expected)
    chain.to_disk(tmp_path / "t.bin")
    numpy.testing.assert_array_equal(TransformChain.from_disk(tmp_path / "t.bin").apply(probe), expected)


def contextual_and_static(n=4000, width=10, seed=0):
    """[contextual | static] rows where the contextual vector is an affine map
    of the static one plus a part the static one cannot explain."""
    rng = numpy.random.default_rng(seed)
    static = rng.normal(size=(n, width)) * rng.uniform(0.5, 3.0, size=width) + 2.0
    own = rng.normal(size=(n, width))
    contextual = static @ rng.normal(size=(width, width)) + 5.0 + own
    return numpy.concatenate([contextual, static], axis=1).astype("float32"), own


def test_remove_static_keeps_only_what_the_word_alone_cannot_explain():
    X, own = contextual_and_static()
    step = RemoveStatic(ridge=1e-6).fit(X)
    out = step.apply(X)
    assert out.shape == own.shape
    # The residual is uncorrelated with the static vectors and equals the own part (centered).
    static = X[:, own.shape[1]:] - X[:, own.shape[1]:].mean(axis=0)
    assert numpy.abs((out - out.mean(axis=0)).T @ static / len(X)).max() < 1e-3
    expected = own - own.mean(axis=0)
    assert numpy.linalg.norm(out - expected) < 0.1 * numpy.linalg.norm(expected)
    # Without the step the static part dominates: the raw rows are far from the own part.
    raw = X[:, : own.shape[1]] - X[:, : own.shape[1]].mean(axis=0)
    assert numpy.linalg.norm(raw - expected) > 2 * numpy.linalg.norm(expected)


def test_remove_static_ridge_shrinks_towards_plain_centering():
    X, own = contextual_and_static()
    width = own.shape[1]
    heavy = RemoveStatic(ridge=1e6).fit(X).apply(X)
    numpy.testing.assert_allclose(heavy, X[:, :width] - X[:, :width].mean(axis=0), atol=1e-2)


def test_remove_static_is_affine_and_survives_bytes(tmp_path):
    X, _ = contextual_and_static()
    chain = make_transform_chain(["remove_static", "standardize"]).fit(X)
    assert chain.needs_static and not make_transform_chain(["standardize"]).needs_static
    out = chain.apply(X)
    numpy.testing.assert_allclose(out.std(axis=0), 1.0, atol=1e-3)
    numpy.testing.assert_allclose(chain.apply(X[:7].mean(axis=0)), out[:7].mean(axis=0), atol=1e-4)
    chain.to_disk(tmp_path / "t.bin")
    again = TransformChain.from_disk(tmp_path / "t.bin")
    assert again.describe() == chain.describe() == "remove_static(ridge=0.01)+standardize(eps=1e-06)"
    numpy.testing.assert_allclose(again.apply(X), out, atol=1e-6)


def test_remove_static_errors():
    with pytest.raises(SpacyMlmError, match="must be the first step"):
        make_transform_chain(["standardize", "remove_static"])
    with pytest.raises(SpacyMlmError, match="even width"):
        RemoveStatic().fit(numpy.ones((5, 3)) * numpy.arange(5)[:, None])
    with pytest.raises(SpacyMlmError, match="ridge > 0"):
        RemoveStatic(ridge=0.0)
    X, _ = contextual_and_static()
    step = RemoveStatic().fit(X)
    with pytest.raises(SpacyMlmError, match="width 20"):
        step.apply(X[:, :10])


def test_remove_static_warns_when_fitted_on_too_few_vectors(caplog):
    X, _ = contextual_and_static(n=60)
    with caplog.at_level("WARNING", logger="spacy_mlm.similarity.transforms"):
        RemoveStatic().fit(X)
    assert "fitted on 60 vectors of width 10" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="spacy_mlm.similarity.transforms"):
        RemoveStatic().fit(contextual_and_static(n=100)[0])
    assert caplog.text == ""
