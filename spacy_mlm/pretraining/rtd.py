"""Replaced-token detection (ELECTRA, Clark et al. 2020) as a pretraining objective.

Masked-LM learns only from the ~15% chosen positions. Here a small generator,
trained with our masked-LM objective on the masked input, proposes a token for
every chosen position by sampling from its output distribution; the encoder
being pretrained (the discriminator) reads the original text with those
proposals in place and predicts for every non-padding position whether its
token was replaced, so every position teaches it something. A proposal equal
to the original token counts as original (ELECTRA's rule: nothing was replaced).
Loss = generator masked-LM loss + `discriminator_weight` x discriminator loss
(ELECTRA: 50, since the binary loss per position is much smaller than the
vocabulary-wide one); the sampling is not differentiated through.

Sharing: as in ELECTRA, generator and discriminator share the whole embedding
module (token, position and segment embeddings and its LayerNorm): the
generator *is* built around the discriminator's module, and its decoder stays
tied to the shared token embeddings. The generator is narrower (`generator_size`
x the discriminator's attention heads, same head width, same depth; feed-forward
width scaled alike, ELECTRA's 1/4 by default), so, as ELECTRA does when widths
differ, it projects the shared embeddings to its width (HF `ElectraModel`'s
`embeddings_project`) and its head projects back to the embedding width before
the tied decoder (`ElectraForMaskedLM` built with `embedding_size` = the
discriminator's width).

`embedding_sharing = "disentangled"` is DeBERTaV3's gradient-disentangled
sharing (He et al. 2021) instead: the discriminator reads the shared token
embeddings through a stop-gradient plus a difference of its own (starting at
zero), so its loss (ELECTRA weights it 50) no longer pulls the table the generator's
masked-LM trains; position and segment embeddings and their LayerNorm stay
shared. The checkpoints keep the shared table in their model and the
difference in their training state; the run's final model folds the two into
the discriminator's token embeddings.

The discriminator is a bare encoder of the source's (or the scratch config's)
own architecture, saved as a plain HF directory; its RTD head (dense + activation
+ one logit, ELECTRA's `ElectraDiscriminatorPredictions`) is saved beside it as
`rtd_head.safetensors`, and the generator lives in the checkpoints' training
state (it starts fresh in every run, also when continuing from a source model).

The proposals are drawn by inverse-CDF sampling with one uniform number per
position, drawn by the loop from a generator seeded by (seed, step) like the
masks: a resumed or distributed run draws exactly what an uninterrupted one does.
"""
from itertools import chain
from typing import Dict, List, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import ElectraConfig, ElectraForMaskedLM
from transformers.models.electra.modeling_electra import ElectraDiscriminatorPredictions
from transformers.models.roberta.modeling_roberta import create_position_ids_from_input_ids

from ..errors import ModelLoadError, SpacyMlmError
from ..models.families import family_layout, segment_inputs
from .config import EMBEDDING_SHARING
from .masking import IGNORE_INDEX
from .objectives import ObjectiveSums, PretrainingModel

# what a discriminator config must say for a generator to be sized from it
SIZE_SETTINGS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size")


