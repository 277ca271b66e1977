"""Published schemas: generated from the pydantic models that validate the same data, so
an editor's (or a CI step's) validation can never disagree with ``testfleet check``."""
