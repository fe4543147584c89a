"""The teachers: trained pipelines run once per batch in inference mode, their
soft outputs averaged over the ensemble, and optionally kept on disk.

Each teacher reads a copy of the student's Docs of the batch (the targets are
per token, so the tokens must be the student's; a labelled Doc keeps the
tokens of its annotation), its encoder once
(`torch.inference_mode`), then each distilled component's model (its scores,
not its decoding). What comes out is, per Doc, one tensor per component (and
the top hidden states for the hidden-state loss) on the host, in float32.

`TeacherCache`: outputs of items seen before, for later epochs: one
safetensors file per step (`step-NNNNNNNN.safetensors`, tensors named
"ITEM/COMPONENT"), written atomically; its directory is named by a digest of
everything the outputs depend on, so a changed teacher or temperature never
reads another run's outputs. Nothing in it is executed (no pickles).
"""
import hashlib
import json
import logging
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch
from spacy.language import Language
from spacy.tokens import Doc

from ..engine.process_group import ProcessGroup
from ..errors import SpacyMlmError
from ..util.io import atomic_write_bytes, remove_left_overs
from .heads import distilled_components, targets_of
from .soft_targets import mean_of_teachers
from .student import encoder_name, load_pipeline

logger = logging.getLogger(__name__)
HIDDEN = "hidden"
Outputs = Dict[str, torch.Tensor]


class Teachers:
    def __init__(self, paths: Sequence[str], precision: str, temperature: float, hidden: bool):
        self.paths, self.temperature, self.hidden = list(paths), float(temperature), hidden
        self.pipelines: List[Language] = [load_pipeline(path, precision) for path in self.paths]
        self.components = distilled_components(self.pipelines[0])
        first = self.describe(self.pipelines[0])
        for path, nlp in zip(self.paths[1:], self.pipelines[1:]):
            if self.describe(nlp) != first:
                raise SpacyMlmError(f"teacher {path} has other components or labels than {self.paths[0]}: "
                                    f"{self.describe(nlp)} against {first}; an ensemble's outputs must mean the same")

    def describe(self, nlp: Language) -> Dict[str, tuple]:
        """What the teachers and the student must share: per component, its labels."""
        names = distilled_components(nlp)
        return {name: (nlp.get_pipe_meta(name).factory, targets_of(nlp, name).describe(nlp.get_pipe(name)))
                for name in names}

    def check_student(self, student: Language) -> None:
        if self.describe(student) != self.describe(self.pipelines[0]):
            raise SpacyMlmError("the student's components or labels are not the teachers': "
                                f"{self.describe(student)} against {self.describe(self.pipelines[0])}")

    def outputs(self, inputs: Sequence[Union[Doc, str]]) -> List[Outputs]:
        """Per input, the ensemble's mean output of each component (and "hidden").
        An input is a Doc (each teacher reads a copy: the same tokens, whoever
        made them) or a text (each teacher's tokenizer makes its Doc)."""
        per_teacher = [self._run(nlp, inputs) for nlp in self.pipelines]
        return [{key: mean_of_teachers([outputs[i][key] for outputs in per_teacher]) for key in per_teacher[0][i]}
                for i in range(len(inputs))]

    @torch.inference_mode()
    def _run(self, nlp: Language, inputs: Sequence[Union[Doc, str]]) -> List[Outputs]:
        docs = [nlp.make_doc(given) if isinstance(given, str) else given.copy() for given in inputs]
        encoder = nlp.get_pipe(encoder_name(nlp.config))
        encodings = encoder.predict(docs)
        hidden = [encoding.hidden_tensor.float().cpu() for encoding in encodings] if self.hidden else None
        encoder.set_annotations(docs, encodings)
        outputs: List[Outputs] = [{} for _ in docs]
        for name in self.components:
            component = nlp.get_pipe(name)
            scores = component.model.predict(docs)
            per_doc = targets_of(nlp, name).teacher(component, scores, docs, self.temperature)
            for row, tensor in zip(outputs, per_doc):
                row[name] = tensor.float().cpu()
        for i, row in enumerate(outputs):
            if hidden is not None:
                row[HIDDEN] = hidden[i]
        return outputs

    def identity(self, precision: str) -> Dict:
        """What the outputs depend on besides the data (the cache's name): the
        teachers' files themselves, so a teacher retrained in place is not taken
        for the one whose outputs were cached."""
        return {"teachers": [directory_digest(Path(p)) for p in self.paths], "precision": precision,
                "temperature": self.temperature, "hidden": self.hidden}


def directory_digest(directory: Path) -> str:
    """sha256 of every file below `directory` (relative names and contents)."""
    digest = hashlib.sha256()
    for file in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(f"\x00{file.relative_to(directory).as_posix()}\x00".encode("utf8"))
        with open(file, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


class TeacherCache:
    def __init__(self, root: Optional[Path], identity: Dict, group: ProcessGroup = ProcessGroup()):
        self.directory = None
        self.index: Dict[int, Path] = {}  # item -> the file holding its outputs
        # each process of a data-parallel run writes the outputs of its own share
        self.suffix = f"-rank{group.rank}" if group.world > 1 else ""
        if root is None:
            return
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf8")).hexdigest()[:16]
        self.directory = root / digest
        if group.main:  # before any process writes
            self.directory.mkdir(parents=True, exist_ok=True)
            for left in remove_left_overs(self.directory):
                logger.info("Removed %s, left by an interrupted run", left)
        group.barrier()
        from safetensors import safe_open

        for file in sorted(self.directory.glob("step-*.safetensors")):
            try:
                with safe_open(str(file), framework="pt") as stored:
                    for key in stored.keys():
                        self.index[int(key.split("/")[0])] = file
            except Exception as err:  # a damaged file is only a lost cache: recompute those items
                logger.warning("Teacher cache file %s is unreadable (%s); its items are recomputed", file, err)

    def get(self, items: Sequence[int]) -> Dict[int, Outputs]:
        from safetensors import safe_open

        found: Dict[int, Outputs] = {}
        by_file: Dict[Path, List[int]] = {}
        for item in items:
            if item in self.index:
                by_file.setdefault(self.index[item], []).append(item)
        for file, wanted in by_file.items():
            with safe_open(str(file), framework="pt") as stored:
                keys = list(stored.keys())
                for item in wanted:
                    prefix = f"{item}/"
                    found[item] = {key[len(prefix):]: stored.get_tensor(key) for key in keys if key.startswith(prefix)}
        return found

    def put(self, step: int, outputs: Dict[int, Outputs]) -> None:
        if self.directory is None or not outputs:
            return
        from safetensors.torch import save

        file = self.directory / f"step-{step:08d}{self.suffix}.safetensors"
        tensors = {f"{item}/{key}": tensor.contiguous() for item, row in outputs.items() for key, tensor in row.items()}
        atomic_write_bytes(file, save(tensors))
        for item in outputs:
            self.index[item] = file


def batch_outputs(teachers: Teachers, cache: TeacherCache, step: int, items: Sequence[int],
                  docs: Sequence[Doc]) -> List[Outputs]:
    """The teachers' outputs for `items` (whose Docs are `docs`): from the
    cache where it has them, the rest computed (and cached) now."""
    found = cache.get(items)
    missing = [i for i, item in enumerate(items) if item not in found]
    if missing:
        fresh = dict(zip((items[i] for i in missing), teachers.outputs([docs[i] for i in missing])))
        cache.put(step, fresh)
        found.update(fresh)
    return [found[item] for item in items]
