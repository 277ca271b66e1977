"""``testfleet schema KIND``: print a published JSON Schema (for editors and CI checks)."""

from __future__ import annotations

import click

from testfleet.cli._options import output_option
from testfleet.schemas.kinds import KINDS


@click.command("schema")
@click.argument("kind", type=click.Choice(KINDS))
@output_option()
def command(kind: str) -> int:
    """Print the JSON Schema of KIND.

    `config` validates `testfleet.toml` (or the `[tool.testfleet]` table): point Taplo /
    Even Better TOML at it; the same file ships as `schemas/testfleet-config.schema.json`.
    Every other kind is a machine output: the `--format json` document of that command,
    whose `schema` field reads `testfleet.KIND/N`.

    \b
    Examples:
      testfleet schema config -o testfleet-config.schema.json
      testfleet schema plan
      testfleet schema check | check-jsonschema --schemafile /dev/stdin check.json
    """
    if kind == "config":
        from testfleet.schemas.config import config_json_text

        click.echo(config_json_text(), nl=False)
    else:
        from testfleet.schemas.outputs import output_json_text

        click.echo(output_json_text(kind), nl=False)
    return 0
