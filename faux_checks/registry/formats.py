"""Which file of a downloaded model version the gate loads, and whether it loads without unpickling.

A version registered by faux-checks names its model file in a tag (``model_file``). A version
logged with MLflow's own APIs does not; its artifacts are one of:

- an **MLflow model** folder (an ``MLmodel`` file): the flavor named in ``MLmodel`` says where the
  weights are. :data:`FLAVOR_MODEL_FILES` maps a flavor to a function that returns the file
  :func:`~faux_checks.inputs.models.load_model` reads, or raises
  :class:`~faux_checks.errors.UnsafeModelError` / :class:`~faux_checks.errors.InputError` with the fix.
  The ``pytorch`` flavor (``mlflow.pytorch.log_model``, MLflow 3.17) stores either
  ``data/model.pt2`` (``serialization_format="pt2"``, MLflow 3's default outside Databricks: a
  ``torch.export`` archive, safe) or ``data/model.pth`` (``serialization_format="pickle"``: a
  TorchScript archive when the logged model was ``torch.jit.script``-ed, which is safe; a pickled
  ``nn.Module`` otherwise, which is refused);
- an MLflow model of the ONNX, XGBoost, LightGBM or sklearn (skops) flavour: the file its ``MLmodel``
  names (:mod:`.flavors`; pickled serialisations refused);
- plain files (e.g. a TorchScript file logged with ``MlflowClient.log_model_artifact`` into a
  LoggedModel): the only file (besides the feature spec), or the only TorchScript / ``torch.export`` one.

The feature spec is the file named by the version tag ``feature_spec_file`` (a path inside the
artifacts), else the one file named ``feature_spec.json`` anywhere in them (e.g. logged with
``extra_files=["feature_spec.json"]``), else none.

To read another flavor, add a function to :data:`FLAVOR_MODEL_FILES` (name -> ``fn(folder, flavor_conf)``)
or a file-naming entry to :data:`.flavors.FLAVORS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..errors import InputError, UnsafeModelError


def model_format(path) -> str:
    """:func:`faux_checks.inputs.models.model_format`, imported on use (it brings torch; a registry lookup need not)."""
    from ..inputs.models import model_format as fmt

    return fmt(path)

__all__ = ["FLAVOR_MODEL_FILES", "SAFE_RECIPES", "SPEC_FILE_NAME", "feature_spec_file", "mlflow_model_file"]

SPEC_FILE_NAME = "feature_spec.json"

#: The fix every refusal names (docs/using.md, "Registering versions").
SAFE_RECIPES = (
    "log the model again as a new version in a format that loads without unpickling: "
    "mlflow.pytorch.log_model(model, name='model', input_example=X[:64], registered_model_name=NAME, "
    "extra_files=['feature_spec.json']) (MLflow 3's default serialization_format='pt2', a torch.export archive), "
    "or mlflow.pytorch.log_model(torch.jit.script(model), name='model', serialization_format='pickle', ...) "
    "(stored as a TorchScript archive), or `faux-checks register NAME --model model.pt --feature-spec spec.json` "
    "with model.pt from torch.jit.save"
)


def _pytorch_model_file(folder: Path, conf: dict) -> Path:
    """The weights file of MLflow's ``pytorch`` flavor, if it loads without unpickling."""
    data = folder / str(conf.get("model_data") or "data")
    exported = data / "model.pt2"
    if exported.is_file():
        return exported
    pickled = data / "model.pth"
    if pickled.is_file():
        fmt = model_format(pickled)
        if fmt in ("torchscript", "torch.export"):
            return pickled
        raise UnsafeModelError(
            f"the MLflow pytorch model is stored with serialization_format='pickle' ({pickled.relative_to(folder)} is "
            f"a pickled torch.nn.Module, format '{fmt}'): loading it would run code from the file, so the gate "
            f"refuses it and nothing from it was executed. Fix: {SAFE_RECIPES}"
        )
    present = sorted(str(p.relative_to(folder)) for p in data.rglob("*") if p.is_file())[:10] if data.is_dir() else []
    raise InputError(
        f"the MLflow pytorch model has neither {data.name}/model.pt2 nor {data.name}/model.pth (found {present}); "
        f"it was not written by mlflow.pytorch.log_model. Fix: {SAFE_RECIPES}"
    )


#: MLflow flavor name -> function(model folder, the flavor's MLmodel section) -> the file to load.
#: Tried in this order; the first flavor present in ``MLmodel`` decides.
FLAVOR_MODEL_FILES: dict[str, Callable[[Path, dict], Path]] = {"pytorch": _pytorch_model_file}


