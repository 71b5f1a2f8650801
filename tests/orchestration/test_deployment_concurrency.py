"""The scheduled deployments run one at a time: a run due while the previous one runs is cancelled, not queued
(a cron every minute with runs longer than a minute piled up 8 audits at once)."""

from __future__ import annotations


def test_deployments_run_one_at_a_time_and_cancel_a_run_due_meanwhile():
    from prefect.client.schemas.objects import ConcurrencyLimitStrategy

    from faux_checks_flows.deployments import _parser, build_deployments

    args = _parser().parse_args(["--model", "credit", "--data", "/data/latest.parquet", "--gate-data",
                                 "/data/audit.csv", "--audit-cron", "* * * * *"])
    for deployment in build_deployments(args):
        assert deployment.concurrency_limit == 1
        assert deployment.concurrency_options.collision_strategy == ConcurrencyLimitStrategy.CANCEL_NEW
