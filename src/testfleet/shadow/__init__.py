"""Shadow mode: before the switch, testfleet runs beside a project's existing CI and says,
on every real event, whether it would run what that CI ran -- the same files per stage, on
the same runner labels, in as many shards -- without running a test or failing the run.

- :mod:`.observed` reads what the existing CI's jobs recorded (their runner's listing
  output, or their JUnit files), one block per job;
- :mod:`.compare` compares that with the plan for the same event, lane by lane, into a
  ``testfleet.shadow/1`` document and its step-summary Markdown;
- :mod:`.history` keeps the comparisons of runs that are not pull requests, so that "N
  runs without a difference: the switch is safe" is counted.

It imports only the floors below features (documents, planning, helpers).
"""
