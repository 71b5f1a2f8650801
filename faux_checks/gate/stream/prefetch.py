"""The reference fit's imports loaded beside the sample pass: scikit-learn and SciPy read in a background thread.

The fit after the sample pass (the auxiliary model's quality, the hold tests of the swap reading, the quality
intervals) imports ``scipy.stats`` and scikit-learn's metrics, gradient boosting and folds: 6-8 s on a 2-core
machine (``scipy.stats`` alone 5.2 s at load 9, ``sklearn.metrics`` 1.4 s, ``sklearn.ensemble`` 0.8 s). Nothing
in the sample pass needs them, so :func:`prefetch_fit_imports` starts them when the pass starts, and the fit, the
one step no worker can share, waits for that load to end (:func:`wait_fit_imports`) and finds them loaded.
"""

from __future__ import annotations

import importlib
import threading

__all__ = ["FIT_MODULES", "prefetch_fit_imports", "wait_fit_imports"]

#: Modules the reference fit and the aux quality import (:mod:`faux_checks.method.held`,
#: :mod:`faux_checks.method.joint_hold`, :mod:`faux_checks.gate.aux_model`, :mod:`faux_checks.gate.bounds`).
FIT_MODULES = ("scipy.stats", "sklearn.metrics", "sklearn.ensemble", "sklearn.model_selection")

_started = threading.Event()
_threads: list[threading.Thread] = []


def _load() -> None:
    for name in FIT_MODULES:
        try:
            importlib.import_module(name)
        except Exception:                                  # noqa: BLE001 - the fit's own import raises it where it matters
            return


def prefetch_fit_imports() -> bool:
    """Start loading :data:`FIT_MODULES` in a daemon thread, once per process; returns whether this call started it.

    Returns
    -------
    bool
        True for the call that started the thread, False when it was started before (or every module is loaded).

    Notes
    -----
    Our choice (an overlap, no change to any result: the modules are the same ones the fit imports). A module
    that fails to import stops the prefetch silently; the fit's own import then raises the error where it is
    needed.
    """
    import sys

    if _started.is_set() or all(name in sys.modules for name in FIT_MODULES):
        return False
    _started.set()
    thread = threading.Thread(target=_load, name="faux-checks-fit-imports", daemon=True)
    _threads.append(thread)
    thread.start()
    return True


def wait_fit_imports() -> None:
    """Wait until the loads :func:`prefetch_fit_imports` started have ended (at once when none was started).

    The fit calls it before its own imports, so no module is imported by two threads at once (no import-lock
    contention between them, and no daemon thread still importing when the process ends).
    """
    for thread in list(_threads):
        thread.join()
