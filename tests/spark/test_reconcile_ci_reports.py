"""reconcile as a CI data check: report files from a real run, stdout kept clean, the HTML in Chromium.

The HTML page is opened by Debian's headless Chromium (`dev/setup.sh --test` installs it): the DOM it
dumps after running the page's script must hold every table, the chunk map and the marked changes, and
the script must have finished (`data-ready`), which it does not after a script error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reconcile.cli import main
from tests.spark.test_reconcile_files import config, rows, write_delta, write_expected
from tidelake.output import OutputStyle, configure

pytestmark = pytest.mark.spark


@pytest.fixture
def reports(spark, tmp_path: Path, capsys) -> dict:
    """One real run over two tables (one differs) with every report asked for, JSON lines on stderr."""
    expected, warehouse = tmp_path / "expected", tmp_path / "wh"
    write_expected(expected, [("scan-1", 100, rows(60))], ["id"])
    broken = [r for r in rows(60, bump=33) if r[0] != 50]
    write_delta(spark, warehouse / "shop" / "items", broken, 100)
    cfg = config(tmp_path, warehouse, expected, "expected")
    files = {
        kind: tmp_path / "out" / name
        for kind, name in [("junit", "r.xml"), ("markdown", "r.md"), ("html", "r.html")]
    }
    code = main(
        ["run", "--config", str(cfg), "--json", "--log-format", "json", "--progress-interval", "0.2",
         "--junit", str(files["junit"]), "--markdown", str(files["markdown"]), "--html", str(files["html"])]
    )  # fmt: skip
    captured = capsys.readouterr()
    configure(OutputStyle())
    return {"code": code, "out": captured.out, "err": captured.err, **files}


def test_json_run_keeps_stdout_to_the_result_and_writes_every_report(reports) -> None:
    assert reports["code"] == 1
    doc = json.loads(reports["out"])  # stdout is exactly one JSON document
    assert doc["status"] == "different"
    progress = [json.loads(line) for line in reports["err"].splitlines() if line.startswith("{")]
    assert progress and all(p["prog"] == "reconcile" for p in progress)
    assert any(p["event"] == "progress" and "shop.items" in p["stage"] for p in progress)

    suite = ET.parse(reports["junit"]).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "1", "0")
    failure = suite.find("testcase/failure")
    assert failure.get("message") == "1 missing, 0 extra, 1 changed"
    assert "first missing: 50" in failure.text and "first changed: 33" in failure.text
    assert "| `shop.items` | ❌ different | 60 | 59 | 1 | 0 | 1 |" in reports["markdown"].read_text()


def test_an_upstream_that_cannot_be_read_is_a_junit_error_and_exit_2(spark, tmp_path, capsys) -> None:
    cfg = config(tmp_path, tmp_path / "wh", tmp_path / "nowhere", "expected")
    junit = tmp_path / "r.xml"
    assert main(["run", "--config", str(cfg), "--json", "--quiet", "--junit", str(junit)]) == 2
    assert capsys.readouterr().out == ""
    suite = ET.parse(junit).getroot()
    assert suite.get("errors") == "1"
    assert "index.json: missing" in suite.find("testcase/error").get("message")


def test_the_html_report_renders_in_headless_chromium_without_script_errors(reports, tmp_path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.fail("Chromium is not installed: run `dev/setup.sh --test` (Debian package chromium)")
    page = reports["html"]
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]  # fmt: skip
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    )
    assert 'data-ready="yes"' in dom.stdout  # the script ran to its end
    assert "Uncaught" not in dom.stderr  # Chromium logs script errors to the console
    assert dom.stdout.count('class="chunk') >= 6
    assert '<section class="table" data-status="different" id="shop.items">' in dom.stdout
    assert '<td class="changed"><code>0.99</code></td>' in dom.stdout
    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,1400", page.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    assert shot.stat().st_size > 10_000
    keep = Path("/tmp/tidelake-report-screenshot.png")
    shutil.copy(shot, keep)  # for a person to look at
