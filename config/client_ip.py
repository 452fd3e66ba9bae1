"""The client's address, trusting exactly NUM_PROXIES reverse proxies.

X-Forwarded-For is a list each proxy appends to; anything left of what our
own proxies added was written by the client and proves nothing. With
NUM_PROXIES=0 (the default: daphne faces the clients) the address is the
socket's peer, REMOTE_ADDR, and the header is ignored; with NUM_PROXIES=1
(nginx in front, as documented) it is the last entry, the one nginx added.
The rule is `agentmemory.throttling.client_address` (REST_FRAMEWORK's
`NUM_PROXIES`, which settings.py sets from NUM_PROXIES): every throttle's
`get_ident` and login lock-outs (django-axes, through `sign_in_source`,
which counts an IPv6 client by its /64) call that one function, so they
always name the same client.
Do not run daphne with --proxy-headers: it takes the first, client-written
entry as the peer address.
"""
from __future__ import annotations

import ipaddress

from agentmemory import throttling

# One rule for the whole project: the app's throttles key anonymous callers on it too.
client_address = throttling.client_address


def sign_in_source(request) -> str:
    """Return what failed sign-ins are counted against: the client address, an IPv6 one as its /64.

    One IPv6 subscriber holds a whole /64 and can take a new address from it
    for every try; counting the block keeps the lock-out on the attacker
    (config/login_protection.py). An address that does not parse is kept as it is.
    """
    address = client_address(request)
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if parsed.version == 4:
        return str(parsed)
    if parsed.ipv4_mapped is not None:  # ::ffff:192.0.2.8 is the IPv4 client 192.0.2.8
        return str(parsed.ipv4_mapped)
    return str(ipaddress.ip_network(f"{parsed}/64", strict=False).network_address)
