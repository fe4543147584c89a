"""Real-valued scores for texts and sentence pairs on the shared encoder ("mlm_regressor").

For tasks whose gold is a number rather than a class: semantic relatedness
(SICK, 1 to 5), semantic textual similarity (STS-B, 0 to 5), a review's star
rating. Each target is one output of `spacy_mlm.RegressionHead.v1`, trained
with a squared error; predictions go to `doc.cats[target]` in the data's own
units, and gold values are read from the reference's `doc.cats[target]`, so
spaCy's Examples, DocBin and corpora carry them like class labels. Pairs are
pair Docs (`make_pair_doc`, `spacy_mlm.PairScoreCorpus.v1`); a symmetric
score can be predicted on both orders with `classify_pairs(..., symmetric=True)`.

The head learns each target standardized by the training data's mean and
spread, taken at `initialize` and saved with the component (see
`classification.losses.target_standardization` for why).
"""
import copy
import math
from itertools import islice
from typing import Callable, Iterable, Optional, Tuple

import numpy
import torch
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.util import ensure_path
from spacy.training import Example, validate_examples, validate_get_examples
from thinc.api import Model

from ..classification.losses import mean_squared_error, target_standardization
from ..errors import ModelLoadError, SpacyMlmError
from ..models.torch_head import loss_and_gradient
from .textcat import DEFAULT_CLASSIFIER_MODEL
from .pair_input import PairInputGuard
from ..util.save import COMPONENT_CFG_VERSION, check_outputs_fit, checked_from_disk
from ..util.settings import FLAG, NUMBERS, TEXTS

# The head of mlm_textcat read as values, on the same listener (and pooling).
DEFAULT_REGRESSION_MODEL = {
    key: value for key, value in copy.deepcopy(DEFAULT_CLASSIFIER_MODEL).items() if key != "exclusive_classes"
} | {"@architectures": "spacy_mlm.RegressionHead.v1"}


@Language.factory(
    "mlm_regressor",
    assigns=["doc.cats"],
    default_config={"model": DEFAULT_REGRESSION_MODEL, "scorer": {"@scorers": "spacy_mlm.regression_scorer.v1"}},
    default_score_weights={
        "regression_pearson": 0.5,
        "regression_spearman": 0.5,
        "regression_rmse": None,
        "regression_per_target": None,
    },
)
def make_mlm_regressor(nlp: Language, name: str, model: Model, scorer: Optional[Callable]) -> "MLMRegressor":
    """One real value per target in `doc.cats[target]`, for single texts or pair Docs.

    model: `spacy_mlm.RegressionHead.v1` on an `EncoderListener` (default: the
        listener and pooling of `mlm_textcat`). Targets come from the training data's cats (or `labels`
        in [initialize.components]).
    scorer: `spacy_mlm.regression_scorer.v1`: Pearson, Spearman and RMSE."""
    return MLMRegressor(nlp.vocab, model, name, scorer=scorer)


