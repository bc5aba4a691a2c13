"""Prefect flows composing the tasks: evaluate (more to come: generate_dataset, backfill_judge, nightly)."""
