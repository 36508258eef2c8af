"""Report files for CI: JUnit XML parsed back, the Markdown summary, and the HTML page's content."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import MappingProxyType

import pytest

from reconcile.reports import html_page, junit_xml, markdown
from reconcile.result import ChunkStatus, DiffCounts, ReconcileResult, RepairOutcome, RowSample, TableResult

pytestmark = pytest.mark.unit


def sample_result() -> ReconcileResult:
    diff = DiffCounts(
        missing=1,
        extra=1,
        changed=2,
        by_column=MappingProxyType({"price": 2}),
        samples=(
            RowSample("changed", {"id": 7}, ("price",), {"id": 7, "price": "1.50", "name": "a<b>"},
                      {"id": 7, "price": "1.05", "name": "a<b>"}),
            RowSample("changed", {"id": 9}, ("price",), {"id": 9, "price": "2", "name": None},
                      {"id": 9, "price": "3", "name": None}),
            RowSample("missing", {"id": 11}, (), {"id": 11, "price": "4", "name": "x"}, None),
            RowSample("extra", {"id": 12}, (), None, {"id": 12, "price": "5", "name": "y"}),
        ),
    )  # fmt: skip
    different = TableResult(
        "shop.orders", "different", strategy="range", upstream_rows=100, delta_rows=100, chunks=3,
        chunks_differing=1, diff=diff, seconds=1.25, notes=("a note",),
        chunk_map=(ChunkStatus("[-inf, 40)", 40, 40, True), ChunkStatus("[40, 80)", 40, 40, False),
                   ChunkStatus("[80, +inf)", 20, 20, True)),
        narrowed=("[40, 80)",), stage_seconds=MappingProxyType({"checksums": 0.5, "row diff": 0.7}),
    )  # fmt: skip
    equal = TableResult("shop.users", "equal", strategy="bucket", upstream_rows=5, delta_rows=5, chunks=1)
    failed = TableResult.failed("shop.gone", "no Delta table at /wh/shop/gone", 0.1)
    return ReconcileResult("mariadb 11.4 at db:3306", (different, equal, failed), max_diff=0, seconds=2.0)


def test_junit_has_one_case_per_table_with_failures_and_errors() -> None:
    suite = ET.fromstring(junit_xml(sample_result()))
    assert suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert set(cases) == {("shop", "orders"), ("shop", "users"), ("shop", "gone")}
    failure = cases[("shop", "orders")].find("failure")
    assert failure is not None and failure.get("message") == "1 missing, 1 extra, 2 changed"
    assert "first changed: 7, 9" in failure.text and "first missing: 11" in failure.text
    assert "first extra: 12" in failure.text and "price (2)" in failure.text
    assert cases[("shop", "users")].find("failure") is None and cases[("shop", "users")].find("error") is None
    error = cases[("shop", "gone")].find("error")
    assert error is not None and "no Delta table" in error.get("message")


def test_a_repaired_table_passes_in_junit_when_its_recheck_is_clean() -> None:
    result = sample_result()
    repaired = TableResult(
        "shop.orders", "different", diff=result.tables[0].diff, repair=RepairOutcome(1, 3, 5, DiffCounts())
    )
    suite = ET.fromstring(junit_xml(ReconcileResult("u", (repaired,))))
    assert suite.get("failures") == "0"
    assert "repaired: deleted 1, upserted 3" in suite.find("testcase/system-out").text


def test_markdown_summary_has_a_row_per_table_and_the_first_keys() -> None:
    text = markdown(sample_result())
    assert text.startswith("### ⚠️ reconcile: error")
    assert "| `shop.orders` | ❌ different | 100 | 100 | 1 | 1 | 2 | 1.2s |" in text
    assert "| `shop.users` | ✅ equal |" in text
    assert "- `shop.orders`: missing: 11; extra: 12; changed: 7, 9" in text
    assert "- `shop.gone`: no Delta table at /wh/shop/gone" in text


def test_html_is_self_contained_and_marks_the_changed_columns() -> None:
    page = html_page(sample_result())
    assert "http://" not in page and "https://" not in page and "src=" not in page
    assert page.count('<section class="table"') == 3
    assert '<div class="chunk diff leaf" title="[40, 80): 40 upstream, 40 Delta rows, differ">' in page
    assert (
        '<td class="changed"><code>1.50</code></td>' in page
        and '<td class="changed"><code>1.05</code></td>' in page
    )
    assert "a&lt;b&gt;" in page and "<b>" not in page  # values are escaped
    assert "<td>row diff</td><td class='n'>0.70s</td>" in page
