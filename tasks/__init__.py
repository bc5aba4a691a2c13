"""Prefect tasks: each handles one shard of keys for one stage by calling a plain function in this package.

The plain functions (`synthesize_items`, `transcribe_work`, `score_work`) do the work and are tested without
Prefect; the `*_task` wrappers add retries and logging. Tasks return a summary, never audio or tables.
"""
