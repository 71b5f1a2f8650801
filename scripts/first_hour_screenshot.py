"""Screenshot of the first-hour report (docs/img/first_hour_report.png), rendered in headless Chromium.

The journey of tests/app/test_first_hour_journey.py in a temporary folder (tests/_first_hour.py: bank marketing, a
skops Pipeline, an XGBoost booster and a torch MLP logged with MLflow's own API): ``faux-checks gate bank``, then
``--version 1 --force``; the re-gated v1's page is shot with only its decision, limitations, scores (the swap
reading's axis), policy (the score unit) and history (both gates of v1, δ and policy hash) sections shown.

Usage: ``.venv/bin/python scripts/first_hour_screenshot.py [docs/img/first_hour_report.png]`` (needs ``chromium`` on
PATH and ../shared/data/bank_marketing; ~3 min on 2 shared cores). Prints Chromium's console lines (none expected).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
SECTIONS = ("decision", "limitations", "scores", "policy", "history")


def shoot(html: Path, out: Path, work: Path, width: int = 1200, height: int = 4000) -> list[str]:
    """Chromium screenshot of ``SECTIONS`` of a report page, cropped to its content; returns the console lines."""
    from PIL import Image, ImageChops

    shown = ", ".join(f"section#{s}" for s in SECTIONS)
    css = f"<style>section{{display:none}} {shown}{{display:block}} nav{{display:none}}</style>"
    single = work / "first-hour.html"
    single.write_text(html.read_text().replace("</head>", css + "</head>", 1))
    raw = work / "raw.png"
    done = subprocess.run([shutil.which("chromium") or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--no-first-run", f"--user-data-dir={work / 'profile'}", "--hide-scrollbars",
                           f"--screenshot={raw}", f"--window-size={width},{height}", "--enable-logging=stderr",
                           "--v=0", single.as_uri()], capture_output=True, text=True, timeout=180)
    img = Image.open(raw).convert("RGB")
    box = ImageChops.difference(img, Image.new("RGB", img.size, (255, 255, 255))).getbbox()
    out.parent.mkdir(parents=True, exist_ok=True)
    img.crop((0, 0, width, min(height, (box[3] + 20) if box else height))).save(out)
    return [line for line in done.stderr.splitlines() if "CONSOLE" in line]


def main(target: str) -> None:
    from _first_hour import build_journey

    from faux_checks_app.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        j = build_journey(work)
        common = ["--data", str(j["data"]), "--policy", str(j["policy"]), "--tracking-uri", j["uri"],
                  "--report-dir", str(work / "reports"), "--json", "--quiet"]
        print("gate bank:", cli(["gate", "bank", *common]))
        v1 = j["versions"]["pipeline"]
        from faux_checks.registry import Registry

        print(f"gate bank --version {v1} --force:", cli(["gate", "bank", "--version", v1, "--force", *common]))
        row = {r["version"]: r for r in Registry(j["uri"]).history("bank")}[v1]
        page = Path(row["fairness_report"])
        history = json.loads(page.with_name("report.json").read_text())["history"]
        print("v1 history points:", [(h["version"], h["decision"], h.get("delta"), (h.get("policy_sha256") or "")[:12])
                                     for h in history if h["version"] == v1])
        console = shoot(page, Path(target), work)
        print("chromium console:", console or "none")
        print("written:", target)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "docs" / "img" / "first_hour_report.png"))
