"""Prefect 3 flow: the pre-deployment fairness gate.

Recipe per new model version: mark it running → download model + feature spec → validate the
Great Expectations suite (fAux + baselines) on the audit data → write report.json/html →
record the decision (MLflow run + registry tags) → move the deployment alias on ``passed`` only.
The flow ends Failed when any version failed or is undecided (docs/architecture.md, contracts).

Fails closed at every step (one wrapper, :func:`faux_checks_flows.gate_per_version._fail_closed`): an error before the decision is
recorded as ``undecided``; a decision that cannot be recorded, or a ``passed`` version whose alias cannot be moved, is
``undecided`` in the flow's result (flow Failed, nothing promoted, a ``*-not-recorded`` /
``*-not-promoted`` report holds the cause) and the version stays new in the registry
(``running``, or ``passed`` with ``fairness_promotion=pending``), so the next run gates it again.

Parameters are paths and names, never DataFrames or models; tasks use no result cache and
retry only on registry/data I/O, never on :class:`~faux_checks.errors.InputError` or a policy
decision (:mod:`faux_checks_flows.common`).

This module holds the flow (:func:`gate`: versions to gate, the audit data, the deadline and leases, the
run's progress); one version's steps are :mod:`faux_checks_flows.gate_per_version`, the tasks :mod:`faux_checks_flows.gate_tasks`,
what is recorded :mod:`faux_checks_flows.gate_record`.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field

from prefect import flow
from prefect.states import Completed

from .common import PrefectUnreachableError, failed_state, prefect_unreachable, run_logger
from .gate_per_version import VersionOutcome, record_undecided, gate_version, gate_version_leased
from .gate_deadline import WINDOW
from .gate_tasks import find_new_versions, load_audit_data


__all__ = ["gate", "gate_version", "gate_version_leased", "VersionOutcome", "RunProgress", "PROGRESS"]


@flow(name="fairness-gate", log_prints=True)
def gate(model_name: str, data_path: str, policy_path: str | None = None, tracking_uri: str | None = None,
         alias: str = "deployable", report_root: str | None = None, versions: list[str] | None = None,
         aux_model_path: str | None = None, deadline_s: float | None = None, trusted_types: list[str] | None = None,
         regate: list[str] | None = None, allow_rollback: bool = False, signing_key: str | None = None,
         sep: str | None = None, thousands: str | None = None, decimal: str | None = None):
    """Gate every new version of ``model_name`` on the audit data at ``data_path``.

    Parameters
    ----------
    model_name : str
        Registered model name.
    data_path : str
        CSV or Parquet audit data (protected column, label if the policy names one, features).
    policy_path : str, optional
        Policy TOML; the shipped default when omitted.
    tracking_uri : str, optional
        MLflow tracking/registry URI; ``MLFLOW_TRACKING_URI`` or the embedded sqlite file by default.
    alias : str
        Alias moved to a version that passes.
    report_root : str, optional
        Folder for per-version reports (default ``$FAUX_CHECKS_HOME/reports``).
    versions : list of str, optional
        Gate exactly these versions instead of the new ones.
    deadline_s : float, optional
        This run's deadline (default: the policy's ``[operations] deadline_s``): it bounds the
        version leases (their expiry), how long this run waits for another gate's lease and what it
        writes: no record starts with less than ``RECORD_RESERVE_S`` left, nothing is promoted after it
        and versions reached after it are not gated (:mod:`faux_checks_flows.gate_deadline`). The CLI
        enforces it on the whole command.
    trusted_types : list of str, optional
        A ``.skops`` version: types beyond those skops trusts by default that its operator reviewed
        (CLI ``--trust-type NAME``); without them such a version is ``undecided``, its reason listing them.
    regate : list of str, optional
        Without ``versions``: decided versions to gate again besides the new ones (the CLI passes the
        undecided versions whose check never ran, once the policy or data changed;
        :meth:`~faux_checks.registry.Registry.gate_plan`).
    allow_rollback : bool
        Let a passing version older than the passed one holding ``alias`` take it (default: never).
    signing_key : str, optional
        Ed25519 private key (PEM) that signs each decision's evidence pack (``evidence.json``); default the
        ``FAUX_CHECKS_SIGNING_KEY`` environment variable; unsigned packs without either. Read before any
        version is touched: a key that cannot be read stops the run (:class:`faux_checks.errors.InputError`).

    Returns
    -------
    list of dict (one per version, see :class:`VersionOutcome`) when every version passed;
    otherwise a ``Failed`` state carrying the same list, so callers see the flow Failed.
    """
    from faux_checks.report.evidence import signing_key_path
    from faux_checks.settings import default_home

    logger = run_logger()
    flow_started = time.perf_counter()            # the flow body's wall time is logged at its end (bench_gate.py)
    report_root = report_root or str(default_home() / "reports")
    signing_key = signing_key_path(signing_key)   # a wrong key or passphrase stops the run before any version
    operations = _operations(policy_path)
    deadline_s = float(deadline_s or operations.deadline_s)
    ends_at = time.monotonic() + deadline_s
    WINDOW.start(ends_at)   # no record or promotion starts after the deadline (flows/gate_deadline.py)
    todo = versions or _new_and_regated(model_name, tracking_uri, regate)
    if not todo:
        logger.info("no new versions of %s to gate", model_name)
        return []
    try:
        frame = load_audit_data(data_path, sep, thousands, decimal, policy_path)   # CLI --sep, --thousands, --decimal
        load_error = None
    except Exception as exc:  # noqa: BLE001 - fail closed: the load error makes each version undecided
        frame, load_error = None, exc
    outcomes: list[VersionOutcome] = []
    PROGRESS.start(model_name, todo, outcomes)
    common = {"policy_path": policy_path, "tracking_uri": tracking_uri, "report_root": report_root,
              "data_path": data_path}
    _gate_each(model_name, todo, outcomes, frame, load_error, deadline_s=deadline_s, ends_at=ends_at,
               regated=None if versions else {str(v) for v in regate or ()}, common=common,
               alias=alias, aux_model_path=aux_model_path, trusted_types=list(trusted_types or []),
               allow_rollback=allow_rollback, signing_key=signing_key)
    logger.info("%s: %d version(s) gated; flow body %.2f s", FLOW_TIME_LOG, len(outcomes), time.perf_counter() - flow_started)
    return _final_state(model_name, outcomes)


def _new_and_regated(model_name: str, tracking_uri: str | None, regate: list[str] | None) -> list[str]:
    """The versions the gate has not decided yet, and the decided ones named in ``regate``, in version order."""
    todo = _new_versions(model_name, tracking_uri)
    if regate:
        todo = sorted(set(todo) | {str(v) for v in regate}, key=int)
    return todo


def _final_state(model_name: str, outcomes: list):
    """``Completed`` with one dict per version when every version passed, else a ``Failed`` state carrying them."""
    from dataclasses import asdict

    results = [asdict(o) for o in outcomes]
    bad = [o for o in outcomes if o.decision != "passed"]
    if bad:
        summary = ", ".join(f"v{o.version} {o.decision}" for o in bad)
        return failed_state(f"fairness gate blocked {model_name}: {summary}", data=results)
    return Completed(message=f"all {len(outcomes)} version(s) of {model_name} passed", data=results)


def _gate_each(model_name: str, todo: list[str], outcomes: list, frame, load_error: BaseException | None, *,
               deadline_s: float, ends_at: float, regated: set[str] | None, common: dict, **version_options) -> None:
    """Gate the versions of ``todo`` in order, each under its lease, appending to ``outcomes``: a data load error
    makes each ``undecided`` (recorded); versions reached after the deadline are not gated. ``regated``: the decided
    versions gated again (None when the versions were named: every one is gated, new or not)."""
    from faux_checks_flows.memory import free_version_memory, versions_frozen

    with tempfile.TemporaryDirectory(prefix="faux-gate-") as workdir, versions_frozen():
        for version in todo:
            if WINDOW.passed():   # the versions left are not gated: nothing recorded, they stay new
                outcomes.append(_not_gated(model_name, version, deadline_s))
                continue
            if outcomes and (cause := prefect_unreachable()) is not None:   # bounded by Prefect's client settings
                PROGRESS.prefect_error = cause
                raise PrefectUnreachableError(PROGRESS.describe())
            if load_error is not None:
                outcome = record_undecided(model_name, version, load_error, common["tracking_uri"],
                                           common["report_root"], common["data_path"], common["policy_path"])
            else:
                outcome = gate_version_leased(
                    model_name, version, frame, lease_ttl_s=deadline_s + LEASE_MARGIN_S,
                    lease_wait_s=max(0.0, ends_at - time.monotonic() - LEASE_MARGIN_S),
                    only_if_new=regated is not None and str(version) not in regated,
                    workdir=workdir, **common, **version_options)
            outcomes.append(outcome)
            WINDOW.deliver()        # a deadline held back during this version's record ends the run here
            free_version_memory()   # flat RSS over versions (flows/memory.py)


#: The flow's closing log line starts with this (``benchmarks/bench_gate.py --cli`` reads the flow time from it).
FLOW_TIME_LOG = "fairness-gate timing"
#: Seconds a lease outlives its gate's deadline, and that a waiting gate keeps for its own work.
LEASE_MARGIN_S = 60.0


@dataclass
class RunProgress:
    """What the gate run in this process has decided so far, for a caller whose flow cannot end in Prefect.

    :func:`gate` fills it as each version ends (``decided``: the :class:`VersionOutcome` list, shared);
    with the Prefect API gone mid-run the flow's final state cannot be recorded and
    Prefect raises, so ``faux-checks gate`` reads this instead: the versions decided before stay valid
    (their decisions are in MLflow), the rest are reported not decided. ``prefect_error``: the failed
    health check's cause, when the gate stopped for it.
    """

    model_name: str = ""
    todo: list[str] = field(default_factory=list)
    decided: list[VersionOutcome] = field(default_factory=list)
    prefect_error: str | None = None

    def start(self, model_name: str, todo: list[str], decided: list[VersionOutcome]) -> None:
        self.model_name, self.todo, self.decided, self.prefect_error = model_name, [str(v) for v in todo], decided, None

    def not_decided(self) -> list[str]:
        """Versions of ``todo`` with no outcome in this run."""
        done = {str(o.version) for o in self.decided}
        return [v for v in self.todo if v not in done]

    def describe(self) -> str:
        """``Prefect API unreachable after v1 was decided (failed, recorded: it stands); v2 not decided (...)``."""
        def one(o: VersionOutcome) -> str:
            kept = "recorded in MLflow: it stands" if o.run_id else "not recorded"
            return f"v{o.version} ({o.decision}; {kept})"

        done = (f"after {', '.join(one(o) for o in self.decided)} {'was' if len(self.decided) == 1 else 'were'} decided"
                if self.decided else "before any version was decided")
        left = self.not_decided()
        stays = "it stays new and the next gate run gates it" if len(left) == 1 else \
            "they stay new and the next gate run gates them"
        rest = f"; {', '.join('v' + v for v in left)} not decided (not gated: {stays})" if left else ""
        cause = f" ({self.prefect_error})" if self.prefect_error else ""
        return f"Prefect API unreachable{cause} {done}{rest}"


#: The current (last) gate run of this process (:class:`RunProgress`).
PROGRESS = RunProgress()


def _operations(policy_path: str | None):
    """The policy's ``[operations]`` (defaults when the policy does not load: the check reports that),
    with MLflow's HTTP timeout, retries and backoff and the model-file limits applied to this process."""
    from faux_checks.gate.policy import OperationsSettings, load_policy
    from faux_checks.registry.operations import apply_client_settings

    try:
        operations = load_policy(policy_path).operations
    except Exception:  # noqa: BLE001 - an unreadable policy: default client settings; the gate records why
        operations = OperationsSettings()
    apply_client_settings(operations)
    from faux_checks.inputs.limits import set_model_limits

    # size, tree and probe limits on every model file this run loads; torch loads probed too (a crash ends
    # the probe child, the version is recorded undecided and the next one is gated: inputs/probe.py)
    set_model_limits(operations, probe_torch=True)
    return operations


def _not_gated(model_name: str, version: str, deadline_s: float) -> VersionOutcome:
    """A version the run reached after its deadline: not gated, nothing recorded, it stays new."""
    return VersionOutcome(model_name=model_name, version=str(version), decision="undecided", reasons=[
        f"not gated: the run's deadline of {deadline_s:g} s was reached before v{version}; nothing was recorded and "
        "it stays new, so the next gate run gates it"])


def _new_versions(model_name: str, tracking_uri: str | None) -> list[str]:
    """:func:`find_new_versions`, an unreachable registry named as such (with the seconds spent trying)."""
    from faux_checks.registry import default_tracking_uri
    from faux_checks.registry.operations import is_unreachable, unreachable_error

    t0 = time.monotonic()
    try:
        return find_new_versions(model_name, tracking_uri)
    except Exception as exc:
        if is_unreachable(exc):
            raise unreachable_error(tracking_uri or default_tracking_uri(), time.monotonic() - t0, exc) from exc
        raise
