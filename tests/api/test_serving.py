"""``memoryctl serve --workers N`` hands its workers a listening socket on which the connections
they accept get TCP_NODELAY, as asyncio gives them with one worker: uvicorn's own socket for N
workers lost it, and every keep-alive request then waited for the client's delayed ACK (~40 ms)."""

from __future__ import annotations

import asyncio
import multiprocessing.reduction
import pickle
import socket

import uvicorn

from api.serving import listening_socket


def _nodelay_of_accepted(listener: socket.socket) -> int:
    """TCP_NODELAY of a connection accepted the way a uvicorn worker accepts it: the listening
    socket rebuilt from what multiprocessing sends the worker, served by asyncio."""
    sent = multiprocessing.reduction.ForkingPickler.dumps(listener)
    rebuilt = pickle.loads(sent)
    seen: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport):
            seen.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def main():
        rebuilt.listen()
        server = await asyncio.get_running_loop().create_server(Probe, sock=rebuilt)
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    try:
        asyncio.run(main())
    finally:
        listener.close()
    return seen[0]


def test_connections_on_the_workers_socket_send_without_waiting_for_an_ack():
    assert _nodelay_of_accepted(listening_socket("127.0.0.1", 0)) != 0


def test_uvicorns_own_socket_for_several_workers_is_why():
    config = uvicorn.Config("api.app:create_app", factory=True, host="127.0.0.1", port=0, workers=2)
    assert _nodelay_of_accepted(config.bind_socket()) == 0
