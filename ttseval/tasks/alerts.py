"""Alerts: a nightly run's flagged drift sent through Prefect notification blocks (ttseval settings `alert_blocks`).

Prefect's own mechanism, so any of its notification blocks works (Slack, Microsoft Teams, e-mail through SendGrid,
PagerDuty, Opsgenie, a custom webhook) and the URL or token lives in the block on the Prefect server, never in a
settings file, a table or a log. Block names are 'block-type-slug/block-name', as `prefect block ls` shows them.

A block that cannot be loaded or whose service refuses the message is a recorded outcome with its reason (in the
run's nightly.json and its log), never a failed night: the drift report is already stored.
"""

from __future__ import annotations

from typing import Any

from ttseval.tasks.logs import logger


def send_alert(blocks: list[str], subject: str, body: str) -> list[dict[str, Any]]:
    """Notify every block in `blocks` with one message; one outcome per block: {block, sent, error}."""
    from prefect.blocks.core import Block

    outcomes = []
    for name in blocks:
        try:
            block = Block.load(name)
            if not hasattr(block, "notify"):
                raise TypeError(f"{type(block).__name__} is not a notification block (it has no notify())")
            # Apprise-based blocks otherwise log a failure and return. Prefect types load() as Block | Coroutine
            # (async_dispatch); called from sync code, as here, it returns the block.
            with block.raise_on_failure():  # type: ignore[union-attr]
                block.notify(body, subject)
        except Exception as e:  # noqa: BLE001 - an alert that cannot be sent is reported, the night stands
            # the message names the block and the failure's type, never the block's URL (it may hold a token)
            outcomes.append({"block": name, "sent": False, "error": f"{type(e).__name__}: {_without_urls(str(e))}"})
            logger().warning(f"alert through {name!r} not sent: {outcomes[-1]['error']}")
        else:
            outcomes.append({"block": name, "sent": True, "error": None})
            logger().info(f"alert sent through {name!r}: {subject}")
    return outcomes


def _without_urls(text: str) -> str:
    import re

    return re.sub(r"\w+://\S+", "<url>", text)
