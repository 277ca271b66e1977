"""The coverage measure that holds every schema to its real output must be able to say
"not described": a schema that merely allows a key (an open object, an empty schema, a
map of anything) describes none of what is under it, as the hand-kept schemas that
covered 3 of a report's fields did."""

from __future__ import annotations

from typing import Any

from typing_extensions import NotRequired, TypedDict

from testfleet.documents.base import closed

from .schema_coverage import coverage

DOC = {"schema": "x/1", "stages": [{"name": "a", "counts": {"enabled": 1}}], "extra": {"k": 1}}


def _schema(stage: dict[str, Any], top_extra: Any = False) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": top_extra,
            "properties": {"schema": {"const": "x/1"},
                           "stages": {"type": "array", "items": stage}}}


def test_an_open_object_describes_nothing_under_it() -> None:
    cov = coverage(DOC, _schema({"type": "object", "additionalProperties": True},
                                top_extra=True))
    assert cov.missing == ["extra", "extra.k", "stages[].counts", "stages[].counts.enabled",
                           "stages[].name"]
    assert cov.undescribed["stages[].counts.enabled"] == "stages[]"


def test_an_empty_schema_says_nothing() -> None:
    cov = coverage({"schema": "x/1", "stages": []},
                   {"type": "object", "properties": {"schema": {"const": "x/1"}, "stages": {}}})
    assert cov.missing == ["stages"]


def test_declared_keys_and_typed_maps_are_described() -> None:
    stage = {"type": "object", "additionalProperties": False,
             "properties": {"name": {"type": "string"},
                            "counts": {"type": "object",
                                       "additionalProperties": {"type": "integer"}}}}
    top = _schema(stage, top_extra={"type": "object",
                                    "additionalProperties": {"type": "integer"}})
    cov = coverage(DOC, top)
    assert not cov.missing and cov.keys == cov.keys_described == 7


def test_a_key_the_writers_type_lacks_is_not_described() -> None:
    """What the output test sees when a writer emits a key its document type does not
    declare: the generated schema is closed, so the key is undescribed (and invalid)."""
    from pydantic import TypeAdapter

    @closed
    class Row(TypedDict):
        name: str
        note: NotRequired[str | None]
        """Why, when there is a reason."""

    schema = TypeAdapter(Row).json_schema()
    assert schema["additionalProperties"] is False
    assert schema["properties"]["note"]["description"] == "Why, when there is a reason."
    assert not coverage({"name": "a", "note": None}, schema).missing
    assert coverage({"name": "a", "surprise": 1}, schema).missing == ["surprise"]
