"""The fit's imports loaded in the background during the sample pass: started once, and waited for before the fit."""

from __future__ import annotations

import sys
import threading

from faux_checks.gate.stream import prefetch


def test_wait_returns_once_every_module_is_loaded_and_the_prefetch_starts_once(monkeypatch):
    modules = ("colorsys", "wave")                                     # standard modules nothing here imports
    monkeypatch.setattr(prefetch, "FIT_MODULES", modules)
    monkeypatch.setattr(prefetch, "_started", threading.Event())
    monkeypatch.setattr(prefetch, "_threads", [])
    for name in modules:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert prefetch.prefetch_fit_imports() is True
    prefetch.wait_fit_imports()
    assert all(name in sys.modules for name in modules)
    assert not any(thread.is_alive() for thread in prefetch._threads)
    assert prefetch.prefetch_fit_imports() is False                    # once per process
