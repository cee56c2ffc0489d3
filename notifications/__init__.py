"""The notification queue and the producers that feed it."""

from notifications.queue import (
    Listed,
    Pending,
    depth,
    drain,
    enqueue,
    enqueue_async,
    listing,
    new_notification,
    pending,
)

__all__ = ["Listed", "Pending", "depth", "drain", "enqueue", "enqueue_async", "listing", "new_notification", "pending"]
