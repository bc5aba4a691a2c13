"""The core every layer builds on: audio, ids, settings, errors, the artifact store and its cache and lease, the
table schemas and their validation, the provider protocols and registries, categories and languages.

Nothing here imports a provider, a metric, a task, a flow or the CLI, and nothing here orchestrates (no Prefect
or Dask): the import contracts in pyproject.toml hold it to that.
"""
