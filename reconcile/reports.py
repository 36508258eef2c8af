"""A run's result as files for CI: JUnit XML, a Markdown summary, one self-contained HTML page. Pure.

JUnit: one test suite, one test case per table (`classname` = the database, `name` = the table):
passed when equal, a `<failure>` with the missing/extra/changed counts and the first keys when the
table differs (after `--repair`, what its re-check still finds), an `<error>` when the table could not
be compared (upstream unreachable, schema mismatch, missing table). Every CI system shows that natively.

Markdown: a heading with the verdict and a short table, for CI job summaries and pull-request comments.

HTML: no network, no external file. Per table: the chunk map (one cell per key range or hash bucket,
green when both sides agreed, red when they differed, outlined when bisection sent it to the row
diff), the differing rows side by side with the changed columns marked, and the time of each stage.
A few lines of script only filter the tables; the page reads fully without it.
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from typing import Any

from reconcile.result import (
    EXIT_DIFFERENT,
    EXIT_EQUAL,
    KINDS,
    ReconcileResult,
    RowSample,
    TableResult,
)

VERDICT = {EXIT_EQUAL: "equal", EXIT_DIFFERENT: "different"}
FIRST_KEYS = 5  # keys named per kind in a JUnit failure and the Markdown summary


def _verdict(result: ReconcileResult) -> str:
    return VERDICT.get(result.exit_code, "error")


def _remaining(t: TableResult) -> Mapping[str, int]:
    counts = t.repair.remaining if t.repair is not None else t.diff
    return {k: getattr(counts, k) for k in KINDS}


def _failed(t: TableResult) -> bool:
    return t.status != "error" and t.remaining > 0


def _show_key(key: Mapping[str, Any]) -> str:
    if len(key) == 1:
        return repr(next(iter(key.values())))
    return "(" + ", ".join(f"{k}={v!r}" for k, v in key.items()) + ")"


def first_keys(t: TableResult, limit: int = FIRST_KEYS) -> dict[str, list[str]]:
    """The first sampled keys of each kind of difference, printable."""
    out: dict[str, list[str]] = {}
    for kind in KINDS:
        keys = [_show_key(s.key) for s in t.diff.samples if s.kind == kind][:limit]
        if keys:
            out[kind] = keys
    return out


# ---------------------------------------------------------------- JUnit


def junit_xml(result: ReconcileResult) -> str:
    """JUnit XML of a run (see the module docstring)."""
    failures = sum(_failed(t) for t in result.tables)
    errors = sum(t.status == "error" for t in result.tables)
    suite = ET.Element(
        "testsuite",
        name="reconcile",
        tests=str(len(result.tables)),
        failures=str(failures),
        errors=str(errors),
        skipped="0",
        time=f"{result.seconds:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="upstream", value=result.upstream)
    ET.SubElement(properties, "property", name="max_diff", value=str(result.max_diff))
    for t in result.tables:
        db, _, table = t.table.partition(".")
        case = ET.SubElement(suite, "testcase", classname=db, name=table or db, time=f"{t.seconds:.3f}")
        if t.status == "error":
            ET.SubElement(case, "error", message=t.error or "error", type="ReconcileError").text = t.error
            continue
        if _failed(t):
            counts = _remaining(t)
            message = ", ".join(f"{n} {k}" for k, n in counts.items())
            lines = [f"{t.table}: {message} (of {t.upstream_rows} upstream rows, {t.delta_rows} in Delta)"]
            lines += [f"first {kind}: {', '.join(keys)}" for kind, keys in first_keys(t).items()]
            if t.diff.by_column:
                lines.append(
                    "changed columns: " + ", ".join(f"{c} ({n})" for c, n in t.diff.by_column.items())
                )
            failure = ET.SubElement(case, "failure", message=message, type="DataMismatch")
            failure.text = "\n".join(lines)
        details = [f"strategy {t.strategy}, {t.chunks} chunks, {t.chunks_differing} differing"]
        details += [f"note: {n}" for n in t.notes]
        if t.repair is not None:
            details.append(f"repaired: deleted {t.repair.deleted}, upserted {t.repair.upserted}")
        ET.SubElement(case, "system-out").text = "\n".join(details)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


# ---------------------------------------------------------------- Markdown


def _md(text: object) -> str:
    """A table cell: pipes escaped, one line."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown(result: ReconcileResult) -> str:
    """A short summary for CI job summaries and pull-request comments."""
    icon = {"equal": "✅", "different": "❌", "error": "⚠️"}
    verdict = _verdict(result)
    lines = [
        f"### {icon[verdict]} reconcile: {verdict}",
        "",
        f"{len(result.tables)} tables against {_md(result.upstream)}: {result.differences} differing rows "
        f"(max {result.max_diff}), {result.seconds:.1f}s",
        "",
        "| table | result | upstream rows | Delta rows | missing | extra | changed | time |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for t in result.tables:
        if t.status == "error":
            lines.append(f"| `{_md(t.table)}` | ⚠️ error | | | | | | {t.seconds:.1f}s |")
            continue
        status = "✅ equal" if t.status == "equal" else "❌ different"
        if t.repair is not None:
            status += ", repaired" if t.repair.remaining.total == 0 else ", repair incomplete"
        lines.append(
            f"| `{_md(t.table)}` | {status} | {t.upstream_rows:,} | {t.delta_rows:,} | {t.diff.missing} | "
            f"{t.diff.extra} | {t.diff.changed} | {t.seconds:.1f}s |"
        )
    details = []
    for t in result.tables:
        if t.status == "error":
            details.append(f"- `{_md(t.table)}`: {_md(t.error)}")
        elif t.diff.total:
            keys = "; ".join(f"{kind}: {', '.join(k)}" for kind, k in first_keys(t).items())
            details.append(f"- `{_md(t.table)}`: {_md(keys)}")
    if details:
        lines += ["", *details]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- HTML

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 6px}
.meta{color:#59636e}.equal{color:#1a7f37}.different{color:#cf222e}.error{color:#9a6700}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #d1d9e0;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.map{display:flex;flex-wrap:wrap;gap:2px;max-width:960px;margin:6px 0}
.chunk{width:12px;height:12px;border-radius:2px;background:#2da44e}.chunk.diff{background:#cf222e}
.chunk.leaf{outline:2px solid #0969da;outline-offset:-1px}
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px;border-radius:2px}
td.changed{background:#ffebe9;font-weight:600}code{font-size:12px}
.kind{font-weight:600}.filter{margin:12px 0}section.hidden{display:none}
"""

_SCRIPT = """
(function () {
  var box = document.getElementById('only-differing');
  function apply() {
    document.querySelectorAll('section.table').forEach(function (s) {
      s.classList.toggle('hidden', box.checked && s.dataset.status === 'equal');
    });
  }
  box.addEventListener('change', apply);
  apply();
  document.body.dataset.ready = 'yes';
})();
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _value(value: Any) -> str:
    if value is None:
        return '<i class="meta">NULL</i>'
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return f"<code>{_e(text)}</code>"


def _chunk_map(t: TableResult) -> str:
    if not t.chunk_map:
        return ""
    narrowed = set(t.narrowed)
    cells = []
    for c in t.chunk_map:
        classes = "chunk" + ("" if c.equal else " diff") + (" leaf" if c.name in narrowed else "")
        title = f"{c.name}: {c.upstream_rows} upstream, {c.delta_rows} Delta rows, {'equal' if c.equal else 'differ'}"
        cells.append(f'<div class="{classes}" title="{_e(title)}"></div>')
    legend = (
        '<div class="legend meta">chunk map (key ranges in key order, or hash buckets):'
        '<span style="background:#2da44e"></span>equal'
        '<span style="background:#cf222e"></span>differing<span style="outline:2px solid #0969da"></span>'
        "row-diffed after bisection</div>"
    )
    differing = [c for c in t.chunk_map if not c.equal]
    listing = ""
    if differing:
        rows = "".join(
            f'<tr><td><code>{_e(c.name)}</code></td><td class="n">{c.upstream_rows}</td>'
            f'<td class="n">{c.delta_rows}</td></tr>'
            for c in differing[:50]
        )
        more = f"<p class='meta'>… and {len(differing) - 50} more</p>" if len(differing) > 50 else ""
        listing = (
            "<table><tr><th>differing chunk</th><th>upstream rows</th><th>Delta rows</th></tr>"
            f"{rows}</table>{more}"
        )
    return f'{legend}<div class="map">{"".join(cells)}</div>{listing}'


def _sample_rows(samples: Iterable[RowSample]) -> str:
    samples = list(samples)
    if not samples:
        return ""
    columns: list[str] = []
    for s in samples:
        for side in (s.upstream, s.delta):
            for c in side or {}:
                if c not in columns:
                    columns.append(c)
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = []
    for s in samples:
        changed = set(s.columns)
        for label, side in (("upstream", s.upstream), ("Delta", s.delta)):
            cells = "".join(
                f'<td class="{"changed" if c in changed else ""}">'
                f"{_value(side.get(c)) if side is not None else '<i class=meta>—</i>'}</td>"
                for c in columns
            )
            first = f'<td rowspan="2" class="kind">{_e(s.kind)}</td>' if label == "upstream" else ""
            body.append(f"<tr>{first}<td class='meta'>{label}</td>{cells}</tr>")
    return (
        "<h3>differing rows (samples)</h3>"
        f"<table><tr><th>kind</th><th>side</th>{head}</tr>{''.join(body)}</table>"
    )


def _table_section(t: TableResult) -> str:
    status = t.status
    parts = [f'<section class="table" data-status="{_e(status)}" id="{_e(t.table)}">']
    parts.append(f'<h2>{_e(t.table)} — <span class="{_e(status)}">{_e(status)}</span></h2>')
    if t.error:
        parts.append(f'<p class="error">{_e(t.error)}</p></section>')
        return "".join(parts)
    parts.append(
        f'<p class="meta">strategy {_e(t.strategy)}; {t.chunks} chunks, {t.chunks_differing} differing; '
        f"upstream ts {_e(t.upstream_ts)}, Delta version {_e(t.delta_version)} "
        f"(resolved ts {_e(t.delta_resolved_ts)}); {t.upstream_queries} upstream queries</p>"
    )
    counts = "".join(f'<td class="n">{getattr(t.diff, k)}</td>' for k in KINDS)
    parts.append(
        "<table><tr><th>upstream rows</th><th>Delta rows</th><th>missing</th><th>extra</th><th>changed</th></tr>"
        f'<tr><td class="n">{t.upstream_rows}</td><td class="n">{t.delta_rows}</td>{counts}</tr></table>'
    )
    if t.diff.by_column:
        cols = ", ".join(f"<code>{_e(c)}</code> ({n})" for c, n in sorted(t.diff.by_column.items()))
        parts.append(f"<p>changed columns: {cols}</p>")
    parts.append(_chunk_map(t))
    parts.append(_sample_rows(t.diff.samples))
    if t.repair is not None:
        parts.append(
            f"<p>repair: deleted {t.repair.deleted}, upserted {t.repair.upserted} (Delta version "
            f"{_e(t.repair.delta_version)}); the re-check finds {t.repair.remaining.total} differing</p>"
        )
    stages = "".join(
        f"<tr><td>{_e(k)}</td><td class='n'>{v:.2f}s</td></tr>" for k, v in t.stage_seconds.items()
    )
    parts.append(
        f"<table><tr><th>stage</th><th>time</th></tr>{stages}"
        f"<tr><th>total</th><th class='n'>{t.seconds:.2f}s</th></tr></table>"
    )
    parts.extend(f'<p class="meta">note: {_e(n)}</p>' for n in t.notes)
    parts.append("</section>")
    return "".join(parts)


def html_page(result: ReconcileResult) -> str:
    """One self-contained page: styles and script inline, no request leaves it."""
    verdict = _verdict(result)
    summary_rows = "".join(
        f'<tr><td><a href="#{_e(t.table)}">{_e(t.table)}</a></td><td class="{_e(t.status)}">{_e(t.status)}</td>'
        f'<td class="n">{t.upstream_rows}</td><td class="n">{t.delta_rows}</td>'
        + "".join(f'<td class="n">{getattr(t.diff, k)}</td>' for k in KINDS)
        + f'<td class="n">{t.chunks_differing}/{t.chunks}</td><td class="n">{t.seconds:.2f}s</td></tr>'
        for t in result.tables
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>reconcile: {_e(verdict)}</title><style>{_STYLE}</style></head>
<body>
<h1>reconcile: <span class="{_e(verdict)}">{_e(verdict)}</span></h1>
<p class="meta">against {_e(result.upstream)}; {result.differences} differing rows (max {result.max_diff});
{result.upstream_bytes:,} bytes read upstream; {result.seconds:.1f}s</p>
<table id="summary"><tr><th>table</th><th>result</th><th>upstream rows</th><th>Delta rows</th><th>missing</th>
<th>extra</th><th>changed</th><th>chunks differing</th><th>time</th></tr>{summary_rows}</table>
<label class="filter"><input type="checkbox" id="only-differing"> only tables that differ</label>
{"".join(_table_section(t) for t in result.tables)}
<script>{_SCRIPT}</script>
</body></html>
"""