class MLMRegressor(PairInputGuard, TrainablePipe):
    def __init__(self, vocab, model: Model, name: str = "mlm_regressor", *, scorer: Optional[Callable] = None):
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg = {"format_version": COMPONENT_CFG_VERSION, "labels": [], "target_mean": [], "target_scale": []}

    @property
    def labels(self) -> Tuple[str, ...]:
        """The targets, in the head's output order."""
        return tuple(self.cfg["labels"])

    def add_label(self, label: str) -> int:
        if not isinstance(label, str):
            raise SpacyMlmError(f"a target name must be a string, got {label!r}")
        if label in self.labels:
            return 0
        if self.cfg["target_mean"]:  # set by initialize, with the head's width
            raise SpacyMlmError(f"'{self.name}' is initialized with targets {list(self.labels)}; cannot add {label!r}")
        self.cfg["labels"].append(label)
        return 1

    def _gold(self, examples: Iterable[Example]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """(values, known), each (n_examples, n_targets): the reference's cats,
        known = 0 where a target is left out. A value that is not a finite number
        is an error naming the example and the target, and so is a value for a
        target the component does not have: that row would be trained as if it
        had no value, and a name mismatch between config and data would go
        unnoticed (mlm_textcat refuses unknown labels for the same reason)."""
        rows, known = [], []
        for i, eg in enumerate(examples):
            unknown = sorted(set(eg.reference.cats) - set(self.labels))
            if unknown:
                raise SpacyMlmError(
                    f"'{self.name}' has the targets {list(self.labels)}, but example {i} "
                    f"({eg.reference.text[:60]!r}) has values for {unknown}. Leave `labels` in "
                    f"[initialize.components.{self.name}] unset to take the targets from the training data, "
                    "or make them match"
                )
            row, row_known = [], []
            for label in self.labels:
                value = eg.reference.cats.get(label)
                if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
                    raise SpacyMlmError(
                        f"'{self.name}': example {i} ({eg.reference.text[:60]!r}) has cats[{label!r}] = {value!r}; "
                        "a regression target must be a finite number"
                    )
                row.append(0.0 if value is None else float(value))
                row_known.append(value is not None)
            rows.append(row)
            known.append(row_known)
        shape = (len(rows), len(self.labels))
        return numpy.asarray(rows, dtype="float32").reshape(shape), numpy.asarray(known, dtype="float32").reshape(shape)

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Iterable[str]] = None,
    ) -> None:
        """Targets from `labels` or the examples' cats; each target's mean and
        spread over the examples, kept in `cfg` and saved with the component."""
        validate_get_examples(get_examples, "MLMRegressor.initialize")
        for label in labels if labels is not None else (c for eg in get_examples() for c in eg.reference.cats):
            self.add_label(label)
        if not self.labels:
            raise SpacyMlmError(
                f"'{self.name}' has no targets: give the examples' doc.cats a value per target "
                "(e.g. {\"relatedness\": 4.2}), or set `labels` in [initialize.components]"
            )
        values, known = self._gold(get_examples())
        columns = [values[known[:, j] > 0, j] for j in range(len(self.labels))]
        empty = [label for label, column in zip(self.labels, columns) if not len(column)]
        if empty:
            raise SpacyMlmError(f"'{self.name}': no training example has a value for the targets {empty}")
        self.cfg["target_mean"], self.cfg["target_scale"] = target_standardization(columns)
        self.model.set_dim("nO", len(self.labels), force=True)
        sample = list(islice(get_examples(), 10))
        self.record_pair_input(eg.predicted for eg in sample)
        self.model.initialize(X=[eg.reference for eg in sample])

    def from_disk(self, path, *, exclude=tuple()) -> "MLMRegressor":
        """spaCy's loader, with errors that name a missing or truncated file, and
        checks that the saved targets fit the saved weights and standardization."""
        load = super().from_disk
        schema = {"labels": TEXTS, "target_mean": NUMBERS, "target_scale": NUMBERS, "pair_input": FLAG}
        checked_from_disk(path, "mlm_regressor", lambda: load(path, exclude=exclude), exclude, schema)
        described = f"the targets {list(self.labels)}"
        check_outputs_fit(path, self.model, len(self.labels), described, "targets")
        for key in ("target_mean", "target_scale"):
            if len(self.cfg.get(key, ())) != len(self.labels):
                raise ModelLoadError(
                    ensure_path(path) / "cfg",
                    f"has {described} but {len(self.cfg.get(key, ()))} values in {key}: "
                    "edited, or mixed from two saves",
                )
        return self

    def _scaling(self, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        return (torch.tensor(self.cfg["target_mean"], dtype=torch.float32, device=device),
                torch.tensor(self.cfg["target_scale"], dtype=torch.float32, device=device))

    def predict(self, docs: Iterable[Doc]) -> numpy.ndarray:
        """(n_docs, n_targets) values in the training data's units, on the host."""
        docs = list(docs)
        self.check_pair_input(docs)
        standardized = self.model.predict(docs)
        mean, scale = self._scaling(standardized.device)
        return (standardized.float() * scale + mean).cpu().numpy()

    def set_annotations(self, docs: Iterable[Doc], values: numpy.ndarray) -> None:
        for doc, row in zip(docs, values):
            for label, value in zip(self.labels, row):
                doc.cats[label] = float(value)

    def get_loss(self, examples: Iterable[Example], scores: torch.Tensor) -> Tuple[float, torch.Tensor]:
        """Mean squared error of the standardized predictions over the known
        (example, target) cells, and its gradient for them."""
        examples = list(examples)
        validate_examples(examples, "MLMRegressor.get_loss")
        values, known = (torch.from_numpy(a).to(scores.device) for a in self._gold(examples))
        mean, scale = self._scaling(scores.device)
        return loss_and_gradient(lambda predictions: mean_squared_error(predictions, (values - mean) / scale, known),
                                 scores)
