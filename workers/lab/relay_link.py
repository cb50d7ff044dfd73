"""The data path of the relay: two delaying, counting pipes per relayed connection, paced by
the link they cross.

A bandwidth cap belongs to a site's link, not to a connection: every connection of every
relay on one link (a site's root, http, token and gsi ports) shares its rate, one direction
each, as the connections of a real WAN link share it. `Link` keeps one `LinkDirection` per
direction; a pipe with a chunk due waits in its direction's queue, which releases one slice
at a time, round robin over the waiting pipes, at the link's rate.

Kept apart from `workers.lab.relay` (specs, modes, host, control socket, CLI) so the hot
path reads in one piece. Everything here runs on the relay's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import math
import socket
import struct
import termios
from collections import deque
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from workers.lab.relay import Relay

log = logging.getLogger("workers.lab.relay")

# How long a cut waits for bytes already handed to a client to leave before resetting.
_CUT_FLUSH_S = 2.0
_CUT_POLL_S = 0.002
# A paced direction releases in slices of this much link time, so a 256 KiB read does not
# leave as one burst on a slow link.
_SLICE_S = 0.002
_MIN_SLICE_BYTES = 8192
# A busy link whose timer fires late catches up with the slices it owes, at most this much
# link time at once: on a loaded machine timers fire a millisecond or more late, and
# restarting the schedule from each late firing lost a fifth of the rate (6.5 of 8 MB/s).
_CATCH_UP_S = 0.02
_LINGER_RESET = struct.pack("ii", 1, 0)


def reset(transport: asyncio.Transport) -> None:
    """Close with an RST rather than a FIN, the way a crashed or firewalled peer looks."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()


def _unsent_bytes(transport: asyncio.BaseTransport) -> int:
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except OSError:
        return 0
    return int(struct.unpack("i", raw)[0])


def _reset_when_flushed(
    loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, deadline: float
) -> None:
    # An RST discards what the kernel has not sent yet, so wait until the client has the
    # bytes that were counted as delivered; give up after a deadline if it stopped reading.
    if transport.is_closing():
        return
    pending = transport.get_write_buffer_size() or _unsent_bytes(transport)
    if pending and loop.time() < deadline:
        loop.call_later(_CUT_POLL_S, _reset_when_flushed, loop, transport, deadline)
        return
    reset(transport)


class Link:
    """A site's link: its rate in MB/s (1e6 bytes/s), one pacer per direction."""

    def __init__(self, name: str, bandwidth_mbps: float) -> None:
        if not (math.isfinite(bandwidth_mbps) and bandwidth_mbps > 0):
            raise ValueError(f"link {name!r}: bandwidth_mbps must be > 0, got {bandwidth_mbps}")
        self.name = name
        self.bandwidth_mbps = bandwidth_mbps
        self.up = LinkDirection(bandwidth_mbps * 1e6)
        self.down = LinkDirection(bandwidth_mbps * 1e6)


class LinkDirection:
    """One direction of a link, shared by every pipe that crosses it that way.

    A slice leaves when the link has sent the slices before it (`free_at`), which then
    moves on by the slice's size / rate: the link is never faster than its rate, whichever
    connections fill it. A slice reaching an idle link leaves at once, so a short answer
    pays no timer and a long one ends its size / rate after its first byte (a 1 MiB answer
    at 8 MB/s: 130 ms after the RTT). While busy, a late timer is caught up (bounded by
    _CATCH_UP_S), so the long-run rate is the link's even when timers fire late.
    """

    def __init__(self, rate_bps: float) -> None:
        self.rate = rate_bps
        self.slice = max(_MIN_SLICE_BYTES, int(rate_bps * _SLICE_S))
        self._free_at = -math.inf
        self._waiting: deque[Pipe] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._running = False

    def wait(self, pipe: Pipe) -> None:
        """`pipe` has a chunk due: release it when the link's turn comes to it."""
        if pipe.on_link:
            return
        pipe.on_link = True
        idle = not self._waiting and self._timer is None and not self._running
        self._waiting.append(pipe)
        if idle:
            self._free_at = max(self._free_at, pipe.loop.time())
            self._run(pipe.loop)

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._running = True
        try:
            left = self._release_due(loop)
        finally:
            self._running = False
        # Kicked only now: a pipe whose next chunk fell due since `now` would otherwise
        # queue again at once and be looked at with the same stale `now`, forever.
        for pipe in left:
            pipe.kick()  # its own timer for the next chunk's delay, its end, or the link again

    def _release_due(self, loop: asyncio.AbstractEventLoop) -> list[Pipe]:
        """Release every slice the link owes by now; the pipes that left the queue."""
        waiting = self._waiting
        left: list[Pipe] = []
        now = loop.time()
        while waiting:
            pipe = waiting[0]
            size = pipe.due_size(now)
            if not size:
                waiting.popleft()
                pipe.on_link = False
                left.append(pipe)
                continue
            start = max(self._free_at, now - _CATCH_UP_S)
            if start > now:
                self._timer = loop.call_at(start, self._run, loop)
                return left
            self._free_at = start + size / self.rate
            pipe.release_head()
            waiting.rotate(-1)  # round robin: the next connection's slice goes next
        return left


