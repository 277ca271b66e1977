"""Results from history: final outcomes per (file, stage), flakiness, quarantine, restore.

``model`` and ``flaky`` are pure (data in, verdicts out); ``query`` reads the history
database into that data.
"""
