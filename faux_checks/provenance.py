"""Provenance helpers: JSON-ready values, content hashes, package versions, UTC time stamps.

Every result the library records (a check, a streaming summary, a drift audit, a report) builds
its provenance with these functions, so that two runs can be compared field by field.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
from typing import Iterable

import numpy as np
import pandas as pd

__all__ = ["CORE_PACKAGES", "data_sha256", "file_sha256", "installed_versions", "jsonable", "package_versions", "utc_now"]

#: Distributions whose versions every check records (:func:`package_versions`).
CORE_PACKAGES = ("faux-checks", "torch", "numpy", "pandas", "scikit-learn", "captum")


def jsonable(obj):
    """``obj`` with numpy scalars and arrays as Python values and NaN/inf/NA as None (JSON-ready)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if obj is pd.NA or obj is pd.NaT:
        return None
    return obj


def data_sha256(frame: pd.DataFrame) -> str:
    """Hex sha256 of a DataFrame's values (pandas' row hashes, index excluded) and column names."""
    hashed = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    h = hashlib.sha256(hashed.tobytes())
    h.update(json.dumps(list(map(str, frame.columns))).encode())
    return h.hexdigest()


def installed_versions(packages: Iterable[str]) -> dict[str, str]:
    """Installed version of each distribution, ``"not installed"`` where it is absent."""
    from importlib import metadata

    out = {}
    for pkg in packages:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def package_versions() -> dict[str, str]:
    """Python's version and those of :data:`CORE_PACKAGES` (a check's provenance)."""
    return {"python": platform.python_version(), **installed_versions(CORE_PACKAGES)}


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (``2026-12-01T10:00:00+00:00``)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def file_sha256(path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (a model file, a data file, a report of any size).

    Raises
    ------
    OSError
        The file cannot be opened (the caller names it in its own terms).
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
