"""The shim between thinc and every torch module of the package (the encoder's
transformer and the task heads).

Two things differ from thinc's `PyTorchShim`:

* `finish_update` steps the module with a torch optimizer that follows the
  config's thinc optimizer (`torch_stepper.TorchStepper`), on the
  module's device, instead of calling thinc's numpy Adam once per parameter;
* a head's module can be built late: its sizes (the encoder's width, the
  number of labels) are known only at `initialize`, so the shim starts empty
  and `build(**settings)` makes the module then. `to_bytes` stores the
  settings next to the weights (safetensors, never a pickle), so `from_bytes`
  rebuilds the same module before it loads them.
"""
from typing import Callable, Dict, Optional

import srsly
import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from thinc.api import Optimizer, PyTorchShim, get_torch_default_device

from ..errors import ModelLoadError, NotInitializedError
from .torch_stepper import TorchStepper


class TorchShim(PyTorchShim):
    def __init__(self, module: Optional[torch.nn.Module] = None, *, build: Optional[Callable[..., torch.nn.Module]] = None):
        super().__init__(module)
        self._build = build
        self._stepper = TorchStepper()

    @property
    def module(self) -> torch.nn.Module:
        if self._model is None:
            raise NotInitializedError("the model has no weights yet: call nlp.initialize() (or load a saved pipeline) first")
        return self._model

    def build(self, **settings) -> torch.nn.Module:
        """Make the module from its settings (kept for serialization), on the current device."""
        self.cfg = dict(settings)
        self._model = self._build(**settings).to(get_torch_default_device())
        self._stepper = TorchStepper()
        return self._model

    def to_device(self, device_type: str, device_id: int) -> None:
        if self._model is not None:  # an unbuilt head is built on the current device
            super().to_device(device_type, device_id)

    def finish_update(self, optimizer: Optimizer) -> None:
        if self._model is not None:
            self._stepper.step(self._model, optimizer)

    def to_bytes(self) -> bytes:
        state = {name: tensor.detach().contiguous().cpu() for name, tensor in self.module.state_dict().items()}
        return srsly.msgpack_dumps({"config": self.cfg, "state": save_tensors(state)})

    def from_bytes(self, bytes_data: bytes) -> "TorchShim":
        try:
            msg = srsly.msgpack_loads(bytes_data)
            settings: Dict = msg["config"]
            state = load_tensors(msg["state"])
        except Exception as err:  # msgpack and safetensors raise several kinds
            raise ModelLoadError("<model bytes>", f"not a saved spacy-mlm torch module ({type(err).__name__}: {err})") from None
        module = self.build(**settings)
        try:
            module.load_state_dict(state)
        except RuntimeError as err:
            raise ModelLoadError("<model bytes>", f"the weights do not fit the module's settings {settings}: {err}") from None
        module.to(get_torch_default_device())
        return self
