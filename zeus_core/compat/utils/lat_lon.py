"""Zeus's ``zeus.utils.lat_lon``: :func:`get_ip_lat_long`, where this machine's IP address is.

Example:
    >>> from zeus_core.compat.utils.lat_lon import get_ip_lat_long
    >>> get_ip_lat_long()  # doctest: +SKIP
    (47.3769, 8.5417)
"""

from __future__ import annotations

import json
import logging
import urllib.request

__all__ = ["get_ip_lat_long"]

logger = logging.getLogger(__name__)

_URL = "http://ipinfo.io/json"


def get_ip_lat_long(timeout_s: float = 10.0) -> tuple[float, float]:
    """Latitude and longitude of this machine's public IP address (ipinfo.io).

    Raises:
        OSError: ipinfo.io could not be reached.
        ValueError: Its answer has no location.

    Example:
        >>> from zeus_core.compat.utils.lat_lon import get_ip_lat_long
        >>> lat, lon = get_ip_lat_long()  # doctest: +SKIP
    """
    with urllib.request.urlopen(_URL, timeout=timeout_s) as response:  # noqa: S310 - a fixed http URL
        body = json.loads(response.read().decode("utf-8"))
    try:
        lat, lon = map(float, str(body["loc"]).split(","))
    except (KeyError, ValueError) as e:
        raise ValueError(f"ipinfo.io gave no location: {str(body)[:200]}") from e
    logger.info("Latitude and longitude of this IP address: %s, %s", lat, lon)
    return lat, lon
