"""Background loops' one rule about cancellation."""

from __future__ import annotations

import asyncio


def raise_if_cancelled() -> None:
    """End a background loop whose task was asked to stop, even when a library turned the
    cancellation into an ordinary return or exception on the way (``asyncio.wait_for`` on
    Python 3.11 drops one that arrives as its inner call completes): the request stays
    counted on the task, so the loop checks it before going round again."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
