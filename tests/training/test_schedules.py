"""spacy_mlm.warmup_linear.v1 is thinc's warmup_linear.v1, and also builds from
the raw config section that spaCy's `Language.create_optimizer` (so `spacy
debug data`) resolves, where total_steps is still '${training.max_steps}'."""
import itertools

import pytest
from spacy.util import registry
from thinc.api import Config

import spacy_mlm  # noqa: F401
from spacy_mlm.errors import SpacyMlmError

RAW = """
[training]
max_steps = 10

[training.optimizer]
@optimizers = "Adam.v1"

[training.optimizer.learn_rate]
@schedules = "spacy_mlm.warmup_linear.v1"
warmup_steps = 3
total_steps = ${training.max_steps}
initial_rate = 0.1
"""


def rates(schedule, n):
    return list(itertools.islice(schedule, n))


@pytest.mark.parametrize("warmup,total", [(3, 10), (0, 5), (4, 4)])
def test_same_rates_as_thincs_warmup_linear(warmup, total):
    ours = registry.schedules.get("spacy_mlm.warmup_linear.v1")(0.1, warmup, total)
    thincs = registry.schedules.get("warmup_linear.v1")(0.1, warmup, total)
    assert rates(ours, total + 3) == pytest.approx(rates(thincs, total + 3))


def test_interpolated_config_decays_to_zero_at_max_steps():
    config = Config().from_str(RAW, overrides={"training.max_steps": 6})
    optimizer = registry.resolve(config["training"])["optimizer"]
    seen = [optimizer.learn_rate]
    for _ in range(7):
        optimizer.step_schedules()
        seen.append(optimizer.learn_rate)
    assert seen == pytest.approx([0.0, 0.1 / 3, 0.2 / 3, 0.1, 0.1 * 2 / 3, 0.1 / 3, 0.0, 0.0])


def test_raw_section_builds_and_fails_only_where_the_total_is_needed():
    """What `Language.create_optimizer` does: resolve the un-interpolated section.
    thinc's schedule refuses the string; ours warms up, then names the problem."""
    raw = Config().from_str(RAW, interpolate=False)
    section = {"optimizer": raw["training"]["optimizer"]}
    optimizer = registry.resolve(section)["optimizer"]
    assert optimizer.learn_rate == 0.0
    optimizer.step_schedules()
    optimizer.step_schedules()
    assert optimizer.learn_rate == pytest.approx(0.2 / 3)
    with pytest.raises(SpacyMlmError, match=r"\$\{training.max_steps\}.*interpolate"):
        optimizer.step_schedules()
    thincs = {"optimizer": {**section["optimizer"], "learn_rate": {**section["optimizer"]["learn_rate"],
                                                                   "@schedules": "warmup_linear.v1"}}}
    with pytest.raises(Exception, match="total_steps"):
        registry.resolve(thincs)


def test_no_warmup_starts_at_the_full_rate_even_unresolved():
    schedule = registry.schedules.get("spacy_mlm.warmup_linear.v1")(0.1, 0, "${training.max_steps}")
    assert next(schedule) == 0.1
    with pytest.raises(SpacyMlmError):
        next(schedule)
