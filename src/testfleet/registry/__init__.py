"""Discover test files, parse their literal registrations, validate them."""

from testfleet.registry.model import GateCall, Registration, Registry

__all__ = ["GateCall", "Registration", "Registry"]
