"""The component contract: every row of `components.CASES` (each spacy-mlm
factory, and spaCy's tagger, ner and textcat listening to `mlm_encoder`) runs
the same checks: built from its config, initialized, empty and whitespace Docs,
a batch of mixed lengths equal to one Doc at a time, to_disk/from_disk,
to_bytes/from_bytes, pickle, `nlp.pipe(n_process=2)`, a few updates lowering
the loss, a label it does not know refused, a bad setting refused by name.

Each row's pipeline is built, initialized and trained once per module (the
`built` fixture, module scope: pytest runs a row's tests together).

Tolerances. A Doc in a batch is padded to the batch's longest window and goes
through the same maths as alone but in matrices of another shape; CPU kernels
(oneDNN, BLAS) split and order their fp32 sums by shape, so each sum may round
differently (relative 2^-24 per addition, a few 1e-7 after the two layers'
LayerNorms and reductions of 32-64 terms; measured: at most 4.8e-7, on the
regressor's values of 1.5-4.5). `BATCH` allows 1e-5 absolute and
1e-4 relative on values of order 1 (hidden states, probabilities, vectors): ten
to a hundred times that rounding, far below any real difference (a wrong
window, a pad attended to, a swapped row: 1e-2 and more). Another process
(`n_process=2`) runs the same shapes but may pick other kernels: `BATCH` too.
After a round trip (disk, bytes, pickle) the same weights run the same batch
through the same kernels on the same machine, so the results are expected to be
the same bits; `ROUND_TRIP` still allows 1e-6, so a test never depends on
bitwise equality. Decisions (entities, argmax labels, tags, pieces) must be
equal exactly: the models are trained a few steps, so no score sits within
1e-5 of a tie.
"""
import copy
import pickle
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Dict, List, Sequence

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import fix_random_seed, load_model_from_config
from thinc.api import ConfigValidationError, Optimizer

from spacy_mlm.errors import SpacyMlmError

from .components import CASES, ComponentCase, Prediction, tiny_path_config

BATCH = dict(rtol=1e-4, atol=1e-5)
ROUND_TRIP = dict(rtol=1e-6, atol=1e-6)
SPACY_LISTENING = {"tagger", "ner", "textcat"}


@dataclass
class Built:
    case: ComponentCase
    nlp: Language
    optimizer: Optimizer
    losses: List[float]  # the component's loss at each update, before its step

    @property
    def component(self):
        return self.nlp.get_pipe(self.case.name)


