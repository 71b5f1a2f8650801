"""Screenshots of the report sections (docs/evidence.md), rendered in headless Chromium.

Two real gate runs in a temporary folder (embedded sqlite registry, temporary Prefect API):

1. the Adult demo's v1 and v2 (3 training epochs, 3,000 audit rows, one aux seed, signed evidence pack): the
   decision with its power statement, the change in its parts, the group-level table and the history's churn;
2. a constructed pair at an unchanged flagged fraction that swaps who is harmed, under
   ``max_newly_flagged_fraction = 0.05``: the "Against earlier versions" section of the failing v2.

Usage: ``.venv/bin/python scripts/report_screenshots.py docs/img`` (needs ``chromium`` on PATH; ~3 min on 2 cores).
Writes ``report-<section>.png`` into the folder and prints the console messages Chromium logged (none expected).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _shot(html: Path, section: str, out: Path, width: int = 1200, height: int = 2400) -> str:
    """Chromium screenshot of one section of a report page (the others hidden); returns Chromium's stderr."""
    page = html.read_text()
    css = f"<style>section{{display:none}} section#{section}{{display:block}} h1,.sub,nav{{display:none}}</style>"
    single = html.with_name(f"only-{section}.html")
    single.write_text(page.replace("</head>", css + "</head>", 1))
    raw = out.with_suffix(".raw.png")
    done = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={raw}", f"--window-size={width},{height}", "--enable-logging=stderr",
                           "--v=0", single.as_uri()], capture_output=True, text=True, timeout=120)
    from PIL import Image, ImageChops

    img = Image.open(raw).convert("RGB")
    box = ImageChops.difference(img, Image.new("RGB", img.size, (255, 255, 255))).getbbox()
    img.crop((0, 0, width, min(height, (box[3] + 20) if box else height))).save(out)
    raw.unlink()
    return "\n".join(line for line in done.stderr.splitlines() if "CONSOLE" in line)


def main(folder: str) -> None:
    import numpy as np
    import pandas as pd
    from _support import ProxyWhere, make_data

    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks.settings import configure_environment
    from faux_checks_app.cli import main as cli
    from faux_checks_app.demo import build_demo_versions

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    configure_environment()
    from faux_checks_flows.gate import gate

    console = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        versions = {v.name: v for v in build_demo_versions(d / "models", seed=0, epochs=3)}
        audit = pd.read_csv(versions["v1"].audit_path).sample(3000, random_state=0).reset_index(drop=True)
        audit.to_csv(d / "audit.csv", index=False)
        shipped = ROOT / "faux_checks" / "gate" / "policies" / "adult.toml"
        (d / "policy.toml").write_text(shipped.read_text().replace("\naux_seeds = 3\n", "\naux_seeds = 1\n", 1))
        cli(["keygen", str(d / "signer.pem")])
        uri = f"sqlite:///{d}/mlflow.db"
        reg = Registry(uri)
        for name in ("v1", "v2"):
            reg.register_version("adult", versions[name].model_path, feature_spec_path=versions[name].spec_path)
        gate(model_name="adult", data_path=str(d / "audit.csv"), policy_path=str(d / "policy.toml"), tracking_uri=uri,
             report_root=str(d / "reports"), signing_key=str(d / "signer.pem"), return_state=True)
        v2 = max(reg.history("adult"), key=lambda r: int(r["version"]))
        page = Path(v2["fairness_report"])
        for section in ("decision", "evidence", "groups", "history"):
            console.append(_shot(page, section, out / f"report-{section}.png"))
        print(json.dumps({"adult_v2_regression": json.loads(page.with_name("report.json").read_text())["regression"]},
                         indent=1, default=str)[:3000])

        frame = make_data(1200, seed=3)
        frame.to_csv(d / "swap.csv", index=False)
        t = float(np.quantile(frame["f1"], 0.75))
        save_torchscript(ProxyWhere(1.0, t), d / "s1.pt")
        save_torchscript(ProxyWhere(-1.0, t), d / "s2.pt")
        (d / "swap.toml").write_text('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\n'
                                     'max_flagged_fraction = 0.4\n[aux]\nepochs = 30\n[decision]\nmin_group_rows = 20\n'
                                     'aux_seeds = 1\nmax_newly_flagged_fraction = 0.05\n')
        reg.register_version("swap", d / "s1.pt")
        reg.register_version("swap", d / "s2.pt")
        gate(model_name="swap", data_path=str(d / "swap.csv"), policy_path=str(d / "swap.toml"), tracking_uri=uri,
             report_root=str(d / "reports"), return_state=True)
        s2 = max(reg.history("swap"), key=lambda r: int(r["version"]))
        page = Path(s2["fairness_report"])
        console.append(_shot(page, "regression", out / "report-regression.png"))
        console.append(_shot(page, "rules", out / "report-rules-no-new-harm.png", height=1200))
        print("chromium console:", [c for c in console if c] or "none")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/img")
