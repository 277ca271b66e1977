"""The order of the report's sections: one list, so every format reads alike.

Reading order is the order of urgency. Right after the headline and its cards comes
what is failing now; then coverage lost (holes, dormant stages), the coverage matrix and
its groupings, the disabled ledger, the plan's shard balance, metric history and the
result strips. Each renderer (``render_html``, ``render_text``, ``render_markdown``)
maps these ids to its own section functions and renders them in this order, skipping
ids it has nothing for; ``tests/report/test_truth.py`` checks that every format
follows it.

To add a section: put its id here where it belongs, then give each renderer a
function for it (HTML: ``render_html.SECTIONS``, whose id is also the section's
``id=`` anchor and its entry in the page's navigation; text: ``render_text.SECTIONS``;
Markdown: ``render_markdown.SECTIONS``) and its data a key in ``render_json``.
"""

from __future__ import annotations

ORDER: tuple[str, ...] = (
    "failing",    # files whose last run failed, by stage (broken first): act on these now
    "incidents",  # the failures of recent runs grouped by cause: infrastructure or test
    "holes",      # stages and backends with nothing that can run
    "dormant",    # stages switched off in config, with reason and where to switch back on
    "matrix",     # registrations per stage and category, with each stage's health
    "backends",   # the matrix's totals per backend
    "labels",     # ... and per label
    "ledger",     # every disabled registration, oldest first
    "plan",       # --plan: each stage's shards as an estimated timeline
    "drift",      # est_time literals far from measured durations
    "gates",      # metric gates: last verdict (the same one "failing" reads), runs
    "trends",     # metric values over runs, with the band the next run is judged in
    "history",    # why history is missing, when it is
    "results",    # pass rates, result strips, flaky files, probes of dormant stages
    "findings",   # [tool.testfleet.check] rule findings
)
