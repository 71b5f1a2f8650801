"""Command line: ``faux-checks check | register | gate | demo | history | audit | report | score-large | spec``.

Exit codes (docs/architecture.md, contracts): 0 passed, 1 failed the policy (deployment blocked),
2 could not decide (bad input, auxiliary model too weak, any error), 3 configuration error of
``gate``, ``audit`` or ``check`` (policy, data columns, spec columns or width, or model name do not
fit; found before anything was recorded or written). A gate that cannot decide never exits 0. Commands that decide nothing (spec, register, history, report) exit 2 on an error,
printed as ``faux-checks COMMAND: error: ...`` without "could not decide".

Output: the result goes to stdout; progress, library logs (Prefect, Great Expectations, MLflow) and
errors go to stderr. ``--json`` prints one JSON object per model version instead (keys:
:mod:`faux_checks_app.output`), ``--quiet`` leaves out progress and library logs below warnings.
"""

# The docstring above is the top of ``faux-checks --help`` (build_parser's description): the command line's
# commands, exit codes and output. This module holds the parser only; the commands run in check_cli, gate_cli,
# tools_cli and evidence_cli, and faux_checks_app.cli.main runs them.

from __future__ import annotations

import argparse

from .check_cli import cmd_check, cmd_score_large
from .demo_cli import cmd_demo
from .gate_cli import cmd_audit, cmd_gate
from .tools_cli import cmd_history, cmd_register, cmd_report, cmd_spec

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``faux-checks`` parser: one sub-command each, its options, and ``func`` (the command function it runs) and
    ``decides`` (False for commands that decide nothing: their errors read "error", not "could not decide") as its
    defaults; the top of ``--help`` is this module's docstring."""
    from faux_checks import __version__

    from .evidence_cli import add_parsers as add_evidence_parsers

    parser = argparse.ArgumentParser(prog="faux-checks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"faux-checks {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("-q", "--quiet", action="store_true",
                       help="print the result only: no progress, no library log lines below warnings")
    machine = argparse.ArgumentParser(add_help=False, parents=[quiet])
    machine.add_argument("--json", action="store_true",
                         help="print one JSON object per model version on stdout (JSON Lines) and nothing else there")
    parents = {"parents": [quiet]}
    with_json = {"parents": [machine]}

    _add_check(sub, with_json)
    _add_gate(sub, with_json)
    _add_register(sub, parents)
    _add_demo(sub, parents)
    _add_history(sub, with_json)
    _add_audit(sub, with_json)
    _add_report(sub, parents)
    _add_score_large(sub, parents)
    _add_spec(sub, parents)
    add_evidence_parsers(sub, parents)
    return parser


def _add_check(sub, with_json: dict) -> None:
    """``check``: one model file on one data file, no registry (:func:`~.check_cli.cmd_check`)."""
    from .evidence_cli import signing_key_option

    p = sub.add_parser("check", help="check one model file on one data file (no registry)", **with_json)
    p.add_argument("--model", required=True, help="model file: TorchScript / torch.export, or forward-only (extra "
                   "'blackbox'): ONNX, XGBoost JSON/UBJ, LightGBM text, scikit-learn .skops")
    p.add_argument("--data", required=True, help="CSV or Parquet audit data")
    p.add_argument("--protected", help="protected attribute column (required unless --policy names the protected "
                   "attribute or declares several with [[attributes]])")
    p.add_argument("--label", help="label column (excluded from features; group metrics)")
    _data_format(p)
    p.add_argument("--policy", help="policy TOML (default: the shipped policy)")
    p.add_argument("--aux-model", help="TorchScript auxiliary model (raw outputs) instead of training one")
    p.add_argument("--feature-spec", help="FeatureSpec JSON; without it the numeric columns are used as they are")
    p.add_argument("--scores-out", help="CSV with one row per input row: lic_score, flagged, status (several "
                   "protected attributes: one file each, NAME.<attribute>.csv)")
    _protected_file(p)
    p.add_argument("--report-dir", help="folder for report.json and report.html")
    p.add_argument("--output-form", choices=["auto", "logit", "probability", "softmax", "logits", "value"],
                   help="how to read the target's output (default: the policy's; value: in [faux] unit)")
    _allow_pickle(p)
    _trust_type(p)
    _device_option(p)
    p.add_argument("--deadline", metavar="SECONDS",
                   help="stop the check after this many seconds (more than 0, at most 86400) and exit 2 (undecided) "
                        "(default: the policy's [operations] deadline_s, 600)")
    signing_key_option(p)
    p.set_defaults(func=cmd_check)



def _add_gate(sub, with_json: dict) -> None:
    """``gate``: every new version of a registered model (:func:`~.gate_cli.cmd_gate`)."""
    from .evidence_cli import signing_key_option

    p = sub.add_parser("gate", help="gate every new version of a registered model (Prefect flow)", **with_json)
    p.add_argument("model_name")
    p.add_argument("--data", required=True, help="CSV or Parquet audit data")
    _data_format(p)
    p.add_argument("--policy", help="policy TOML (default: the shipped policy)")
    p.add_argument("--tracking-uri", help="MLflow URI (default: $MLFLOW_TRACKING_URI or the embedded sqlite file)")
    p.add_argument("--alias", default="deployable", help="alias moved to versions that pass")
    p.add_argument("--report-dir", help="root folder for per-version reports")
    p.add_argument("--deadline", metavar="SECONDS",
                   help="stop the whole gate after this many seconds (more than 0, at most 86400), exit 2, record "
                        "nothing unfinished "
                        "(default: the policy's [operations] deadline_s, 600)")
    p.add_argument("--version", action="append", metavar="N",
                   help="gate this version (repeatable) instead of the new ones; one already decided needs --force")
    p.add_argument("--force", action="store_true",
                   help="with --version: re-decide an already decided version under the current policy")
    p.add_argument("--allow-rollback", action="store_true",
                   help="let a passing version older than the passed one holding --alias take it (default: the alias "
                        "stays on the highest version that passed)")
    _trust_type(p)
    _device_option(p)
    signing_key_option(p)
    p.set_defaults(func=cmd_gate)



def _add_register(sub, parents: dict) -> None:
    """``register``: a model file (+ feature spec) as a new version (:func:`~.tools_cli.cmd_register`)."""
    p = sub.add_parser("register", help="register a model file (+ feature spec) as a new version of a registered model",
                       **parents)
    p.add_argument("model_name")
    p.add_argument("--model", required=True, help="model file the gate loads without unpickling (a pickle is refused)")
    p.add_argument("--feature-spec", help="FeatureSpec JSON the model was trained with")
    p.add_argument("--data", help="CSV or Parquet sample: refuse to register unless the model accepts its encoded rows")
    p.add_argument("--protected", help="protected attribute column of --data (default: the policy's)")
    p.add_argument("--policy", help="policy TOML naming the protected/label columns of --data")
    p.add_argument("--description", help="version description")
    p.add_argument("--tracking-uri", help="MLflow URI (default: $MLFLOW_TRACKING_URI or the embedded sqlite file)")
    _trust_type(p)
    p.set_defaults(func=cmd_register, decides=False)



def _add_demo(sub, parents: dict) -> None:
    """``demo``: train, register and gate Adult income classifiers (:func:`~.demo_cli.cmd_demo`)."""
    p = sub.add_parser("demo", help="train, register and gate Adult income classifiers (real data)", **parents)
    p.add_argument("--workdir", help="new folder for models and reports")
    p.add_argument("--model-name", default="adult-income", help="registered model name")
    p.add_argument("--policy", help="policy TOML (default: the shipped Adult policy, faux_checks/gate/policies/adult.toml)")
    p.add_argument("--tracking-uri", help="MLflow URI (default: the embedded sqlite file)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)



def _add_history(sub, with_json: dict) -> None:
    """``history``: every recorded gate decision of a model's versions (:func:`~.tools_cli.cmd_history`)."""
    p = sub.add_parser("history", help="every recorded gate decision of a model's versions", **with_json)
    p.add_argument("model_name")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=cmd_history, decides=False)



def _add_audit(sub, with_json: dict) -> None:
    """``audit``: drift audit of the deployed version on a current batch (:func:`~.gate_cli.cmd_audit`)."""
    from .evidence_cli import signing_key_option

    p = sub.add_parser("audit", help="drift audit of the deployed version on a current batch (Prefect flow, once)",
                       **with_json)
    p.add_argument("model_name")
    p.add_argument("--data", required=True, help="CSV or Parquet current batch")
    _data_format(p)
    p.add_argument("--reference", help="reference batch (default: the data the version was gated on)")
    p.add_argument("--policy", help="policy TOML (default: the policy recorded by the gate, else the shipped one)")
    p.add_argument("--tracking-uri", help="MLflow URI (default: $MLFLOW_TRACKING_URI or the embedded sqlite file)")
    p.add_argument("--alias", default="deployable", help="alias of the audited version")
    p.add_argument("--report-dir", help="root folder for the audit's report folder")
    p.add_argument("--retrain-aux", action="store_true",
                   help="train an auxiliary model on each batch instead of reusing the gate's (the report says which)")
    _device_option(p)
    signing_key_option(p)
    p.set_defaults(func=cmd_audit)



def _add_report(sub, parents: dict) -> None:
    """``report``: validate a report.json and render its HTML (:func:`~.tools_cli.cmd_report`)."""
    p = sub.add_parser("report", help="validate a gate/audit report.json and render its HTML; exits with its "
                                      "decision's code (2 if the report is invalid)", **parents)
    p.add_argument("path", help="a run's report folder or its report.json")
    p.add_argument("--out", help="HTML file to write (default: report.html next to the JSON, if absent)")
    p.set_defaults(func=cmd_report, decides=False)



def _add_score_large(sub, parents: dict) -> None:
    """``score-large``: fAux scores of a large file, streamed and sharded (:func:`~.check_cli.cmd_score_large`)."""
    p = sub.add_parser("score-large", help="fAux scores of a large Parquet/CSV file, streamed and sharded on Dask",
                       **parents)
    p.add_argument("--model", required=True, help="TorchScript / torch.export model file")
    p.add_argument("--data", required=True, help="Parquet (sharded by row group) or CSV audit data")
    _data_format(p)
    p.add_argument("--protected", help="protected attribute column (required unless --policy names it, or declares "
                   "[[attributes]]: then every one is scored, one file each beside --out, e.g. scores.sex.csv)")
    p.add_argument("--feature-spec", help="FeatureSpec JSON; without it the numeric columns are used as they are")
    p.add_argument("--out", required=True, help="new scores output: one row per input row, in order; .parquet: one file (--workers 0) or, sharded, "
                   "a dataset folder of one part file per shard (read it with pandas.read_parquet or pyarrow.dataset); else CSV")
    p.add_argument("--label", help="label column (excluded from features)")
    p.add_argument("--policy", help="policy TOML (default: the shipped policy); its [scale] section gives the defaults")
    p.add_argument("--aux-model", help="TorchScript auxiliary model (raw outputs) instead of training one")
    p.add_argument("--workers", type=int, help="local Dask workers (default: [scale] workers, one per core); "
                   "0 = in this process, no Dask")
    p.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--chunk-rows", type=int, help="rows per chunk (default: [scale] chunk_rows, 16,384)")
    p.add_argument("--work-dir", help="folder for shard files visible to every worker (default: next to --out)")
    _protected_file(p, supported=False)
    p.add_argument("--output-form", choices=["auto", "logit", "probability", "softmax", "logits", "value"],
                   help="how to read the target's output (default: the policy's; value: in [faux] unit)")
    _allow_pickle(p)
    _trust_type(p)
    _device_option(p)
    p.set_defaults(func=cmd_score_large)



def _add_spec(sub, parents: dict) -> None:
    """``spec``: fit a feature spec on a data file and save it as JSON (:func:`~.tools_cli.cmd_spec`)."""
    p = sub.add_parser("spec", help="fit a feature spec (the target model's input encoding) on a data file and "
                                    "save it as JSON (never overwrites)", **parents)
    p.add_argument("--data", required=True, help="CSV or Parquet training data of the target model")
    p.add_argument("--out", required=True, help="new JSON file for the spec")
    p.add_argument("--exclude", action="append", metavar="COLS",
                   help="columns that are not model inputs (label, ids; the protected attribute unless the model "
                        "takes it); comma-separated or repeated")
    p.add_argument("--categorical", action="append", metavar="COLS",
                   help="numeric columns to one-hot encode anyway (integer codes); text and boolean columns always are")
    p.add_argument("--columns", action="append", metavar="COLS",
                   help="the input columns, in the model's order (default: every column of the file minus --exclude)")
    p.add_argument("--min-frequency", default=0, type=_min_frequency,
                   help="levels with fewer rows (integer) or a smaller share of rows (0-1) join '__infrequent__' "
                        "(default 0: none)")
    p.add_argument("--name", help="the spec's name in messages and reports (default: the file's stem)")
    p.set_defaults(func=cmd_spec, decides=False)


def _sep(p) -> None:
    """``--sep``, ``--thousands`` and ``--decimal``: how a CSV file's fields and numbers are read."""
    p.add_argument("--sep", help="CSV delimiter, e.g. ';' or tab (default: sniffed from the file's head among , ; tab |)")
    p.add_argument("--thousands", help="the thousands mark of the CSV's numbers, e.g. ',' to read 1,234.5 as 1234.5 "
                   "(or 'space'); quoted where it is also the delimiter (default: none, such a column is refused)")
    p.add_argument("--decimal", choices=[",", "."], metavar="MARK", help="the decimal mark of the CSV's numbers: ',' reads 0,189 as "
                   "0.189 (default: ',' when the file is not ','-separated and its head holds decimal commas such as "
                   "0,189 and no thousands-marked number such as 1,234.5; else '.')")


def _data_format(p) -> None:
    """``--sep`` and ``--positive-label``."""
    _sep(p)
    p.add_argument("--positive-label", help="the label value meaning the positive class, for text labels such as "
                   "yes/no; takes precedence over the policy key positive_label; text labels without either are "
                   "refused")


def _protected_file(p, *, supported: bool = True) -> None:
    """``--protected-file PATH --join-on KEY``: the protected attribute in a separate file linked by a key
    (policy ``[protected_file]``; ``score-large`` takes neither and exits 3)."""
    if not supported:
        p.add_argument("--protected-file", help="not supported by score-large (exits 3): join the protected column "
                       "first, or run `check` with --protected-file")
        p.add_argument("--join-on", help="not supported by score-large (exits 3)")
        return
    p.add_argument("--protected-file", help="CSV or Parquet with the key and the protected column(s), linked to the "
                   "audit rows by --join-on; the protected column is never a model input nor in the scores file "
                   "(policy [protected_file])")
    p.add_argument("--join-on", help="the key column of --data and --protected-file (unique in the protected file)")


def _allow_pickle(p) -> None:
    """The ``--allow-pickle`` option (check, score-large)."""
    p.add_argument("--allow-pickle", action="store_true",
                   help="DANGEROUS: load pickled models (runs code from the file); only for files you trust")


def _trust_type(p) -> None:
    """The ``--trust-type NAME`` option (check, gate, register, score-large): skops types the user reviewed."""
    p.add_argument("--trust-type", action="append", metavar="NAME",
                   help="a .skops model: a type to rebuild beyond those skops trusts by default (once per type; the "
                        "refusal message lists them). Only for types you have reviewed")


def _device_option(p) -> None:
    """The ``--device {auto,cpu,cuda}`` option (check, gate, audit, score-large): overrides ``[scale] device``."""
    p.add_argument("--device", choices=["auto", "cpu", "cuda"],
                   help="where the swap reading and the aux training run (default: the policy's [scale] device, "
                        "'auto' = CUDA when torch sees a GPU, else the CPU); recorded in the provenance")


def _min_frequency(text: str) -> int | float:
    """``--min-frequency``: a row count (integer >= 0) or a share of rows (0 < x < 1)."""
    try:
        value = float(text) if any(ch in text for ch in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a row count nor a share of rows") from None
    if value < 0 or (isinstance(value, float) and value >= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: give a row count (integer >= 0) or a share in (0, 1)")
    return value
