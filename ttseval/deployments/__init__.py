"""Prefect deployments of the ttseval flows: prefect.yaml (the definitions) and register.py (`prefect deploy`)."""
