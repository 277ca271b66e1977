"""How every document object is configured for pydantic: closed (an unknown key is an
error, and the schema says ``additionalProperties: false``), strict (no coercion: ``"1"``
is not a count), field descriptions from the attribute docstrings under each key."""

from __future__ import annotations

from pydantic import ConfigDict, with_config

#: a document object testfleet writes and only tools read
closed = with_config(ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True))
#: a document testfleet reads back at a trust boundary (a plan, a job status): the same,
#: without reading this package's source for descriptions each time a run loads one
boundary = with_config(ConfigDict(extra="forbid", strict=True))
