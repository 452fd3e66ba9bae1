"""The client's address, trusting exactly NUM_PROXIES reverse proxies.

X-Forwarded-For is a list each proxy appends to; anything left of what our
own proxies added was written by the client and proves nothing. With
NUM_PROXIES=0 (the default: daphne faces the clients) the address is the
socket's peer, REMOTE_ADDR, and the header is ignored; with NUM_PROXIES=1
(nginx in front, as documented) it is the last entry, the one nginx added.
This is DRF's rule (`NUM_PROXIES` in REST_FRAMEWORK, used by every
throttle); login lock-outs (django-axes) use this function, so both agree.
Do not run daphne with --proxy-headers: it takes the first, client-written
entry as the peer address.
"""
from __future__ import annotations

from django.conf import settings


def client_address(request) -> str:
    meta = request.META
    remote = meta.get("REMOTE_ADDR", "") or ""
    proxies = settings.NUM_PROXIES
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    if not proxies or not forwarded:
        return remote
    addresses = [address.strip() for address in forwarded.split(",") if address.strip()]
    if not addresses:
        return remote
    return addresses[-min(proxies, len(addresses))]
