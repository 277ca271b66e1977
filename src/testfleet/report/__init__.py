"""``testfleet report``: the state of the fleet's coverage, visible at a glance.

Layout (one job per module):

- :mod:`.model` - the report's dataclasses (schema ``testfleet.report/1``);
- :mod:`.collect` - pure: registrations + config -> coverage matrix, holes, ledger;
- :mod:`.references`, :mod:`.expiry` - pure parsing of disabled reasons;
- :mod:`.gitage` - when each ``disabled=`` line last changed (``git blame``);
- :mod:`.planview`, :mod:`.history`, :mod:`.gates` - plan timelines, duration drift,
  metric-gate verdicts and trends from the history database;
- :mod:`.health`, :mod:`.gate_verdicts` - pure: each stage's health (passing, failing,
  broken) and the gate table's verdicts, both from the results "Failing now" shows;
- :mod:`.project_name` - the name the report is titled with;
- :mod:`.sections` - the one order of sections every format follows;
- :mod:`.rules` - ``[tool.testfleet.check]`` rules, run by ``testfleet check``;
- :mod:`.build` - the only I/O orchestration;
- ``render_*`` and :mod:`.svg` - text (rich), Markdown, JSON and self-contained HTML
  (``render_failing``: the "Failing now" section in each).

Nothing is imported here, so ``testfleet check`` pays only for what it uses.
"""
