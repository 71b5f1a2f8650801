"""A signal whose Stop a library catches and re-raises as its own error still ends the command as a stop."""

from __future__ import annotations

import argparse

from faux_checks_app import cli, lifecycle


def _parser(func):
    parser = argparse.ArgumentParser()
    parser.set_defaults(func=func, command="check")
    return lambda: parser


def test_a_stop_wrapped_by_a_library_exits_with_the_signals_code(monkeypatch, capsys):
    def wraps_the_stop(args):
        try:
            lifecycle.on_signal(15, None)            # SIGTERM lands inside a library call
        except lifecycle.Stop as stop:
            raise RuntimeError(f"Error calling function `_ser_model`: Stop: {stop.message}") from None
        return 0

    monkeypatch.setattr(cli, "build_parser", _parser(wraps_the_stop))
    assert cli.main([]) == 143
    err = capsys.readouterr().err
    assert "SIGTERM received; stopping" in err and "internal error" not in err


def test_an_error_without_a_signal_stays_an_internal_error(monkeypatch, capsys):
    def fails(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "build_parser", _parser(fails))
    assert cli.main([]) == 2
    assert "internal error, could not decide: RuntimeError: boom" in capsys.readouterr().err
