"""Incidents: failure signatures grouped per CI run, infrastructure or test.

A night on which a runner class cannot start is one incident, not one failure per test
file. The kernel that turns failure text into a signature lives in ``failures/`` (the
store and the runner need it too); the runner's side (a job's signatures, the step
summary) lives in ``runner/``. Pure algorithms (``group``, ``dormancy``) are kept apart
from what reads history or writes files, like everywhere else in testfleet.
"""
