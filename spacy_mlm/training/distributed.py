"""Data-parallel fine-tuning: `spacy train`'s own loop on every process of a
`torchrun` launch, updating the weights as one process would.

spaCy has no data-parallel training of its own, but every weight our
components train is in a torch module that `TorchShim.finish_update` steps
with torch's optimizer, after `nlp.update` has left its gradient there: between
the two, the gradients can be summed across processes. So each process runs `spacy.training.loop.train` unchanged (config, batcher, logger,
scores, `model-best`/`model-last`), and this module changes four things while a
run is active (`data_parallel_training`):

* the steps: every process reads the whole corpus and shuffles it with the
  same seed, so every process sees the same global batch; each trains on its
  share (`padded_shares`). The union of a step's shares is the batch one
  process would train on, and every process takes the same number of steps in
  every epoch, which sharding the corpus itself could not give with a batcher
  that counts words;
* the losses: a component's loss is a mean over its batch (annotated tokens,
  rows, known cells); `step_sum` (`util/global_batch.py`) makes the denominator the count over the whole
  global batch, so each process's gradient is its part of the one-process
  gradient, and their sum (`GradientReducer`, engine/gradient_sync.py:
  through shared memory on one machine's CPUs, else collectives; complete
  after `nlp.update` and before any optimizer step, so a failing collective
  never leaves one module stepped and another not) is the one-process
  gradient itself. The learning-rate schedule advances once per step in every
  process, as in one;
* evaluation: the first process evaluates and sends the scores to the others,
  which wait for them, so patience and best checkpoints are decided alike
  everywhere; only the first process logs and saves;
* randomness: the shuffles come from the seeded state they would have in one
  process, kept apart from everything else; dropout and any other sampling
  draws from a state seeded `seed + rank`.

Weights that thinc's optimizer steps (spaCy's own `ner`, `tagger`, `textcat`,
`tok2vec`) are not summed: a pipeline that trains any is refused at start
(`check_synchronisable`). A process that dies ends the others: its peers'
collectives fail at once (gloo, NCCL) or after `timeout`, and torchrun stops
the rest.
"""
import contextlib
import logging
import random
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy
import torch
from spacy.language import Language
from spacy.training import loop as spacy_loop
from thinc.api import Model

from ..errors import SpacyMlmError
from ..util.global_batch import summed_over_processes
from ..engine.gradient_sync import GradientReducer
from ..engine.process_group import ProcessGroup

logger = logging.getLogger(__name__)


class DataParallelError(SpacyMlmError):
    """A pipeline or setting that data-parallel training cannot run as one process would."""


_active: Optional[ProcessGroup] = None  # set while `data_parallel_training` runs


def check_same_weights(nlp: Language) -> None:
    """Raise if the processes' weights differ (each process checks a sum of its
    modules' weights as saved against the first process's). Read through
    `state_dict`, which applies the word-embedding decay still pending
    (`models/row_adamw.py`) in every process at the same step, before the first
    process evaluates (a prediction applies it too): so every process keeps
    applying it at the same steps and their weights stay equal bit for bit.
    (A row becomes active where a process's share looks it up and in every
    process when its summed gradient arrives, the same step; the padding
    row, which no gradient reaches, is active from the start everywhere.)"""
    sums = torch.stack([torch.stack([t.double().sum() for t in m.state_dict().values()]).sum()
                        for m in torch_modules(nlp)])
    first = sums.clone()
    torch.distributed.broadcast(first, src=0)
    if not torch.equal(first, sums):
        raise DataParallelError(f"the weights of process {_active.rank if _active else '?'} differ from process 0's "
                                "after a step: a component trained weights outside its torch modules")


def torch_modules(nlp: Language, exclude: Iterable[str] = ()) -> List[torch.nn.Module]:
    """The built torch modules of the pipeline's components (but `exclude`), in pipeline order."""
    modules = []
    for name, proc in nlp.pipeline:
        if name in exclude:
            continue
        model = getattr(proc, "model", None)
        if isinstance(model, Model):
            for node in model.walk():
                modules.extend(s._model for s in node.shims if isinstance(getattr(s, "_model", None), torch.nn.Module))
    return modules


