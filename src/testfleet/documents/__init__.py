"""The JSON documents testfleet writes, one module per kind: the shape each writer must
return, typed (``TypedDict``), and the only source of the schema ``testfleet schema KIND``
publishes (pydantic's ``TypeAdapter`` reads the same types; :mod:`testfleet.schemas.outputs`).

A writer annotates what it builds with these types, so a key it adds without declaring
it here is a type error (mypy, in the test suite), and an undeclared key cannot reach the
published schema by any other road. The modules import pydantic (for the config of each
object: closed, strict); writers import them under ``TYPE_CHECKING`` only, so writing a
document costs nothing at run time and ``--help`` stays lean.
"""
