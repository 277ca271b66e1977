"""Reconciliation: what the jobs of a CI run say they ran, compared with the plan.

``status`` is the job status file every executing path writes (the file boundary);
``compare`` the pure comparison; ``render`` its table, Markdown, JSON and GitHub
annotations. ``testfleet reconcile`` (cli/reconcile.py) reads the files and prints.
"""
