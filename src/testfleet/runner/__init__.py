"""Execute one job of a plan: one process per file, timeouts that kill whole trees,
classified retries, fast-fail, live output, JUnit, step summary, history and the gate.

The pieces are small modules with one job each: :mod:`.model` (the data that flows),
:mod:`.settings` (config -> per-file timeouts), :mod:`.capture` (bounded output tail and
streaming pattern matching), :mod:`.retry` (whether a failed attempt is worth another),
:mod:`.tree` (finding and killing every descendant), :mod:`.process` (one attempt),
:mod:`.executor` (the job loop), :mod:`.live` (terminal / GitHub output), :mod:`.junit`,
:mod:`.summary` and :mod:`.hooks` (history store and metric gate, both fail-soft).
"""