def build(case: ComponentCase, model_dir: str) -> Built:
    """The row's pipeline: built, initialized on its examples, trained a few
    steps on them as one fixed batch (the loss of each step recorded), prepared."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    for name, factory, config in tiny_path_config(case.pipeline, model_dir):
        nlp.add_pipe(factory, name=name, config=config)
    examples = case.examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    losses = []
    if case.training is not None:
        optimizer.learn_rate = case.training.learn_rate
        for _ in range(case.training.steps + 1):
            step: Dict[str, float] = {}
            nlp.update(examples, sgd=optimizer, losses=step, **case.training.update_settings())
            losses.append(float(step[case.name]))
    case.prepare(nlp, examples)
    return Built(case, nlp, optimizer, losses)


@pytest.fixture(scope="module", params=CASES, ids=[case.id for case in CASES])
def built(request, tiny_model_dir) -> Built:
    return build(request.param, str(tiny_model_dir))


def predictions(nlp: Language, case: ComponentCase, docs: List[Doc]) -> List[Prediction]:
    return [case.read(nlp, doc) for doc in docs]


def checked_predictions(nlp: Language, case: ComponentCase, docs: List[Doc]) -> List[Prediction]:
    """The predictions, each first checked well-formed with finite numbers."""
    out = []
    for doc in docs:
        case.check(nlp, doc)
        out.append(case.read(nlp, doc))
        for key, value in out[-1].values.items():
            assert numpy.isfinite(value).all(), f"{key} of {doc.text[:40]!r}"
    return out


def mixed_docs(nlp: Language, case: ComponentCase) -> List[Doc]:
    """Fresh Docs of mixed lengths with the empty and whitespace ones among them."""
    docs, blanks = case.docs(nlp), case.blank_docs(nlp)
    return docs[:2] + blanks[:1] + docs[2:] + blanks[1:]


def assert_same(expected: List[Prediction], got: List[Prediction], tolerance: dict, what: str,
                skip: Sequence[int] = ()) -> None:
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(expected, got)):
        if i in skip:
            continue
        assert b.decisions == a.decisions, f"{what}: doc {i} decided {b.decisions!r}, expected {a.decisions!r}"
        assert set(b.values) == set(a.values), f"{what}: doc {i}"
        for key in a.values:
            numpy.testing.assert_allclose(b.values[key], a.values[key], **tolerance,
                                          err_msg=f"{what}: doc {i}, {key}")


def batch_dependent(case: ComponentCase, docs: List[Doc]) -> List[int]:
    """The Docs a batch comparison leaves out: those without tokens, for a
    component whose prediction of them depends on the batch (the row says why)."""
    return [i for i, doc in enumerate(docs) if case.empty_doc_depends_on_batch and len(doc) == 0]


def component_config(case: ComponentCase) -> dict:
    configs = {name: config for name, _, config in case.pipeline}
    return copy.deepcopy(configs.get(case.name, {}))


def merged(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


# -- the table covers every factory --------------------------------------------------------

def test_every_factory_of_the_package_is_in_the_table():
    """setup.py's spacy_factories entry points (as installed) are all rows of
    the table, and spaCy's components listening to the encoder too."""
    ours = {ep.name for ep in entry_points(group="spacy_factories") if ep.value.startswith("spacy_mlm.")}
    assert ours, "no spacy_factories entry points of spacy_mlm: is the package installed (pip install -e .)?"
    listed = {case.factory for case in CASES}
    assert ours - listed == set(), "factories without a row in tests/contract/components.py"
    assert SPACY_LISTENING <= listed
    assert len({case.id for case in CASES}) == len(CASES)


# -- the contract ---------------------------------------------------------------------------

def test_builds_from_its_own_config(built):
    """The pipeline's config builds the same pipeline again, and says the same."""
    nlp = built.nlp
    fresh = load_model_from_config(nlp.config, auto_fill=True, validate=True)
    assert fresh.component_names == nlp.component_names and fresh.pipe_names == nlp.pipe_names
    assert [type(fresh.get_pipe(name)) for name in fresh.component_names] == \
        [type(nlp.get_pipe(name)) for name in nlp.component_names]
    assert fresh.config.to_str() == nlp.config.to_str()
    assert nlp.get_pipe_meta(built.case.name).factory == built.case.factory


def test_initialize_takes_the_labels_and_predictions_are_well_formed(built):
    case, nlp = built.case, built.nlp
    if case.labels is not None:
        assert tuple(built.component.labels) == case.labels
    checked_predictions(nlp, case, list(nlp.pipe(case.docs(nlp))))


def test_empty_and_whitespace_docs(built):
    """Alone and in a batch, a Doc with no text or only whitespace gets a
    well-formed prediction with finite numbers."""
    case, nlp = built.case, built.nlp
    alone = [nlp(doc) for doc in case.blank_docs(nlp)]
    batched = list(nlp.pipe(case.blank_docs(nlp)))
    assert_same(checked_predictions(nlp, case, alone), checked_predictions(nlp, case, batched), BATCH,
                "blank docs batched", skip=batch_dependent(case, batched))


def test_a_batch_of_mixed_lengths_equals_one_doc_at_a_time(built):
    case, nlp = built.case, built.nlp
    one_by_one = [nlp(doc) for doc in mixed_docs(nlp, case)]
    docs = mixed_docs(nlp, case)
    batch = list(nlp.pipe(docs, batch_size=len(docs)))
    assert_same(predictions(nlp, case, one_by_one), predictions(nlp, case, batch), BATCH, "batch vs one by one",
                skip=batch_dependent(case, batch))


