"""What the carbon and cost monitors share: a window's energy split over the UTC hours it spans.

Zeus prices each hour of a window at that hour's carbon intensity or electricity rate. Energy is
split over the hours in proportion to time (constant power within the window).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

__all__ = ["hour_shares"]


def hour_shares(start_s: float, end_s: float) -> list[tuple[datetime, float]]:
    """``(hour start, UTC; fraction of the window in that hour)`` for the window ``[start_s, end_s]``.

    Example:
        >>> from zeus_core.compat.monitor._hourly import hour_shares
        >>> [(h.hour, round(f, 2)) for h, f in hour_shares(3600.0 * 5 + 2700, 3600.0 * 6 + 900)]
        [(5, 0.5), (6, 0.5)]
    """
    start = datetime.fromtimestamp(start_s, timezone.utc)
    span = max(end_s - start_s, 0.0)
    if span == 0.0:
        return [(start.replace(minute=0, second=0, microsecond=0), 1.0)]
    out = []
    hour = start.replace(minute=0, second=0, microsecond=0)
    while hour.timestamp() < end_s:
        lo, hi = max(hour.timestamp(), start_s), min((hour + timedelta(hours=1)).timestamp(), end_s)
        if hi > lo:
            out.append((hour, (hi - lo) / span))
        hour += timedelta(hours=1)
    return out
