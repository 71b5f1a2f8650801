"""A SIGTERM that arrives while a flow runs ends the command with 143 even where Prefect's ``TerminationSignal``
is caught and dropped on its way (an event-loop callback logs every ``BaseException`` and goes on):
:func:`faux_checks_app.lifecycle.record_prefect_sigterm` records the signal when Prefect's handler runs."""

from __future__ import annotations

import argparse
import signal

import pytest
from prefect.exceptions import TerminationSignal
from prefect.utilities import engine

from faux_checks_app import cli, lifecycle


def _gate_dropping_the_signal(args):
    """A flow command whose SIGTERM exception lands where it is dropped; the flow then ends normally (failed: 1)."""
    lifecycle.record_prefect_sigterm()   # what the gate, audit and demo commands do before their flow
    try:
        engine._prefect_sigterm_handler(signal.SIGTERM)
    except TerminationSignal:
        pass
    return 1


def test_a_dropped_prefect_termination_signal_still_ends_the_command_with_143(capsys):
    args = argparse.Namespace(command="audit", func=_gate_dropping_the_signal, quiet=False)
    assert cli._run(args, ["audit"]) == 128 + signal.SIGTERM
    assert lifecycle.raised_stop().code == 143
    assert "SIGTERM received; stopping" in capsys.readouterr().err


def test_without_a_signal_the_command_keeps_its_own_code():
    args = argparse.Namespace(command="audit", func=lambda a: 1, quiet=False)
    assert cli._run(args, ["audit"]) == 1
    assert lifecycle.raised_stop() is None


def test_the_handler_is_wrapped_once_and_still_raises_prefects_exception():
    lifecycle.record_prefect_sigterm()
    wrapped = engine._prefect_sigterm_handler
    lifecycle.record_prefect_sigterm()
    assert engine._prefect_sigterm_handler is wrapped
    lifecycle.forget_stops()
    with pytest.raises(TerminationSignal):
        engine._prefect_sigterm_handler(signal.SIGINT)
    assert lifecycle.raised_stop().code == 128 + signal.SIGINT
    lifecycle.forget_stops()