class Pipe:
    """One direction of a relayed connection: holds chunks for the delay and counts them.

    Queue entries are (release time, chunk); a None chunk is the end of the stream. On a
    capped link a due chunk waits for the link's turn (`LinkDirection`).
    """

    def __init__(self, conn: Connection, *, down: bool) -> None:
        spec = conn.relay.spec
        link = conn.relay.link
        self._conn = conn
        self._relay = conn.relay
        self.loop = conn.loop
        self._down = down
        self._delay = spec.rtt_ms / 2000.0
        self._link = None if link is None else (link.down if down else link.up)
        self._slice = 0 if self._link is None else self._link.slice
        self._immediate = not self._delay and self._link is None
        self._window = spec.window_bytes
        self._queue: deque[tuple[float, bytes | None]] = deque()
        self._queued = 0
        self._timer: asyncio.TimerHandle | None = None
        self._source_paused = False
        self.on_link = False
        self.source: asyncio.Transport | None = None
        self.sink: asyncio.Transport | None = None
        self.sink_paused = False
        self.ended = False
        self.end_closes = False
        self.end_delivered = False
        self.dead = False

    def push(self, data: bytes) -> None:
        if self.dead:
            return
        queue = self._queue
        if self._immediate and not queue and self._can_release():
            self._deliver(data)
            return
        when = self.loop.time() + self._delay if self._delay else 0.0
        if self._slice and len(data) > self._slice:
            step = self._slice
            queue.extend((when, data[i : i + step]) for i in range(0, len(data), step))
        else:
            queue.append((when, data))
        self._queued += len(data)
        if self._queued > self._window and not self._source_paused and self.source is not None:
            self._source_paused = True
            self.source.pause_reading()
        if self._timer is None:
            self._release()

    def push_end(self, *, close: bool) -> None:
        """Queue the end of the stream: a half-close (write_eof) or, if close, a full close."""
        if self.dead:
            return
        if self.ended:
            self.end_closes = self.end_closes or close
            return
        self.ended = True
        self.end_closes = close
        when = self.loop.time() + self._delay if self._delay else 0.0
        self._queue.append((when, None))
        if self._timer is None:
            self._release()

    def kick(self) -> None:
        """Release what is due after a change of the sink, its flow control or the mode."""
        if self._timer is None and not self.dead and not self.on_link:
            self._release()

    def sink_resumed(self) -> None:
        self.sink_paused = False
        self.kick()

    def drop(self) -> None:
        """Forget everything queued; the connection is over."""
        self.dead = True
        self._queue.clear()
        self._queued = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _can_release(self) -> bool:
        if self.sink is None or self.sink_paused:
            return False
        return not self._relay.hang or self._conn.spared

    def due_size(self, now: float) -> int:
        """The size of the chunk this pipe could hand to its link now (0: none)."""
        if self.dead or self.sink_paused or not self._can_release() or not self._queue:
            return 0
        when, data = self._queue[0]
        if data is None or when > now:
            return 0
        return len(data)

    def release_head(self) -> None:
        """Deliver the chunk at the head of the queue: its link's turn has come."""
        _, data = self._queue.popleft()
        assert data is not None
        self._queued -= len(data)
        self._deliver(data)
        self._resume_source()

    def _release(self) -> None:
        self._timer = None
        if not self._can_release():
            return
        queue = self._queue
        now = self.loop.time() if not self._immediate else 0.0
        while queue and not self.sink_paused:
            when, data = queue[0]
            if when > now:
                self._timer = self.loop.call_at(when, self._release)
                break
            if data is None:
                self._release_end()
                return
            if self._link is not None:
                self._link.wait(self)
                return
            queue.popleft()
            self._queued -= len(data)
            self._deliver(data)
            if self.dead:
                return
        self._resume_source()

    def _resume_source(self) -> None:
        if self._source_paused and self._queued <= self._window and self.source is not None:
            self._source_paused = False
            self.source.resume_reading()

    def _deliver(self, data: bytes) -> None:
        sink = cast(asyncio.Transport, self.sink)
        if sink.is_closing():
            return
        relay = self._relay
        if not self._down:
            relay.bytes_up += len(data)
            sink.write(data)
            return
        budget = relay.cut_budget
        if budget is not None and len(data) >= budget:
            relay.bytes_down += budget
            self._conn.bytes_down += budget
            sink.write(data[:budget])
            relay.fire_cut()
            return
        if budget is not None:
            relay.cut_budget = budget - len(data)
        relay.bytes_down += len(data)
        self._conn.bytes_down += len(data)
        sink.write(data)

    def _release_end(self) -> None:
        sink = cast(asyncio.Transport, self.sink)
        if sink.get_write_buffer_size():
            # write_eof() with bytes still buffered leaves the shutdown to asyncio's own write
            # callback, where a reset by the peer meanwhile escapes as an unhandled error. So
            # wait until the buffer is empty (resume_writing() comes at 0) ...
            sink.set_write_buffer_limits(high=0)
            return
        self._queue.popleft()
        # ... and end from a callback of our own, never from inside the transport's.
        self.loop.call_soon(self._deliver_end)

    def _deliver_end(self) -> None:
        if self.dead:
            return
        self.end_delivered = True
        sink = cast(asyncio.Transport, self.sink)
        other = self._conn.down if self is self._conn.up else self._conn.up
        if self.end_closes or other.end_delivered or not sink.can_write_eof():
            self._conn.finish()
            return
        try:
            sink.write_eof()
        except OSError:  # the peer is gone already
            self._conn.finish()


