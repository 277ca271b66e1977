"""``testfleet report``: the state of the fleet's coverage, visible at a glance.

Layout (one job per module):

- :mod:`.model` - the report's dataclasses (schema ``testfleet.report/1``);
- :mod:`.collect` - pure: registrations + config -> coverage matrix, holes, ledger;
- :mod:`.references`, :mod:`.expiry` - pure parsing of disabled reasons;
- :mod:`.gitage` - when each ``disabled=`` line last changed (``git blame``);
- :mod:`.planview`, :mod:`.history`, :mod:`.gates` - plan timelines, duration drift,
  metric-gate verdicts and trends from the history database;
- :mod:`.rules` - ``[tool.testfleet.check]`` rules, run by ``testfleet check``;
- :mod:`.build` - the only I/O orchestration;
- ``render_*`` and :mod:`.svg` - text (rich), Markdown, JSON and self-contained HTML.

Nothing is imported here, so ``testfleet check`` pays only for what it uses.
"""
