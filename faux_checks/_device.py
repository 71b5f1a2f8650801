"""The torch device the scoring and the auxiliary-model training run on (private).

The setting is the policy's ``[scale] device`` ("auto", "cpu" or "cuda"); the CLI's ``--device`` sets
:data:`DEVICE_ENV` for the process (and the flows it runs in-process), which wins over the policy. "auto" is CUDA
when ``torch.cuda.is_available()``, else the CPU. The device is an operational setting: it is recorded in the
check's provenance (``device``) and is not part of the policy hash (the scores agree within float32 rounding,
tested in tests/method/test_device.py).
"""

from __future__ import annotations

import copy
import os

import numpy as np
import torch

from .errors import InputError

__all__ = ["DEVICES", "DEVICE_ENV", "host", "module_on", "resolve_device"]

#: The values ``--device`` and ``[scale] device`` accept.
DEVICES = ("auto", "cpu", "cuda")
#: Environment variable set by ``--device`` (it wins over the policy's ``[scale] device``).
DEVICE_ENV = "FAUX_CHECKS_DEVICE"


def resolve_device(setting: str | None = "auto") -> torch.device:
    """The torch device for a ``[scale] device`` setting, ``$FAUX_CHECKS_DEVICE`` winning when set.

    Parameters
    ----------
    setting : {"auto", "cpu", "cuda"} or None
        None reads as "auto".

    Returns
    -------
    torch.device
        ``cuda`` (the current CUDA device) or ``cpu``.

    Raises
    ------
    InputError
        An unknown value, or "cuda" asked for on a machine where ``torch.cuda.is_available()`` is False (the
        message names torch's version and CUDA build; use "auto" or "cpu").
    """
    value = os.environ.get(DEVICE_ENV) or setting or "auto"
    source = f"${DEVICE_ENV}" if os.environ.get(DEVICE_ENV) else "[scale] device"
    if value not in DEVICES:
        raise InputError(f"{source} = {value!r} is not a device; use one of {list(DEVICES)}")
    if value == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if value == "cuda" and not available:
        raise InputError(f"{source} = 'cuda' but torch {torch.__version__} sees no CUDA device "
                         f"(built for CUDA {torch.version.cuda or 'none'}); use --device auto or cpu")
    return torch.device("cuda") if available else torch.device("cpu")


def module_on(module, device: torch.device):
    """``module`` itself on the CPU, else a copy of it moved to ``device`` (the caller's module is never moved)."""
    if device.type == "cpu" or not isinstance(module, torch.nn.Module):
        return module
    return copy.deepcopy(module).to(device)


def host(t: torch.Tensor) -> np.ndarray:
    """A tensor as a numpy array: a view for a CPU tensor (no copy), one device-to-host copy otherwise."""
    return t.numpy() if t.device.type == "cpu" else t.cpu().numpy()