def mlflow_model_file(folder: str | Path, *, what: str = "the version", exclude: str | None = None) -> Path:
    """The file of a downloaded MLflow-logged version that the gate loads, checked to load without unpickling.

    Parameters
    ----------
    folder : str or Path
        The version's downloaded artifacts (an MLflow model folder with ``MLmodel``, or plain files).
    what : str
        Names the version in messages (``"version 3 of 'credit'"``).
    exclude : str, optional
        A path inside ``folder`` that is not the model (the tagged feature spec).

    Returns
    -------
    Path
        Inside ``folder``: for an MLflow model, the file an ONNX / XGBoost / LightGBM / skops flavour
        names (:func:`~faux_checks.registry.flavors.flavor_model_file`), else the pytorch flavor's
        TorchScript or ``torch.export`` file; for plain files, the only one (its format is judged
        when it is loaded), or the only TorchScript / ``torch.export`` one among several.

    Raises
    ------
    UnsafeModelError
        The model is stored as a pickle (nothing from it is executed); the message gives the safe recipes.
    InputError
        No flavor faux-checks reads (the message lists the flavors found), no model file, or several.
    """
    import yaml

    from .flavors import FLAVORS, flavor_model_file

    folder = Path(folder)
    found = sorted(folder.rglob("MLmodel"))
    if found:
        try:
            flavored = flavor_model_file(folder)  # ONNX / XGBoost / LightGBM / skops flavours (one MLmodel)
        except InputError as exc:
            raise type(exc)(f"{what}: {exc}") from None
        if flavored is not None:
            return flavored[0]
        mlmodel = found[0]
        try:
            flavors = (yaml.safe_load(mlmodel.read_text()) or {}).get("flavors") or {}
        except yaml.YAMLError as exc:
            raise InputError(f"{what}: its MLmodel file cannot be read ({exc})") from None
        for flavor, resolve in FLAVOR_MODEL_FILES.items():
            if flavor in flavors:
                try:
                    return resolve(mlmodel.parent, flavors[flavor] or {})
                except InputError as exc:
                    raise type(exc)(f"{what}: {exc}") from None
        raise InputError(
            f"{what} is an MLflow model of flavor(s) {sorted(flavors)}, which the gate cannot read (it reads "
            f"{sorted(FLAVOR_MODEL_FILES) + sorted(FLAVORS)} and plain model files). Fix: {SAFE_RECIPES}"
        )
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != SPEC_FILE_NAME
             and (exclude is None or p != folder / exclude)]
    formats = {p: model_format(p) for p in files}
    shown = {str(p.relative_to(folder)): f for p, f in formats.items()}
    if len(files) == 1 and formats[files[0]] != "torch.save":
        return files[0]  # its format is judged when loaded (load_model: TorchScript, torch.export, ONNX, skops, ...)
    safe = [p for p, f in formats.items() if f in ("torchscript", "torch.export")]
    if len(safe) == 1:
        return safe[0]
    if not safe and formats and all(f == "torch.save" for f in formats.values()):
        raise UnsafeModelError(
            f"{what} holds only torch.save pickles {shown}, which could run code when loaded; nothing from them "
            f"was executed. Fix: {SAFE_RECIPES}"
        )
    raise InputError(
        f"{what} holds {len(files)} files {shown} and {len(safe)} of them are TorchScript / torch.export (unknown "
        f"format: one model file is needed); set the version tag 'model_file' to the model's path inside the "
        f"artifacts, or {SAFE_RECIPES}"
    )


def feature_spec_file(folder: str | Path, tagged: str | None, *, what: str = "the version") -> Path | None:
    """The feature spec among a version's artifacts: the tagged path, else the one ``feature_spec.json``, else None.

    Raises
    ------
    InputError
        The tagged file is absent, or several ``feature_spec.json`` files are present.
    """
    folder = Path(folder)
    if tagged:
        path = folder / tagged
        if not path.is_file():
            raise InputError(f"{what}: feature spec {tagged!r} (tag 'feature_spec_file') not found among its artifacts")
        return path
    found = sorted(folder.rglob(SPEC_FILE_NAME))
    if len(found) > 1:
        raise InputError(f"{what} holds {len(found)} files named {SPEC_FILE_NAME} "
                         f"{[str(p.relative_to(folder)) for p in found]}; set the version tag 'feature_spec_file' "
                         "to the one the model was trained with")
    return found[0] if found else None
