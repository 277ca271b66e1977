"""``testfleet report``: the state of the fleet's coverage, visible at a glance.

Layout (one job per module):

- :mod:`.model` - the report's dataclasses (schema ``testfleet.report/1``);
- :mod:`.collect` - pure: registrations + config -> coverage matrix, holes, ledger;
- :mod:`.references`, :mod:`.expiry` - pure parsing of disabled reasons;
- :mod:`.ages` - when each ``disabled=`` line last changed, as read from git;
- :mod:`.planview`, :mod:`.history`, :mod:`.gates` - plan timelines, duration drift,
  metric-gate verdicts and trends, from what the history held;
- :mod:`.health`, :mod:`.gate_verdicts` - pure: each stage's health (passing, failing,
  broken) and the gate table's verdicts, both from the results "Failing now" shows;
- :mod:`.sections` - the one order of sections every format follows;
- :mod:`.rules` - ``[tool.testfleet.check]`` rules, run by ``testfleet check``;
- ``render_*`` and :mod:`.svg` - text (rich), Markdown, JSON and self-contained HTML
  (``render_failing``: the "Failing now" section in each).

The package reads nothing: no database, no git, no file. The application floor gathers
the inputs (:mod:`testfleet.app.report`: the history opened once, ``git blame``, the plan
file, the project's name) and the report derives its sections from those values and
renders them (held by the "report reads nothing" contract in ``.importlinter``).

Nothing is imported here, so ``testfleet check`` pays only for what it uses.
"""
