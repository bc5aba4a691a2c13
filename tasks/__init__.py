"""Prefect tasks: each handles one shard of keys for one stage by calling a plain function in this package.

The plain functions (`synthesize_items`; `run_stage` for every clip stage declared in tasks/stages.py) do the
work and are tested without Prefect; the tasks wrapping them add retries and logging. Tasks return a summary,
never audio or tables.
"""
