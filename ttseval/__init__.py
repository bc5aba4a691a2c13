"""ttseval: a workflow-orchestrated evaluation pipeline for text-to-speech systems.

Importing this package is cheap and has no side effects: no torch, boto3, prefect or vendor SDK.
"""

__version__ = "0.1.0"
