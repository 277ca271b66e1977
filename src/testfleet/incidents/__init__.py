"""Incidents: failure signatures, their grouping per CI run, infrastructure or test.

A night on which a runner class cannot start is one incident, not one failure per test
file. Pure algorithms (``normalize``, ``signature``, ``group``, ``dormancy``) are kept
apart from what reads history or writes files, like everywhere else in testfleet.
This package's ``__init__`` imports nothing: ``testfleet.config`` imports the key
definitions of ``incidents.config`` on every command.
"""