class Connection:
    """A client connection and its connection to the target, joined by two pipes."""

    def __init__(self, relay: Relay, client: asyncio.Transport) -> None:
        self.relay = relay
        self.loop = asyncio.get_running_loop()
        self.client = client
        self.server: asyncio.Transport | None = None
        self.finished = False
        self.bytes_down = 0  # delivered to the client
        self.spared = False  # goes on forwarding while the relay hangs
        self.up = Pipe(self, down=False)
        self.down = Pipe(self, down=True)
        self.up.source = client
        self.down.sink = client
        relay.connections.add(self)
        self.connect_task = self.loop.create_task(self._connect())

    async def _connect(self) -> None:
        spec = self.relay.spec
        try:
            await self.loop.create_connection(
                lambda: ServerSide(self), spec.target_host, spec.target_port
            )
        except OSError as exc:
            log.warning(
                "relay %s: cannot connect to %s:%d: %s",
                spec.name,
                spec.target_host,
                spec.target_port,
                exc,
            )
            self.abort()

    def server_connected(self, server: asyncio.Transport) -> None:
        if self.finished:
            server.abort()
            return
        self.server = server
        self.up.sink = server
        self.down.source = server
        self.up.kick()

    def side_lost(self, *, client: bool) -> None:
        if client:
            self.relay.connections.discard(self)
        if self.finished:
            return
        from_lost, into_lost = (self.up, self.down) if client else (self.down, self.up)
        into_lost.drop()
        if from_lost.end_delivered:
            self.finish()
        else:
            from_lost.push_end(close=True)

    def finish(self) -> None:
        """Close both sides gracefully, letting buffered bytes go out first."""
        if self._end():
            self.client.close()
            if self.server is not None:
                self.server.close()

    def abort(self) -> None:
        """Reset both sides now, also when they are already closing."""
        self._end()
        reset(self.client)
        if self.server is not None:
            self.server.abort()

    def cut(self) -> None:
        if self._end():
            if self.server is not None:
                reset(self.server)
            self.client.pause_reading()
            _reset_when_flushed(self.loop, self.client, self.loop.time() + _CUT_FLUSH_S)

    def _end(self) -> bool:
        if self.finished:
            return False
        self.finished = True
        self.up.drop()
        self.down.drop()
        self.connect_task.cancel()
        return True


class ClientSide(asyncio.Protocol):
    def __init__(self, relay: Relay) -> None:
        self._relay = relay

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._relay.connection_opened()
        self._conn = Connection(self._relay, cast(asyncio.Transport, transport))

    def data_received(self, data: bytes) -> None:
        self._conn.up.push(data)

    def eof_received(self) -> bool:
        self._conn.up.push_end(close=False)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._relay.connection_closed()
        self._conn.side_lost(client=True)

    def pause_writing(self) -> None:
        self._conn.down.sink_paused = True

    def resume_writing(self) -> None:
        self._conn.down.sink_resumed()


class ServerSide(asyncio.Protocol):
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._conn.server_connected(cast(asyncio.Transport, transport))

    def data_received(self, data: bytes) -> None:
        self._conn.down.push(data)

    def eof_received(self) -> bool:
        self._conn.down.push_end(close=False)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn.side_lost(client=False)

    def pause_writing(self) -> None:
        self._conn.up.sink_paused = True

    def resume_writing(self) -> None:
        self._conn.up.sink_resumed()


class BlackHole(asyncio.Protocol):
    """A connection accepted in hang mode: never connected onwards, never answered.

    It stays silent while the relay hangs. Once the relay no longer hangs, it is closed as
    soon as the client has closed its side (a half-close cannot be told from a close, and
    keeping every such socket would leak them).
    """

    def __init__(self, relay: Relay) -> None:
        self._relay = relay
        self.client_ended = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._relay.connection_opened()
        self.transport = cast(asyncio.Transport, transport)
        self._relay.black_holes.add(self)

    def data_received(self, data: bytes) -> None:
        self._relay.bytes_up += len(data)

    def eof_received(self) -> bool:
        self.client_ended = True
        return self._relay.hang  # False closes the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._relay.connection_closed()
        self._relay.black_holes.discard(self)


class Refused(asyncio.Protocol):
    """A connection accepted after a cut: reset at once."""

    def __init__(self, relay: Relay) -> None:
        self._relay = relay

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._relay.connection_opened()
        reset(cast(asyncio.Transport, transport))

    def connection_lost(self, exc: Exception | None) -> None:
        self._relay.connection_closed()
