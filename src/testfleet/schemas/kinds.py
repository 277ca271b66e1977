"""The names of the published schemas, without importing pydantic (``--help`` stays lean)."""

OUTPUT_KINDS = ("check", "list", "plan", "report", "durations", "durations-suggest",
                "gate-evaluate", "gate-history", "db-status", "history-merge", "history-show",
                "results", "flaky", "job-status", "reconcile", "incidents", "shadow",
                "queue-status", "rescue", "breakers")
KINDS = ("config", *OUTPUT_KINDS)
