"""The step functions of the demo's two API pipelines (``[run] allowed_modules`` lists
this module), over the records the source connector writes for the demo's orders map:
key the order id, value the order (``id``, ``customer``, ``amount``, ``status``, ``at``:
event time in epoch milliseconds) or None when the order was removed.

* ``paid-orders``: ``filter(paid_or_removed)`` → ``map(paid_entry)``: the orders paid or
  shipped, an order removed from the grid removed here too.
* ``order-windows``: ``filter(live)`` → ``map(order_row)`` → a 10-second window per status
  on ``at`` (the orders' changes in it and the sum of their amounts; an order changed
  twice counts twice) → ``map(window_entry)``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = ["PAID", "live", "order_row", "paid_entry", "paid_or_removed", "window_entry",
           "window_key"]

PAID = ("PAID", "SHIPPED")
ORDER_ROW = "status string, amount long, at long"


def paid_or_removed(record: tuple[Any, Any]) -> bool:
    _, order = record
    return order is None or order["status"] in PAID


def paid_entry(record: tuple[Any, Any]) -> tuple[Any, Any]:
    key, order = record
    if order is None:
        return key, None
    return key, {"customer": order["customer"], "amount": order["amount"],
                 "status": order["status"]}


def live(record: tuple[Any, Any]) -> bool:
    return record[1] is not None


def order_row(record: tuple[Any, Any]) -> dict[str, Any]:
    order = record[1]
    return {"status": order["status"], "amount": order["amount"], "at": order["at"]}


def _millis(moment: dt.datetime) -> int:
    if moment.tzinfo is None:  # the session's time zone is UTC
        moment = moment.replace(tzinfo=dt.UTC)
    return round(moment.timestamp() * 1000)


def window_key(status: str, start_ms: int) -> str:
    return f"{status}@{start_ms}"


def window_entry(window: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    start, end = _millis(window["window_start"]), _millis(window["window_end"])
    return window_key(window["key"], start), {
        "status": window["key"], "start": start, "end": end, "changes": window["changes"],
        "amount": window["amount"]}