def check_synchronisable(nlp: Language, frozen: Iterable[str], accumulate_gradient: int) -> None:
    """Refuse what data-parallel training would not update as one process:
    a component that trains thinc weights (its gradients are never summed,
    so the processes' copies would drift apart), and gradient accumulation."""
    frozen = set(frozen)
    for name, proc in nlp.pipeline:
        model = getattr(proc, "model", None)
        if name in frozen or not getattr(proc, "is_trainable", False) or not isinstance(model, Model):
            continue
        layers = sorted({node.name for node in model.walk() if node.param_names})
        if layers:
            factory = nlp.get_pipe_meta(name).factory
            raise DataParallelError(
                f"component '{name}' (factory '{factory}') trains weights that thinc's optimizer steps (layers "
                f"{', '.join(layers)}), which data-parallel training does not sum across processes. Add '{name}' to "
                "[training] frozen_components, use spacy-mlm's components (mlm_ner, mlm_textcat, mlm_regressor), "
                "or train this pipeline in one process (spacy train)"
            )
    if accumulate_gradient != 1:
        raise DataParallelError(
            f"[training] accumulate_gradient = {accumulate_gradient}: under torchrun each process already trains on "
            "its share of the batch; set accumulate_gradient = 1 (run more processes to use less memory each)"
        )


def rank_share(batch: List[Any], group: ProcessGroup) -> Optional[List[Any]]:
    """This process's examples of a global batch (`padded_shares`), or None
    when some process's share would have no tokens (it would skip its losses
    and leave the others waiting): all processes then skip the batch."""
    shares = padded_shares([len(eg.predicted) for eg in batch], group.world)
    if any(not any(len(batch[i].predicted) for i in share) for share in shares):
        return None
    return [batch[i] for i in shares[group.rank]]


