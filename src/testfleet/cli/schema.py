"""``testfleet schema KIND``: print a published JSON Schema (for editors and CI checks)."""

from __future__ import annotations

import click

KINDS = ("config",)


@click.command("schema")
@click.argument("kind", type=click.Choice(KINDS))
def command(kind: str) -> int:
    """Print the JSON Schema of KIND.

    `config` validates `testfleet.toml` (or the `[tool.testfleet]` table): point Taplo /
    Even Better TOML at it. The same file ships in the repository as
    `schemas/testfleet-config.schema.json`.
    """
    from testfleet.schemas.config import config_json_text

    click.echo(config_json_text(), nl=False)
    return 0
