"""How the task heads' torch layers start."""
import torch


def init_output_layer(layer: torch.nn.Linear, init_std: float) -> None:
    """Weights Normal(0, init_std), as Hugging Face's task heads (BERT's
    initializer_range, 0.02), bias zero; init_std = 0 gives zeros. A head at
    zero passes no gradient to the encoder until its own weights have grown,
    which costs most of a short fine-tuning budget. Drawn from torch's global
    generator, which spaCy's `fix_random_seed` seeds."""
    if init_std > 0:
        torch.nn.init.normal_(layer.weight, std=init_std)
    else:
        torch.nn.init.zeros_(layer.weight)
    torch.nn.init.zeros_(layer.bias)