def test_to_disk_and_from_disk(built, tmp_path):
    case, nlp = built.case, built.nlp
    expected = predictions(nlp, case, list(nlp.pipe(mixed_docs(nlp, case))))
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.pipe_names == nlp.pipe_names
    got = checked_predictions(loaded, case, list(loaded.pipe(mixed_docs(loaded, case))))
    assert_same(expected, got, ROUND_TRIP, "after to_disk / spacy.load")


def test_to_bytes_and_from_bytes(built):
    """Into a pipeline built from the config alone (no weights, not initialized)."""
    case, nlp = built.case, built.nlp
    expected = predictions(nlp, case, list(nlp.pipe(mixed_docs(nlp, case))))
    fresh = load_model_from_config(nlp.config, auto_fill=True, validate=True)
    fresh.from_bytes(nlp.to_bytes())
    got = checked_predictions(fresh, case, list(fresh.pipe(mixed_docs(fresh, case))))
    assert_same(expected, got, ROUND_TRIP, "after to_bytes / from_bytes")


def test_pickle(built):
    case, nlp = built.case, built.nlp
    expected = predictions(nlp, case, list(nlp.pipe(mixed_docs(nlp, case))))
    unpickled = pickle.loads(pickle.dumps(nlp))
    got = checked_predictions(unpickled, case, list(unpickled.pipe(mixed_docs(unpickled, case))))
    assert_same(expected, got, ROUND_TRIP, "after pickle")


def test_pipe_with_two_processes(built):
    """The same batches (batch_size 2) in two worker processes as in this one."""
    case, nlp = built.case, built.nlp
    serial = list(nlp.pipe(mixed_docs(nlp, case), batch_size=2))
    parallel = [case.from_worker(doc) for doc in nlp.pipe(mixed_docs(nlp, case), batch_size=2, n_process=2)]
    assert [d.text for d in parallel] == [d.text for d in serial]
    assert_same(predictions(nlp, case, serial), checked_predictions(nlp, case, parallel), BATCH, "n_process=2")


def test_updates_on_a_fixed_batch_lower_the_loss(built):
    case = built.case
    if case.training is None:
        pytest.skip(f"{case.id}: {case.not_trained}")
    assert len(built.losses) == case.training.steps + 1
    assert all(numpy.isfinite(built.losses)), built.losses
    assert built.losses[-1] < built.losses[0], f"{case.id}: loss per update {built.losses}"


def test_an_unknown_label_is_refused_and_changes_nothing(built):
    """Training on an example with a label the component does not know raises
    an error naming the label, before any weight moves."""
    case, nlp = built.case, built.nlp
    if case.unknown_label is None:
        pytest.skip(f"{case.id}: {case.no_refusal}")
    before = predictions(nlp, case, list(nlp.pipe(mixed_docs(nlp, case))))
    refusal = case.unknown_label
    with pytest.raises(refusal.error, match=refusal.match):
        nlp.update([refusal.example(nlp)], sgd=built.optimizer, **case.training.update_settings())
    after = predictions(nlp, case, list(nlp.pipe(mixed_docs(nlp, case))))
    assert_same(before, after, ROUND_TRIP, "after the refused update")


def test_a_bad_setting_is_refused_naming_it(built, tiny_model_dir):
    """Where the pipeline is built, not at the first Doc: spacy-mlm's own
    settings with SpacyMlmError naming the setting and the value, spaCy's with
    its config validation naming the setting."""
    case = built.case
    bad = case.bad_setting
    [(_, _, config)] = tiny_path_config([(case.name, case.factory, merged(component_config(case), bad.config))],
                                        str(tiny_model_dir))
    with pytest.raises((SpacyMlmError, ConfigValidationError)) as info:
        spacy.blank("en").add_pipe(case.factory, name=case.name, config=config)
    message = str(info.value)
    assert bad.setting in message, message
    if isinstance(info.value, SpacyMlmError):
        assert repr(bad.value) in message, message
    else:
        assert case.factory in SPACY_LISTENING, f"{case.factory} is ours: its settings are checked by spacy_mlm"
