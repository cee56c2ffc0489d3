"""The web page's socket, bound before agentd says where it serves.

uvicorn binds only once its server starts, after the model has loaded and the address was printed;
a port someone else holds then ended the daemon with a traceback. Bound here first, the failure is a
line of its own before anything is announced, and the address `agentd status` reads from the pid
file is one this process holds.
"""

from __future__ import annotations

import errno
import socket

from runtime.errors import ConfigError, PortUnavailable


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port), not yet listening: uvicorn listens on it when it starts."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as e:
        raise ConfigError(f"host {host!r} is not an address agentd can listen on ({e.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn does: a port left in TIME_WAIT by the last agentd is free to take again at once.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise _refusal(e, host, port) from None
    return sock


def _refusal(e: OSError, host: str, port: int) -> Exception:
    if e.errno == errno.EADDRINUSE:
        return PortUnavailable(
            f"port {port} on {host} is already in use by another program; stop it, or choose another "
            "port (--port, or port in agentd.toml)"
        )
    if e.errno == errno.EACCES:
        return PortUnavailable(f"not allowed to listen on port {port} (ports below 1024 need privileges); "
                               "choose another port")
    if e.errno == errno.EADDRNOTAVAIL:
        return ConfigError(f"host {host} is not an address of this machine; set host to one of its addresses")
    return PortUnavailable(f"cannot listen on {host}:{port}: {e.strerror}")