def padded_shares(lengths: Sequence[int], world: int) -> List[List[int]]:
    """Split a batch (the examples' lengths) into `world` shares of example
    indices (each in batch order) so that the largest share's padded size,
    examples x longest, is smallest: each process pads its share to its own
    longest example, and every process waits for the slowest at the step's
    collectives. The examples sorted longest first are cut into consecutive
    runs, each as long as a size cap allows (searched by bisection); every
    share gets at least one example when there are enough. On CoNLL sentences
    in batches of 16 over 2 processes the slowest share pads to 200 tokens a
    step where examples dealt in turn (`batch[rank::world]`) pad to 312."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    sizes = [max(1, lengths[i]) for i in order]

    def cuts_within(cap: int) -> Optional[List[int]]:
        cuts, start = [], 0
        while start < len(order) and len(cuts) < world:
            left_for_others = world - len(cuts) - 1
            take = min(max(1, cap // sizes[start]), max(1, len(order) - start - left_for_others))
            start = min(len(order), start + take)
            cuts.append(start)
        return cuts if start == len(order) else None

    low, high = 1, max(1, len(order) * (sizes[0] if sizes else 1))
    while low < high:
        middle = (low + high) // 2
        if cuts_within(middle) is None:
            low = middle + 1
        else:
            high = middle
    cuts = cuts_within(low) or []
    cuts += [len(order)] * (world - len(cuts))
    starts = [0] + cuts[:-1]
    return [sorted(order[a:b]) for a, b in zip(starts, cuts)]


class _Randomness:
    """Python's random state for spaCy's shuffles (and augmenters), kept
    apart: what would shuffle one process's epochs shuffles every process's
    alike, whatever else draws numbers meanwhile. Everything else draws from
    `seed + rank` (seed null: 0)."""

    def __init__(self, seed: Optional[int], group: ProcessGroup):
        self.shuffles = random.getstate()
        seed = (seed or 0) + group.rank
        random.seed(seed)
        numpy.random.seed(seed)
        torch.manual_seed(seed)

    @contextlib.contextmanager
    def shuffling(self):
        own = random.getstate()
        random.setstate(self.shuffles)
        try:
            yield
        finally:
            self.shuffles = random.getstate()
            random.setstate(own)


def _shares(train_data: Iterator[Tuple[int, List]], group: ProcessGroup, randomness: _Randomness, words: List[int]):
    skipped = 0
    while True:
        with randomness.shuffling():
            item = next(train_data, None)
        if item is None:
            return
        epoch, batch = item
        batch = list(batch)
        share = rank_share(batch, group)
        if share is None:
            skipped += 1
            if skipped == 1 and group.main:
                logger.warning("A batch of %d examples has too few with tokens for %d processes: skipped (as is "
                               "every such batch)", len(batch), group.world)
            continue
        words[0] += sum(len(eg) for eg in batch)
        yield epoch, share


def _evaluate_on_main(evaluate: Callable[[], Tuple[float, Dict]], group: ProcessGroup, nlp: Language,
                      reducer: GradientReducer):
    def evaluate_once() -> Tuple[float, Dict]:
        reducer.share_weights()
        check_same_weights(nlp)
        box = [evaluate() if group.main else None]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    return evaluate_once


def _summed_losses(losses: Dict[str, float]) -> Dict[str, float]:
    names = sorted(losses)
    totals = torch.tensor([losses[name] for name in names], dtype=torch.float64)
    if torch.distributed.get_backend() == "nccl":
        totals = totals.cuda()
    torch.distributed.all_reduce(totals)
    return dict(zip(names, totals.tolist()))


def _then_sum_gradients(update: Callable, reducer: GradientReducer) -> Callable:
    """`nlp.update` (called with sgd=False: the loop steps afterwards), its
    gradients summed over the processes as backward finishes them, the rest after it."""

    def update_then_sum(*args, **kwargs):
        reducer.begin()
        losses = update(*args, **kwargs)
        reducer.finish()
        return losses

    return update_then_sum


def _data_parallel_steps(original: Callable, group: ProcessGroup, seed: Optional[int], shared_memory: bool) -> Callable:
    """`train_while_improving` on this process's shares, with the first
    process's evaluations, and the step's losses and words counted over all;
    every process holds the same weights at each evaluation and at the end."""

    def steps(nlp, optimizer, train_data, evaluate, **settings):
        # the first process's state for the shuffles: with [training] seed = null spaCy seeds nothing
        state = [random.getstate()]
        torch.distributed.broadcast_object_list(state, src=0)
        random.setstate(state[0])
        randomness = _Randomness(seed, group)
        words = [0]
        shares = _shares(iter(train_data), group, randomness, words)
        reducer = GradientReducer(torch_modules(nlp, exclude=settings["exclude"]), shared_memory=shared_memory)
        if group.main:
            logger.info("Gradients summed %s", "and weights stepped through shared memory"
                        if reducer.shared_memory else f"with {torch.distributed.get_backend()} collectives")
        nlp.update = _then_sum_gradients(nlp.update, reducer)
        try:
            for batch, info, is_best in original(nlp, optimizer, shares,
                                                 _evaluate_on_main(evaluate, group, nlp, reducer), **settings):
                info["words"] = words[0]
                if is_best is not None:
                    info["losses"] = _summed_losses(info["losses"])
                yield batch, info, is_best
            reducer.share_weights()  # the last step's, before model-last is saved
        finally:
            del nlp.update  # Language.update again
            reducer.close()

    return steps


@contextlib.contextmanager
def data_parallel_training(group: ProcessGroup, seed: Optional[int], shared_memory: bool = True):
    """While active: losses are means over the global batch, gradients are
    summed before each torch step, and `spacy.training.loop.train` trains
    this process's shares (see the module's docstring). `shared_memory`:
    sum and step through shared memory where every process can
    (`engine/shared_memory.py`), else with collectives."""
    global _active
    original = spacy_loop.train_while_improving
    spacy_loop.train_while_improving = _data_parallel_steps(original, group, seed, shared_memory)
    _active = group
    try:
        with summed_over_processes():
            yield
    finally:
        _active = None
        spacy_loop.train_while_improving = original
