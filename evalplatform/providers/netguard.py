"""Provider URLs that cannot point inside: the platform calls the addresses its teams give it,
so an address on the platform's own network (its database, its cache, a cloud's metadata
service, the machines beside it) is refused, on save and again on every connection.

- ``url_problem``: only http and https, a host, no credentials, no query or fragment (the
  platform appends its own paths: a ``?`` would turn them into a query and let a URL aim at
  any path).
- ``host_problem``: the host must resolve, and only to public addresses; loopback, private,
  link-local (cloud metadata: 169.254.169.254), shared, multicast, reserved and unspecified
  addresses are internal. IPv4 inside IPv6 is judged as the IPv4 address.
- ``GuardedBackend``: httpcore's network backend with the same rule at connect time, against
  the address actually connected to (resolved once, then connected by address: a name that
  resolves to a public address when saved and to an internal one later, DNS rebinding, is
  refused).

A host an administrator lists in ``PROVIDER_HOSTS_ALLOWED`` (a local model server, the fake
provider) is exempt, by its name as the URL writes it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore
from django.conf import settings

MOST_ADDRESSES = 4  # of a name's addresses, tried in turn
ALLOWED_HINT = "an administrator may allow the host (PROVIDER_HOSTS_ALLOWED)"


class InternalAddress(httpcore.ConnectError):
    """A connection refused before it was made: the host is on the platform's network."""


def allowed_hosts() -> set[str]:
    return {h.strip().lower().strip("[]") for h in settings.PROVIDER_HOSTS_ALLOWED if h.strip()}


def is_allowed(host: str) -> bool:
    return host.lower().strip("[]") in allowed_hosts()


def is_internal(address: str) -> bool:
    """Whether an IP address is on a network the platform may not call."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
        address.split("%", 1)[0]  # no IPv6 zone
    )
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour
        if inner is None and ip in _NAT64:  # 64:ff9b::a.b.c.d reaches a.b.c.d
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            ip = inner
    return not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def url_problem(url: str) -> str | None:
    """What is wrong with a base URL's form, if anything."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is no number raises ValueError here)
    except ValueError:
        return "Not a URL."
    if parts.scheme not in ("http", "https"):
        return "Only http:// and https:// addresses."
    if not parts.hostname:
        return "The URL names no host."
    if parts.username is not None or parts.password is not None:
        return "No credentials in the URL: give the API key in its own field."
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        return "No query or fragment: the platform adds its own paths to the base URL."
    return None


def host_problem(url: str) -> str | None:
    """Why the URL's host may not be called, if it may not: it resolves to an internal
    address. Resolves the name (a blocking DNS query); a name that does not resolve (yet, or
    from here) passes: every connection checks it again."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if is_allowed(host):
        return None
    try:
        found = socket.getaddrinfo(host, parts.port or 443, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    return _internal_problem(host, [str(info[4][0]) for info in found])


def _internal_problem(host: str, addresses: Iterable[str]) -> str | None:
    internal = [a for a in addresses if is_internal(a)]
    if internal:
        return (
            f"{host} is on an internal network ({internal[0]}): the platform calls only "
            f"public addresses; {ALLOWED_HINT}."
        )
    return None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to public addresses (or allowed hosts): resolves the name, refuses it
    when any address it has is internal, then connects to the address it checked."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self.inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if not is_allowed(host):
            try:
                with anyio.fail_after(timeout):
                    found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError, TimeoutError) as exc:
                raise httpcore.ConnectError(f"{host} does not resolve.") from exc
            addresses = [str(info[4][0]) for info in found]
            if not addresses:
                raise httpcore.ConnectError(f"{host} does not resolve.")
            if problem := _internal_problem(host, addresses):
                raise InternalAddress(problem)
        else:
            addresses = [host]
        # By the addresses checked, in the resolver's order (no second lookup to rebind).
        failed: httpcore.ConnectError | None = None
        for address in list(dict.fromkeys(addresses))[:MOST_ADDRESSES]:
            try:
                return await self.inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failed = httpcore.ConnectError(str(exc))
        assert failed is not None
        raise failed

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("Provider calls use TCP only.")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def guard(client: Any) -> Any:
    """``client`` (an ``httpx.AsyncClient``) with every connection of its transports (the
    default one, and those of proxies from the environment) made through
    ``GuardedBackend``. A test's own transport (no connection pool) is left as it is."""
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if pool is not None and not isinstance(pool._network_backend, GuardedBackend):
            pool._network_backend = GuardedBackend(pool._network_backend)
    return client
