"""MLflow model folders (an ``MLmodel`` file) whose flavour stores the model in a format read without unpickling.

A version registered with MLflow's own flavours (``mlflow.onnx``, ``mlflow.xgboost``, ``mlflow.lightgbm``,
``mlflow.sklearn``) holds an ``MLmodel`` file next to the model; :func:`flavor_model_file` names the file the
gate loads (:func:`faux_checks.inputs.models.load_model`), never through MLflow's own loaders (which unpickle
for the pickle/cloudpickle serialisations). Read from the flavour configuration of MLflow 3.17.2:

============  ==========================================  =============================================
flavour       stored as                                   read by the gate
============  ==========================================  =============================================
onnx          ``data``: ``model.onnx`` (+ external data)  yes (onnxruntime)
xgboost       ``data``: ``model.ubj`` / ``.json``         yes; ``model.xgb`` (legacy binary) is refused
lightgbm      ``data``: ``model.lgb`` (a Booster: text)    yes; ``model.skops`` (scikit-learn API) through skops;
                                                          ``model.pkl`` refused
sklearn       ``pickled_model``: ``model.skops`` when      yes with ``serialization_format = "skops"`` (MLflow's
              ``serialization_format = "skops"``          default outside Databricks); pickle/cloudpickle refused
============  ==========================================  =============================================

The ``skops_trusted_types`` an MLflow flavour records are not trusted here: the gate trusts skops's defaults
and the types its operator passes (``trusted_types``).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ..errors import InputError, UnsafeModelError

__all__ = ["FLAVORS", "flavor_model_file"]


def _flavors() -> dict:
    """Flavour name -> :class:`~faux_checks.inputs.formats.MlflowFlavor`, from the format table, in its order."""
    from ..inputs.formats import FORMATS

    return {fl.name: fl for fmt in FORMATS.values() for fl in fmt.flavors}


#: Flavours read, in order of preference (the format table's), and the key of their configuration that names the
#: model file. A new flavour is a ``flavors=`` item of its entry in :data:`faux_checks.inputs.formats.FORMATS`.
FLAVORS = {name: fl.key for name, fl in _flavors().items()}
_SAFE_SUFFIXES = {name: fl.safe_suffixes for name, fl in _flavors().items()}


def flavor_model_file(folder: str | Path) -> tuple[Path, str] | None:
    """The model file of the MLflow model folder under ``folder``, and its flavour; None without an ``MLmodel``.

    Parameters
    ----------
    folder : str or Path
        A downloaded version's artifacts (the ``MLmodel`` file may sit in a sub-folder).

    Returns
    -------
    (Path, str) or None
        The file and the flavour name (a key of :data:`FLAVORS`); None when there is no ``MLmodel`` file or
        none of these flavours (e.g. a PyTorch flavour, read elsewhere).

    Raises
    ------
    UnsafeModelError
        The flavour stores the model as a pickle (sklearn/lightgbm ``pickle``/``cloudpickle``, XGBoost's legacy
        binary): the message says how to log it safely. Nothing was loaded.
    InputError
        Several ``MLmodel`` files, or the file the flavour names is missing.
    """
    root = Path(folder)
    found = sorted(root.rglob("MLmodel"))
    if not found:
        return None
    if len(found) > 1:
        raise InputError(f"{root} holds {len(found)} MLmodel files ({[str(p.relative_to(root)) for p in found]}); "
                         "register one model per version")
    mlmodel = found[0]
    flavors = (yaml.safe_load(mlmodel.read_text()) or {}).get("flavors", {}) or {}
    for name, key in FLAVORS.items():
        conf = flavors.get(name)
        if not isinstance(conf, dict) or key not in conf:
            continue
        path = mlmodel.parent / str(conf[key])
        if not path.name.endswith(_SAFE_SUFFIXES[name]):
            raise UnsafeModelError(
                f"the MLflow '{name}' flavour in {mlmodel} stores the model as {path.name} "
                f"(serialization_format {conf.get('serialization_format')!r}), which needs unpickling; the gate "
                "does not load it. Log it again safely: mlflow.sklearn/mlflow.lightgbm with "
                "serialization_format='skops', mlflow.xgboost with model_format='ubj' or 'json', or mlflow.onnx")
        if not path.exists():
            raise InputError(f"the MLflow '{name}' flavour in {mlmodel} names {path.name}, which is not among the "
                             "version's artifacts")
        return path, name
    return None