def sample_replacements(logits: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """One token per row of `logits` (n, vocab), drawn from softmax(logits) by
    inverse CDF with `uniforms` (n,) in [0, 1): a pure function of its inputs."""
    cdf = torch.softmax(logits.float(), dim=-1).cumsum(-1)
    draws = torch.searchsorted(cdf, (uniforms.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
    return draws.clamp_(max=logits.shape[-1] - 1)  # rounding could put the last bin's draws past it


def corrupt(input_ids: torch.Tensor, labels: torch.Tensor, proposals: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(original ids, discriminator input): the masked input with the original
    tokens back (`labels` hold them at the chosen positions) and `proposals`
    (row-major, one per chosen position) in place of the chosen ones."""
    chosen = labels != IGNORE_INDEX
    original = torch.where(chosen, labels, input_ids)
    corrupted = original.clone()
    corrupted[chosen] = proposals
    return original, corrupted


def replaced_token_labels(original: torch.Tensor, corrupted: torch.Tensor) -> torch.Tensor:
    """1.0 where the discriminator's input differs from the original text, 0.0
    where it is the original: unchosen positions, and chosen ones whose proposal
    happens to be the original token."""
    return (corrupted != original).float()


def discriminator_sums(logits: torch.Tensor, targets: torch.Tensor, scored: torch.Tensor):
    """(summed binary cross-entropy, number correct, number replaced) over the
    `scored` (non-padding) positions of (rows, length) logits and 0/1 targets."""
    logits, targets = logits[scored].float(), targets[scored]
    loss = F.binary_cross_entropy_with_logits(logits, targets, reduction="sum")
    correct = ((logits.detach() > 0).float() == targets).sum()
    return loss, correct, targets.sum()


def generator_config(config, size: float) -> ElectraConfig:
    """The ELECTRA generator config for a discriminator `config`: round(size x
    heads) heads (at least one) of the discriminator's head width, the
    feed-forward width scaled alike, the same depth, vocabulary and dropout, and
    embeddings of the discriminator's width (shared, projected to its own)."""
    missing = [name for name in SIZE_SETTINGS if not isinstance(getattr(config, name, None), int)]
    if missing:
        raise SpacyMlmError(
            f"replaced-token detection sizes its generator from a BERT-style config; the discriminator's "
            f"'{config.model_type}' config has no {', '.join(missing)}"
        )
    head_width = config.hidden_size // config.num_attention_heads
    heads = max(1, round(size * config.num_attention_heads))
    width = heads * head_width
    return ElectraConfig(
        vocab_size=config.vocab_size,
        # the shared embeddings' width: ELECTRA's and ALBERT's embeddings are narrower than their layers
        embedding_size=getattr(config, "embedding_size", None) or config.hidden_size,
        hidden_size=width,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=heads,
        intermediate_size=max(1, round(config.intermediate_size * width / config.hidden_size)),
        hidden_act=getattr(config, "hidden_act", "gelu"),
        hidden_dropout_prob=getattr(config, "hidden_dropout_prob", 0.1),
        attention_probs_dropout_prob=getattr(config, "attention_probs_dropout_prob", 0.1),
        max_position_embeddings=getattr(config, "max_position_embeddings", 512),
        type_vocab_size=getattr(config, "type_vocab_size", 2),
        layer_norm_eps=getattr(config, "layer_norm_eps", 1e-12),
        initializer_range=getattr(config, "initializer_range", 0.02),
        pad_token_id=config.pad_token_id,
    )


def build_generator(discriminator: nn.Module, size: float, seed: int) -> ElectraForMaskedLM:
    """A fresh generator (initialised from `seed`) around the discriminator's embedding module."""
    embeddings = getattr(discriminator, "embeddings", None)
    if embeddings is None or not hasattr(embeddings, "word_embeddings"):
        raise ModelLoadError(
            getattr(discriminator, "name_or_path", type(discriminator).__name__),
            f"'{discriminator.config.model_type}': {type(discriminator).__name__} has no BERT-style embeddings module "
            "to share with a generator; "
            "replaced-token detection supports BERT- and RoBERTa-style encoders",
        )
    torch.manual_seed(seed)
    generator = ElectraForMaskedLM(generator_config(discriminator.config, size))
    generator.electra.embeddings = embeddings
    generator.tie_weights()  # the decoder back onto the shared token embeddings
    try:
        family_layout(generator)  # runs the generator once through the shared embeddings
    except ModelLoadError as err:
        raise ModelLoadError(
            getattr(discriminator, "name_or_path", type(discriminator).__name__),
            f"'{discriminator.config.model_type}': its embeddings cannot serve an ELECTRA generator "
            f"({err}); replaced-token detection needs BERT-style embeddings",
        ) from None
    return generator


class ReplacedTokenDetection(nn.Module):
    """Generator (masked-LM, `PretrainingModel`) + discriminator (the bare
    encoder being pretrained) + RTD head. Same calling convention as
    `PretrainingModel`, plus `sample_noise` (rows, length): one uniform number
    per position, those of the chosen positions used for the proposals."""

    def __init__(self, discriminator: nn.Module, generator: ElectraForMaskedLM, discriminator_weight: float,
                 embedding_sharing: str = "shared"):
        super().__init__()
        self.discriminator = discriminator
        self.generator = PretrainingModel(generator)
        self.rtd_head = ElectraDiscriminatorPredictions(discriminator.config)
        self.rtd_head.apply(discriminator._init_weights)
        self.discriminator_weight = discriminator_weight
        if embedding_sharing not in EMBEDDING_SHARING:
            raise SpacyMlmError(f"embedding_sharing must be one of {', '.join(EMBEDDING_SHARING)}, got {embedding_sharing!r}")
        table = discriminator.embeddings.word_embeddings.weight
        # the discriminator's own difference to the shared token embeddings ("disentangled" only)
        self.embedding_delta = nn.Parameter(torch.zeros_like(table)) if embedding_sharing == "disentangled" else None

    def discriminator_inputs(self, ids: torch.Tensor) -> Dict[str, torch.Tensor]:
        """The discriminator's token inputs for `ids`: the ids themselves when the
        embeddings are shared; else its embedded tokens, stop-gradient(shared) +
        delta, with the positions the ids would give (RoBERTa-style embeddings
        count them from the padding id, skipping padding; BERT's need none)."""
        if self.embedding_delta is None:
            return {"input_ids": ids}
        embeddings = self.discriminator.embeddings
        lookup = embeddings.word_embeddings
        table = lookup.weight.detach() + self.embedding_delta
        inputs = {"inputs_embeds": F.embedding(ids, table, padding_idx=lookup.padding_idx)}
        if getattr(embeddings, "padding_idx", None) is not None:
            inputs["position_ids"] = create_position_ids_from_input_ids(ids, embeddings.padding_idx)
        return inputs

    def prepare_output(self) -> None:
        """Fold the discriminator's difference into the token embeddings it is
        saved with, once training is over (the generator, which reads the same
        table, is not saved). The discriminator computes the same function after."""
        if self.embedding_delta is not None:
            with torch.no_grad():
                self.discriminator.embeddings.word_embeddings.weight.add_(self.embedding_delta)
                self.embedding_delta.zero_()

    def sampling_noise(self, shape: Tuple[int, int], rng: np.random.Generator) -> np.ndarray:
        return rng.random(shape, dtype=np.float32)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        sample_noise: torch.Tensor,
        attention_mask=None,
        token_type_ids=None,
        nsp_labels=None,
    ) -> ObjectiveSums:
        sums = self.generator(input_ids, labels, attention_mask=attention_mask, token_type_ids=token_type_ids)
        chosen = labels != IGNORE_INDEX
        with torch.no_grad():
            proposals = sample_replacements(sums.mlm_logits, sample_noise[chosen])
        original, corrupted = corrupt(input_ids, labels, proposals)
        hidden = self.discriminator(
            **self.discriminator_inputs(corrupted), attention_mask=attention_mask,
            **segment_inputs(self.discriminator, token_type_ids),
        ).last_hidden_state
        scored = torch.ones_like(chosen) if attention_mask is None else attention_mask.bool()
        sums.rtd_loss, sums.rtd_correct, sums.rtd_replaced = discriminator_sums(
            self.rtd_head(hidden), replaced_token_labels(original, corrupted), scored
        )
        return sums

    def _shared_ids(self) -> set:
        return {id(t) for t in chain(self.discriminator.parameters(), self.discriminator.buffers())}

    def generator_state(self) -> Dict[str, torch.Tensor]:
        """The generator's own tensors: not the embeddings (and tied decoder
        weight) it shares with the discriminator, which the saved model holds."""
        shared = self._shared_ids()
        state = self.generator.mlm_model.state_dict(keep_vars=True)
        return {name: tensor.detach() for name, tensor in state.items() if id(tensor) not in shared}

    def objective_state(self) -> Dict[str, object]:
        state = {"generator": self.generator_state(), "rtd_head": self.rtd_head.state_dict()}
        if self.embedding_delta is not None:
            state["embedding_delta"] = self.embedding_delta.detach()
        return state

    def load_objective_state(self, state: Dict[str, object]) -> None:
        for key in ("generator", "rtd_head"):
            if not isinstance(state.get(key), dict):
                raise SpacyMlmError(f"the checkpoint has no {key} state: it is not from a replaced-token detection run")
        missing, unexpected = self.generator.mlm_model.load_state_dict(state["generator"], strict=False)
        shared = self._shared_ids()
        own = self.generator.mlm_model.state_dict(keep_vars=True)
        not_shared = [name for name in missing if id(own[name]) not in shared]
        if not_shared or unexpected:
            raise SpacyMlmError(
                "the checkpoint's generator does not fit this run's: "
                f"missing {not_shared[:3]}, unexpected {list(unexpected)[:3]} (another generator_size?)"
            )
        self.rtd_head.load_state_dict(state["rtd_head"])
        delta = state.get("embedding_delta")
        if (delta is None) != (self.embedding_delta is None):
            saved, wanted = (("shared", "disentangled") if delta is None else ("disentangled", "shared"))
            raise SpacyMlmError(f"the checkpoint's run read the token embeddings {saved}, this one reads them {wanted} "
                                "([pretraining.rtd] embedding_sharing)")
        if delta is not None:
            if tuple(delta.shape) != tuple(self.embedding_delta.shape):
                raise SpacyMlmError(f"the checkpoint's embedding difference is {tuple(delta.shape)}, the model's token "
                                    f"embeddings {tuple(self.embedding_delta.shape)}")
            with torch.no_grad():
                self.embedding_delta.copy_(delta)

    def output_files(self) -> List[Tuple[str, Dict[str, torch.Tensor]]]:
        return [("rtd_head.safetensors", self.rtd_head.state_dict())]
