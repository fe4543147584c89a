"""The tasks a pipeline is trained for, each declared once in `TASKS`: its
component, corpus reader, scorer, config template block, budgets, how
`spacy_mlm evaluate` finds it in a pipeline and which Hugging Face head it
trades with `import-hf` / `export-hf`.

`init-config` (`training/config_templates.py`), `evaluate`
(`evaluation/evaluate.py`) and `import-hf` / `export-hf` / `init-config
--from-hf` (`interop/hf_heads.py`) read their lists of tasks, their choices
and their messages from here, so a new task is one row here and one template
block (`training/templates/tasks/NAME.cfg.jinja`, which extends
`pipeline.cfg.jinja`), besides its component, head and scorer. The names in a
row are registered names, as strings: this module imports nothing of the
package, so that every layer may read it (it stands outside the layers of
.importlinter, as `errors.py` does); tests/test_tasks.py checks each name
against spaCy's registry. `init-config --task distill` writes another kind of
config (`spacy_mlm distill`'s, not a spaCy pipeline's) and is no row.
"""
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

# The optimizers a task's config may name; the template block writes each one's settings.
ADAM = "Adam.v1"
# Adam(W) with layer-wise learning-rate decay (training/optimizer.py)
LAYER_DECAY_ADAM = "spacy_mlm.LayerDecayAdam.v2"
# The Hugging Face architectures a task's head is (their class names end so).
TOKEN_CLASSIFIER, SEQUENCE_CLASSIFIER = "ForTokenClassification", "ForSequenceClassification"


@dataclass(frozen=True)
class Budget:
    """How long and how fast a task trains in its config: `spacy train`'s
    steps, evaluation interval and batch size, and the warmup-linear schedule."""

    max_steps: int
    eval_frequency: int
    batch_size: int
    warmup_steps: int
    initial_rate: float


@dataclass(frozen=True)
class Task:
    """One task. `name` is init-config's --task and the component's name in
    the pipeline. `factory`, `reader`, `scorer` (None: the factory's default)
    and `optimizer` are the registered names its config uses.
    `score_weights`: [training.score_weights]. `shipped`: configs/NAME.cfg is
    this task's config.

    evaluate (None where it does not score the task): `assigns`, the Doc
    attribute its component sets (how a pipeline is found to be this task);
    `pairs`, for tasks whose components set the same attribute, whether the
    component was trained on sentence pairs; `headline`, the score reported;
    `statistic`, what the paired bootstrap resamples.

    import-hf / export-hf (None where no Hugging Face head holds the task):
    `hf_architecture`, the suffix of the head's class name, and `hf_name`,
    the task's name on import-hf's --task."""

    name: str
    factory: str
    reader: str
    scorer: Optional[str]
    optimizer: str
    budget: Budget
    score_weights: Dict[str, Optional[float]] = field(default_factory=dict)
    shipped: bool = True
    assigns: Optional[str] = None
    pairs: Optional[bool] = None
    headline: Optional[str] = None
    statistic: Optional[str] = None
    hf_architecture: Optional[str] = None
    hf_name: Optional[str] = None

    @property
    def template(self) -> str:
        """Its block of the pipeline config, under training/templates/."""
        return f"tasks/{self.name}.cfg.jinja"


CLASSIFIER_WEIGHTS = {"cats_score": 1.0, "cats_accuracy": 0.0}

TASKS: Dict[str, Task] = {task.name: task for task in (
    Task("ner", "mlm_ner", "spacy.Corpus.v1", "spacy.ner_scorer.v1", ADAM,
         Budget(max_steps=4000, eval_frequency=500, batch_size=16, warmup_steps=400, initial_rate=5e-5),
         {"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
         assigns="doc.ents", headline="ents_f", statistic="F1", hf_architecture=TOKEN_CLASSIFIER, hf_name="ner"),
    Task("textcat", "mlm_textcat", "spacy_mlm.TextCatCorpus.v1", "spacy_mlm.textcat_scorer.v1", LAYER_DECAY_ADAM,
         Budget(2000, 250, 32, 200, 1e-4), CLASSIFIER_WEIGHTS,
         assigns="doc.cats", pairs=False, headline="cats_accuracy", statistic="accuracy",
         hf_architecture=SEQUENCE_CLASSIFIER, hf_name="textcat"),
    # 2e-4 with LayerDecayAdam's decay 0.9 (the head at 2e-4, the top layer at 1.8e-4, the
    # embeddings at 1e-4): best and steadiest in the pair ablations (docs/classification.md),
    # ahead of 1e-4 with or without the decay
    Task("nli", "mlm_textcat", "spacy_mlm.NLICorpus.v1", "spacy_mlm.textcat_scorer.v1", LAYER_DECAY_ADAM,
         Budget(2000, 250, 32, 200, 2e-4), CLASSIFIER_WEIGHTS,
         assigns="doc.cats", pairs=True, headline="cats_accuracy", statistic="accuracy",
         hf_architecture=SEQUENCE_CLASSIFIER, hf_name="pairs"),
    # nothing is trained: one step, so that `spacy train` ends at once
    Task("vectors", "mlm_vectors", "spacy.Corpus.v1", None, LAYER_DECAY_ADAM, Budget(1, 1, 32, 0, 1e-4)),
    # 4 epochs of WiC train (5,428 pairs) in batches of 16 for SenseHead.v3 (~800 weights), at
    # a high rate: chosen on train pairs split by target word (docs/similarity.md)
    Task("senses", "mlm_senses", "spacy_mlm.WiCCorpus.v1", "spacy_mlm.wic_scorer.v1", ADAM,
         Budget(1360, 340, 16, 0, 0.03), {"wic_acc": 1.0}),
    # spaCy's spancat listening to the encoder, on NER's budget (spans that may overlap or nest)
    Task("spancat", "spancat", "spacy.Corpus.v1", None, ADAM, Budget(4000, 500, 16, 400, 5e-5),
         {"spans_sc_f": 1.0, "spans_sc_p": 0.0, "spans_sc_r": 0.0}, shipped=False),
)}


def evaluated_tasks() -> Tuple[Task, ...]:
    """The tasks `spacy_mlm evaluate` scores, in the table's order."""
    return tuple(task for task in TASKS.values() if task.assigns is not None)


def hf_tasks() -> Dict[str, Task]:
    """The tasks a Hugging Face head holds, by their name on import-hf's --task."""
    return {task.hf_name: task for task in TASKS.values() if task.hf_name is not None}


def spoken_list(names) -> str:
    """"a, b or c", for help texts and messages naming the tasks."""
    names = list(names)
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
