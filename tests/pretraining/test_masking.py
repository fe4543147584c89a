import numpy as np
import pytest

from spacy_mlm.errors import DataError, SettingError
from spacy_mlm.pretraining.masking import (
    IGNORE_INDEX,
    choose_positions,
    mask_tokens,
    uniform_distribution,
    unigram_distribution,
)

MASK, SPECIALS, VOCAB = 4, [0, 1, 2, 3, 4], 50


def batch(n_rows=400, length=64, seed=0):
    """Random ids with [CLS]=2 first, [SEP]=3 last and a padded tail on half the rows."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, size=(n_rows, length))
    ids[:, 0], ids[:, -1] = 2, 3
    ids[::2, -10:] = 0
    special = np.isin(ids, SPECIALS)
    return ids, special


def test_rate_is_exact_per_row_and_specials_never_chosen():
    ids, special = batch()
    chosen = choose_positions(~special, 0.15, np.random.default_rng(1))
    assert not (chosen & special).any()
    expected = np.rint(0.15 * (~special).sum(1))
    np.testing.assert_array_equal(chosen.sum(1), expected)


def test_80_10_10_split_and_labels():
    ids, special = batch()
    probs = uniform_distribution(VOCAB, SPECIALS)
    out = mask_tokens(ids, special, np.random.default_rng(2), MASK, probs)
    n = out.chosen.sum()
    assert abs(n / (~special).sum() - 0.15) < 0.005
    masked = (out.input_ids == MASK) & out.chosen
    kept = (out.input_ids == ids) & out.chosen
    changed = out.chosen & ~masked & ~kept
    # binomial 3-sigma bounds; a random draw equal to the original counts as kept (1/45 of 10%)
    for share, target in [(masked.sum() / n, 0.8), (changed.sum() / n, 0.1 * 44 / 45), (kept.sum() / n, 0.1 + 0.1 / 45)]:
        assert abs(share - target) < 3 * np.sqrt(target * (1 - target) / n)
    np.testing.assert_array_equal(out.labels[out.chosen], ids[out.chosen])
    assert (out.labels[~out.chosen] == IGNORE_INDEX).all()
    np.testing.assert_array_equal(out.input_ids[~out.chosen], ids[~out.chosen])
    assert not np.isin(out.input_ids[changed], SPECIALS).any()


def test_random_replacements_follow_the_unigram_distribution():
    counts = np.zeros(VOCAB)
    counts[5:15] = [400, 200, 100, 100, 50, 50, 40, 30, 20, 10]
    counts[:5] = 1000  # special tokens: must get no mass
    probs = unigram_distribution(counts, SPECIALS)
    assert probs[:5].sum() == 0
    ids, special = batch(n_rows=2000)
    out = mask_tokens(ids, special, np.random.default_rng(3), MASK, probs, mask_fraction=0.0, random_fraction=1.0)
    drawn = out.input_ids[out.chosen]
    freq = np.bincount(drawn, minlength=VOCAB) / len(drawn)
    assert freq[15:].sum() == 0
    assert 0.5 * np.abs(freq - probs).sum() < 0.02  # total variation distance
    uniform = mask_tokens(ids, special, np.random.default_rng(3), MASK, uniform_distribution(VOCAB, SPECIALS), 0.15, 0.0, 1.0)
    ufreq = np.bincount(uniform.input_ids[uniform.chosen], minlength=VOCAB)[5:] / uniform.chosen.sum()
    assert np.abs(ufreq - 1 / 45).max() < 0.01


def test_whole_word_masking_takes_words_whole_at_the_rate():
    rng = np.random.default_rng(4)
    ids, special = batch(n_rows=300)
    starts = rng.random(ids.shape) < 0.6  # words of 1-4 pieces
    starts[:, :2] = True
    starts[special] = True
    out = mask_tokens(ids, special, np.random.default_rng(5), MASK, uniform_distribution(VOCAB, SPECIALS), word_starts=starts)
    words = np.cumsum(starts, axis=1)
    for row in range(ids.shape[0]):
        for w in np.unique(words[row][out.chosen[row]]):
            assert out.chosen[row][(words[row] == w) & ~special[row]].all()
    assert not (out.chosen & special).any()
    assert abs(out.chosen.sum() / (~special).sum() - 0.15) < 0.01


def test_masks_are_a_function_of_the_seed():
    ids, special = batch(n_rows=20)
    probs = uniform_distribution(VOCAB, SPECIALS)
    a = mask_tokens(ids, special, np.random.default_rng([0, 1]), MASK, probs)
    b = mask_tokens(ids, special, np.random.default_rng([0, 1]), MASK, probs)
    c = mask_tokens(ids, special, np.random.default_rng([0, 2]), MASK, probs)  # next epoch/step: a new mask
    np.testing.assert_array_equal(a.input_ids, b.input_ids)
    assert (a.chosen != c.chosen).any()


def test_bad_arguments():
    ids, special = batch(n_rows=2)
    with pytest.raises(SettingError):
        choose_positions(~special, 1.5, np.random.default_rng(0))
    with pytest.raises(SettingError):
        mask_tokens(ids, special, np.random.default_rng(0), MASK, uniform_distribution(VOCAB, SPECIALS), 0.15, 0.9, 0.2)
    with pytest.raises(DataError):
        unigram_distribution(np.ones(5), SPECIALS)
