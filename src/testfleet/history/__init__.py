"""History that survives CI: portable, checksummed bundles of history records.

Each CI job exports what it recorded (``testfleet history export``); one merge step
folds the bundles into the history database (``testfleet history merge``), which the
CI engine's cache keeps for the next plan. ``bundle`` is the format, ``export`` and
``merge`` the two halves, ``trust`` the rule of who may write.
"""
