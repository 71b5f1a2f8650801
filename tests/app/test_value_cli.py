"""`faux-checks check --output-form value`: a value target needs δ's unit; the command refuses before loading."""

from __future__ import annotations


def test_output_form_value_without_a_unit_is_a_configuration_error_naming_the_key(tmp_path, capfd):
    from faux_checks_app.cli import main

    data = tmp_path / "audit.csv"
    data.write_text("x,c\n1.0,a\n2.0,b\n")
    code = main(["check", "--model", str(tmp_path / "never-loaded.skops"), "--data", str(data), "--protected", "c",
                 "--output-form", "value"])
    err = capfd.readouterr().err
    assert code == 3, err                                            # a configuration error: nothing was scored
    assert "target_output = 'value'" in err and "[faux] unit" in err and "e.g. unit = \"EUR\"" in err, err
