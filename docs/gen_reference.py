"""mkdocs-gen-files script: the configuration reference, generated at build time from the
same pydantic models that validate the configuration."""

import mkdocs_gen_files

from testfleet.schemas.config import config_reference_markdown

with mkdocs_gen_files.open("config-reference.md", "w") as fh:
    fh.write(config_reference_markdown())
