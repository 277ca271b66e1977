"""Helpers shared by the command modules: loading the project, printing findings."""

from __future__ import annotations

import click

from testfleet.config import Project, load_project


def project_from(ctx: click.Context) -> Project:
    app = ctx.find_root().obj
    return load_project(app.directory, app.config_file)
