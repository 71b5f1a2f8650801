"""Which path a chunk takes: the numpy path on the CPU, the torch path for a chunk on a device.

The switch (:func:`torch_path`, with the private test switch :data:`_FORCE_TORCH`) and the per-device copies of a
frozen reference object's arrays (:class:`DeviceCached`), read by the swap reading's shifts, its feature matching
and the counterfactual chunk (:mod:`faux_checks.method.shifts`, :mod:`faux_checks.method.matching`,
:mod:`faux_checks.method.counterfactual`, :mod:`faux_checks.method.chunk`).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["DeviceCached", "t64", "use_torch_path"]


#: Private switch for tests: True runs the torch path of the matched quantiles (:func:`~faux_checks.method.quantiles.interp_t` and the
#: ``*_t`` helpers) on CPU tensors too. Without it the torch path runs only for a chunk on a non-CPU device; the
#: CPU keeps the numpy path (bit-identical to the pinned scores; the matched features' values run the same torch code
#: on the CPU and come back as an ndarray, :meth:`~faux_checks.method.matching.FeatureMatching.values`).
_FORCE_TORCH = False


def use_torch_path(x) -> bool:
    """Whether a chunk's tensor ``x`` takes the torch path: a Tensor on a non-CPU device (or :data:`_FORCE_TORCH`)."""
    return isinstance(x, torch.Tensor) and (_FORCE_TORCH or x.device.type != "cpu")


class DeviceCached:
    """Mixin: per-device copies of a frozen reference object's arrays (built once per device, never pickled)."""

    def _on_device(self, device: torch.device, key, build):
        cache = self.__dict__.setdefault("_device_cache", {})               # frozen dataclass: no __setattr__
        k = (str(device), key)
        if k not in cache:
            cache[k] = build()
        return cache[k]

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_device_cache", None)
        return state


def t64(a, device) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64, device=device)
