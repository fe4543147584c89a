"""Tiny teachers (a 4-layer BERT of width 32 under mlm_ner or mlm_textcat, a few
updates) and the unlabelled text they are distilled over."""
import random
from pathlib import Path

import pytest
import spacy
from spacy.training import Example
from spacy.util import fix_random_seed

import spacy_mlm  # noqa: F401
from spacy_mlm.testing import SAMPLE_TEXT, make_tiny_bert

NER = [
    ("Anna Berg works in Oslo .", [(0, 9, "PER"), (19, 23, "LOC")]),
    ("Peter Grant flew to Paris .", [(0, 11, "PER"), (20, 25, "LOC")]),
    ("Maria Lopez lives in Berlin .", [(0, 11, "PER"), (21, 27, "LOC")]),
]
CATS = [(text, {"POS": float(i % 2), "NEG": float(1 - i % 2)}) for i, text in enumerate(SAMPLE_TEXT[:8])]


@pytest.fixture(scope="session")
def deep_model_dir(tmp_path_factory):
    """A 4-layer tiny BERT: layer selection has layers to choose from."""
    return make_tiny_bert(tmp_path_factory.mktemp("deep_bert"), num_layers=4)


def train_teacher(model_dir: Path, output: Path, component: str, seed: int = 0, crf: bool = False,
                  updates: int = 8) -> Path:
    fix_random_seed(seed)
    nlp = spacy.blank("en")
    nlp.add_pipe("mlm_encoder", name="encoder", config={"model": {"path": str(model_dir)}})
    if component == "ner":
        nlp.add_pipe("mlm_ner", name="ner", config={"model": {"crf": crf}})
        examples = [Example.from_dict(nlp.make_doc(t), {"entities": ents}) for t, ents in NER]
    else:
        nlp.add_pipe("mlm_textcat", name="textcat")
        examples = [Example.from_dict(nlp.make_doc(t), {"cats": cats}) for t, cats in CATS]
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.01
    rng = random.Random(seed)
    for _ in range(updates):
        rng.shuffle(examples)
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(output)
    return output


@pytest.fixture(scope="session")
def ner_teacher(deep_model_dir, tmp_path_factory):
    return train_teacher(deep_model_dir, tmp_path_factory.mktemp("teacher") / "ner", "ner")


@pytest.fixture(scope="session")
def texts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("\n".join(SAMPLE_TEXT + [text for text, _ in NER]) + "\n", encoding="utf8")
    return path


def distill_config(path: Path, teacher, texts: Path, **settings) -> Path:
    """A config file of `settings` over small budgets; `student.*` keys go to [distillation.student]."""
    student = {k.split(".", 1)[1]: v for k, v in settings.items() if k.startswith("student.")}
    main = {"max_steps": 8, "batch_size": 4, "checkpoint_every": 0, "log_every": 1,
            **{k: v for k, v in settings.items() if not k.startswith("student.")}}
    teachers = [str(teacher)] if isinstance(teacher, (str, Path)) else [str(t) for t in teacher]

    def value(v):
        return "null" if v is None else str(v).lower() if isinstance(v, bool) else repr(v).replace("'", '"')

    lines = ["[distillation]", f"teacher = {value(teachers)}", f"texts = {value(str(texts))}"]
    lines += [f"{k} = {value(v)}" for k, v in main.items()]
    lines += ["", "[distillation.student]"] + [f"{k} = {value(v)}" for k, v in student.items()]
    lines += ["", "[distillation.optimizer]", "learning_rate = 0.001", "warmup_steps = 0"]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path
