"""Running the app under uvicorn with several worker processes without a 40 ms stall per request.

``uvicorn.run(..., workers=N)`` binds its listening socket as ``socket.socket(family)``, whose
``proto`` is 0. Multiprocessing hands that socket to each worker with the same ``proto``, the
connections a worker accepts inherit it, and asyncio sets ``TCP_NODELAY`` only on sockets whose
``proto`` is ``IPPROTO_TCP`` (``asyncio.base_events._set_nodelay``). Without it, Nagle's algorithm
holds the body of an answer (uvicorn writes headers and body separately) until the client
acknowledges the headers, which a client delays by up to 40 ms: every request on a keep-alive
connection waited about 44 ms with 2 workers (1 ms with the socket below; ``bench.api``).
One worker binds through ``loop.create_server``, which gets the protocol right.
"""

from __future__ import annotations

import socket


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket whose ``proto`` is ``IPPROTO_TCP``, as uvicorn's workers should get it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run(app: str, *, host: str, port: int, workers: int, **options) -> None:
    """``uvicorn.run(app, factory=True, ...)``, with N > 1 workers on ``listening_socket``."""
    import uvicorn

    config = uvicorn.Config(app, factory=True, host=host, port=port, workers=workers, **options)
    if workers <= 1:
        uvicorn.Server(config).run()
        return
    from uvicorn.supervisors import Multiprocess

    Multiprocess(config, sockets=[listening_socket(host, port)]).run()
