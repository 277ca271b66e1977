"""Adoption: read a tree that already registers its tests, and its CI, and derive a
configuration that keeps everything it runs (``testfleet init --from-existing``).

Nothing of the project is imported or executed: test files are read with the registry's
statement scanner, the project's CI modules with :mod:`ast`, its workflows as YAML.

- :mod:`.scan` reads the tree's marker calls (:mod:`.calls` reads one call by its
  marker's signature, :mod:`.signatures` reads that signature from the project's marker
  module, :mod:`.roots` finds where the tests are);
- :mod:`.project` reads the project's collector and its neighbours (labels, crons, gate
  defaults); :mod:`.runner` the runner script a stage job starts;
- :mod:`.workflows` reads the GitHub workflows (:mod:`.workflow_yaml` loads them and
  follows reusable workflows, :mod:`.job` reads one stage job, :mod:`.gates` its PR
  gates and ordering, :mod:`.expr` evaluates ``${{ }}`` expressions statically), into
  the model of :mod:`.ci_model`;
- :mod:`.derive` turns all of it into configuration data (:mod:`.stages`,
  :mod:`.job_settings`, :mod:`.implicit`, :mod:`.vocabulary`, :mod:`.markers`,
  :mod:`.policy`), :mod:`.toml_text` writes it, :mod:`.scaffold` starts a tree with no
  registrations;
- :mod:`.report` writes the adoption report, comparing the two sides per trigger
  (:mod:`.triggers`) and with the runner's own saved list (:mod:`.runner_selection`).
"""
