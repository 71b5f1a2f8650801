"""``faux-checks demo``: Adult income classifiers trained, registered in MLflow and gated by the Prefect flow.

The command's parts, in the order they run (``README.md``, "What the demo prints", gives the time of the whole):

1. Prefect's temporary API server starts in a background thread (:class:`faux_checks_app.prefect_start.BackgroundStart`)
   while this thread trains the five versions (:func:`faux_checks_app.demo.build_demo_versions`, one torch
   thread): on two cores the server's start-up and the training run side by side. Nothing is recorded before the
   server answers: a server that does not start ends the command before any version is registered.
2. The versions are registered in the MLflow registry (the embedded sqlite file unless ``--tracking-uri``).
3. The gate flow (:func:`faux_checks_flows.gate.gate`) decides each version under the Adult policy; the history
   table follows, with each version's definitional truth (:func:`faux_checks_app.demo.definitional_truth`, the
   audit file read once for all five).
"""

from __future__ import annotations

import time
from pathlib import Path

from faux_checks.errors import FauxChecksError

from . import lifecycle
from .console import EXIT_PASSED, EXIT_UNDECIDED, eprint, error, say
from .gate_cli import print_history_and_code
from .prefect_start import BackgroundStart

__all__ = ["cmd_demo"]


def cmd_demo(args) -> int:
    """Train and register Adult income classifiers, then gate them with the Adult policy (exit 0 when every version
    got a decision, 2 when any is undecided)."""
    from faux_checks.settings import configure_environment, default_home

    configure_environment()
    workdir = Path(args.workdir) if args.workdir else default_home() / "demo" / time.strftime("%Y%m%dT%H%M%S")
    if workdir.exists() and any(workdir.iterdir()):
        raise FauxChecksError(f"{workdir} is not empty; choose a new --workdir (nothing is overwritten)")
    server = BackgroundStart(say=error)   # starts while the versions train; joined before anything is recorded
    from .demo import build_demo_versions, definitional_truth

    workdir.mkdir(parents=True, exist_ok=True)
    eprint(f"[1/3] training demo income classifiers on UCI Adult in {workdir}")
    versions = build_demo_versions(workdir, seed=args.seed)
    server.wait()
    from faux_checks.gate.policy import load_policy, policy_path
    from faux_checks.registry import Registry

    registry = Registry(args.tracking_uri)
    model_name = args.model_name
    eprint(f"[2/3] registering {len(versions)} versions of '{model_name}' in {registry.tracking_uri}")
    registered = []
    for v in versions:
        number = registry.register_version(model_name, v.model_path, v.spec_path, description=v.description,
                                           tags={"demo_recipe": v.name})
        registered.append(number)
        eprint(f"      v{number}: {v.name}: {v.description}")
    eprint("[3/3] running the fairness gate flow (Prefect ephemeral API)")
    from faux_checks_flows.gate import gate

    lifecycle.record_prefect_sigterm()   # a SIGTERM during the flow ends the command with 143

    policy_file = args.policy or str(policy_path("adult"))
    from .output import library_output_to_stderr

    with library_output_to_stderr():
        state = gate(model_name=model_name, data_path=str(versions[0].audit_path), policy_path=policy_file,
                     tracking_uri=args.tracking_uri, alias="deployable", versions=registered,
                     report_root=str(workdir / "reports"), return_state=True)
    delta = load_policy(policy_file).faux.delta
    import pandas as pd

    audit = pd.read_csv(versions[0].audit_path)   # one audit file for every version
    truth = {}
    for number, v in zip(registered, versions, strict=True):
        t = definitional_truth(v, delta=delta, audit=audit)
        truth[str(number)] = f"{t['share']:.1%} (married {t['share_married']:.0%})"
    print()
    code = print_history_and_code(model_name, args.tracking_uri, state, versions=registered,
                                  extra={f"truth Δŷ>{delta:g}": truth})
    print()
    for number, v in zip(registered, versions, strict=True):
        say(f"v{number}: {v.description}")
    print()
    say(f"policy: {policy_file}")
    say(f"reports: {workdir / 'reports'}")
    print(f"'flagged': share of the audit rows whose estimated move of P(>50K) exceeds δ = {delta:g} if only their sex "
          "changed. 'truth': the share that moves by more than δ when sex flips and relationship follows it "
          "(Husband <-> Wife), everything else fixed (exact for married people, a lower bound for the rest).")
    print("'!' marks a baseline over its limit. Exit code of the demo: 0 when every version got a "
          "decision (passed or failed), 2 when any is undecided; `faux-checks gate` exits 1 on a block.")
    return EXIT_UNDECIDED if code == EXIT_UNDECIDED else EXIT_PASSED
