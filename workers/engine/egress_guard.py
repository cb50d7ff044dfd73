"""The egress guard: every connection a run's child processes make passes the egress policy
at the moment it is made, whichever library makes it.

XrdCl, xrdcp and globus-url-copy resolve names and follow redirections on their own, out of
our sight: a data server may send them anywhere, and a name may resolve differently when
they look it up again. The one place all of their connections pass is the connect() system
call. So the preflight and every client install, before anything else, a seccomp filter
that hands their connect() calls, and those of every thread and program they start
(filters are inherited across fork and exec), to a thread of the run's process. That thread
reads the address the call is about to connect to, asks the policy, and lets the call go
on or fails it with EACCES, recording why. A refused call never reaches the network.

In a run that carries a credential, the same thread holds the connections to the
credential's scope too (workers/engine/credential_scope.py): XrdCl presents the token or
proxy to every server a redirection names, so a connection to an address that is not the
endpoint's own server nor a listed host's is refused before anything is sent there.

Needs Linux's seccomp user notification (5.7 or later, x86-64 or arm64); where it is
missing, a run with a policy fails with class egress rather than run unguarded. The thread
reads the caller's memory through /proc, which the run's process may do: the clients are
its descendants (docs/engine.md, "Egress policy").
"""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import os
import platform
import select
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from workers.engine.credential_scope import AddressScope
from workers.engine.egress import EgressPolicy, IPAddress
from workers.engine.errors import ErrorClass, ProbeError

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.process_vm_readv.restype = ctypes.c_ssize_t

_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
# Every thread of the process (TSYNC; ESRCH makes it combinable with a listener), a
# listener descriptor the notifications arrive on, and no speculative-store-bypass
# mitigation forced on the process (SPEC_ALLOW: it would slow the measurement down, and
# guards against code the process runs, which is ours).
_FILTER_FLAGS = 1 | 4 | 8 | 16
_RET_ALLOW = 0x7FFF0000
_RET_USER_NOTIF = 0x7FC00000
_RET_ERRNO = 0x00050000
_USER_NOTIF_FLAG_CONTINUE = 1
# ioctls on the listener: _IOWR('!', 0, struct seccomp_notif), _IOWR('!', 1, ..._resp),
# _IOW('!', 2, __u64).
_IOCTL_RECV = 0xC0502100
_IOCTL_SEND = 0xC0182101
_IOCTL_ID_VALID = 0x40082102

# A sockaddr_in6 is 28 bytes; nothing longer is read from the caller.
_SOCKADDR_MAX = 28
_DNS_PORT = 53
_ACTIONS_AVAILABLE = Path("/proc/sys/kernel/seccomp/actions_avail")
_RESOLV_CONF = Path("/etc/resolv.conf")
# A refusal not worth recording (see _judge).
_QUIET = "quiet"


# How the guard names the processes it watches, in its refusals.
PREFLIGHT = "preflight"


def client_label(client: int) -> str:
    return f"client {client}"


class GuardUnavailable(ProbeError):
    """This host cannot guard connections: a run with an egress policy, or a root(s)://
    or GridFTP run carrying a credential, does not start."""

    def __init__(self, why: str) -> None:
        super().__init__(
            ErrorClass.EGRESS,
            f"connections cannot be guarded on this host ({why}): fedprobe needs Linux's "
            "seccomp user notification (5.7 or later, x86-64 or arm64) to check every "
            "connection the protocol libraries make, for the egress policy and for where "
            "the run's credential may go",
        )


@dataclass(frozen=True)
class _Arch:
    audit: int
    connect: int


# The audit architecture seccomp reports, and the number of connect() there.
_ARCHES = {
    "x86_64": _Arch(audit=0xC000003E, connect=42),
    "aarch64": _Arch(audit=0xC00000B7, connect=203),
}
_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_SYS_PIDFD_GETFD = 438  # the same number on every architecture
_X32_SYSCALL_BIT = 0x40000000


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter)))


class _Notification(ctypes.Structure):
    """struct seccomp_notif: which call (its arguments), from which thread."""

    _fields_ = (
        ("id", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("nr", ctypes.c_int32),
        ("arch", ctypes.c_uint32),
        ("instruction_pointer", ctypes.c_uint64),
        ("args", ctypes.c_uint64 * 6),
    )


class _Response(ctypes.Structure):
    """struct seccomp_notif_resp: go on with the call, or fail it with an errno."""

    _fields_ = (
        ("id", ctypes.c_uint64),
        ("val", ctypes.c_int64),
        ("error", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    )


# Classic BPF, as seccomp runs it.
_LOAD_WORD, _JUMP_EQUAL, _JUMP_AT_LEAST, _RETURN = 0x20, 0x15, 0x35, 0x06
_NR_OFFSET, _ARCH_OFFSET = 0, 4


def _program(arch: _Arch) -> list[tuple[int, int, int, int]]:
    """connect() goes to the guard; calls of another ABI (i386, x32), which could connect
    under other numbers, fail; everything else is allowed."""
    return [
        (_LOAD_WORD, 0, 0, _ARCH_OFFSET),
        (_JUMP_EQUAL, 1, 0, arch.audit),
        (_RETURN, 0, 0, _RET_ERRNO | errno.EPERM),
        (_LOAD_WORD, 0, 0, _NR_OFFSET),
        (_JUMP_AT_LEAST, 0, 1, _X32_SYSCALL_BIT),
        (_RETURN, 0, 0, _RET_ERRNO | errno.EPERM),
        (_JUMP_EQUAL, 0, 1, arch.connect),
        (_RETURN, 0, 0, _RET_USER_NOTIF),
        (_RETURN, 0, 0, _RET_ALLOW),
    ]


def unavailable_reason() -> str | None:
    """Why connections cannot be guarded here, or None when they can. Looks, installs nothing."""
    machine = platform.machine()
    if machine not in _ARCHES:
        return f"unsupported architecture {machine}"
    try:
        actions = _ACTIONS_AVAILABLE.read_text().split()
    except OSError:
        return "the kernel has no seccomp filters"
    if "user_notif" not in actions:
        return "the kernel has no seccomp user notification"
    return None


def install_filter() -> int:
    """Hand this process's connect() calls to a guard; returns the listener descriptor the
    guard must answer on. Irreversible: call it only in a process of the run's own."""
    why = unavailable_reason()
    if why is not None:
        raise GuardUnavailable(why)
    machine = platform.machine()
    instructions = [_SockFilter(*step) for step in _program(_ARCHES[machine])]
    array = (_SockFilter * len(instructions))(*instructions)
    program = _SockFprog(len(instructions), array)
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise GuardUnavailable(f"prctl: {os.strerror(ctypes.get_errno())}")
    listener = _libc.syscall(
        _SYS_SECCOMP[machine], _SECCOMP_SET_MODE_FILTER, _FILTER_FLAGS, ctypes.byref(program)
    )
    if listener < 0:
        raise GuardUnavailable(f"seccomp: {os.strerror(ctypes.get_errno())}")
    return int(listener)


@dataclass(frozen=True)
class GuardLink:
    """What a child process of the run needs to put itself under the guard (picklable)."""

    registration: socket.socket

    def attach(self, label: str) -> None:
        """Install the filter and hand its listener to the guard, before any connection.
        `label` names this process in the guard's refusals ("preflight", "client 3")."""
        listener = install_filter()
        try:
            socket.send_fds(self.registration, [label.encode()], [listener])
        except OSError as exc:
            raise GuardUnavailable(f"the guard is gone: {exc}") from None
        finally:
            # The guard holds the only copy now: should it die, connect() fails (ENOSYS)
            # instead of waiting for an answer that never comes.
            os.close(listener)
            self.registration.close()


class EgressGuard:
    """The run's side: a thread answering every guarded connect() by the egress policy and
    the credential's scope (either may be None: nothing to hold the connections to)."""

    def __init__(self, policy: EgressPolicy | None, scope: AddressScope | None = None) -> None:
        self.policy = policy
        self.scope = scope
        self.nameservers = _nameservers()
        self._own_end, peer_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.link = GuardLink(peer_end)
        self._wake_read, self._wake_write = os.pipe()
        self._labels: dict[int, str] = {}
        self._refusals: dict[str, list[str]] = {}
        self._closed = False
        # The policy's answer for each address met: a run meets few, and meets them again.
        self._verdicts: dict[IPAddress, str | None] = {}
        self._thread = threading.Thread(target=self._serve, name="fedprobe-egress-guard")
        self._thread.daemon = True

    @classmethod
    @contextmanager
    def running(
        cls, policy: EgressPolicy | None, scope: AddressScope | None = None
    ) -> Iterator[EgressGuard | None]:
        """A guard for the length of a run (None without a policy or a credential's scope:
        nothing to enforce)."""
        if policy is None and scope is None:
            yield None
            return
        why = unavailable_reason()
        if why is not None:
            raise GuardUnavailable(why)
        guard = cls(policy, scope)
        guard._thread.start()
        try:
            yield guard
        finally:
            guard.close()

    def close(self) -> None:
        """Stop answering: from now on a guarded connect() fails at once (ENOSYS)."""
        if self._closed:
            return
        self._closed = True
        os.write(self._wake_write, b"x")
        self._thread.join(timeout=10)
        for fd in (*self._labels, self._wake_read, self._wake_write):
            with suppress(OSError):
                os.close(fd)
        self._own_end.close()
        self.link.registration.close()

    def refusal(self, label: str) -> str | None:
        """The first connection refused to the process `label` (and what it started)."""
        refused = self._refusals.get(label)
        return refused[0] if refused else None

    def explain(self, exc: ProbeError, label: str) -> ProbeError:
        """A failure that followed a refused connection is the refusal (class egress): XrdCl
        only says that a socket failed, or that no server could be reached."""
        refused = self.refusal(label)
        if refused is None or exc.error_class == ErrorClass.EGRESS:
            return exc
        return ProbeError(ErrorClass.EGRESS, refused)

    # -- the guard's thread ----------------------------------------------------------------

    def _serve(self) -> None:
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        poller.register(self._own_end, select.POLLIN)
        while True:
            for fd, events in poller.poll():
                if fd == self._wake_read:
                    return
                if fd == self._own_end.fileno():
                    self._register(poller)
                elif events & select.POLLIN:
                    self._answer(fd)
                elif events & (select.POLLHUP | select.POLLERR):
                    # Every process under this filter has ended.
                    poller.unregister(fd)
                    os.close(fd)
                    del self._labels[fd]

    def _register(self, poller: select.poll) -> None:
        message, fds, _, _ = socket.recv_fds(self._own_end, 256, 4)
        for fd in fds:
            self._labels[fd] = message.decode(errors="replace")
            poller.register(fd, select.POLLIN)

    def _answer(self, listener: int) -> None:
        notification = _Notification()
        if _libc.ioctl(listener, _IOCTL_RECV, ctypes.byref(notification)) != 0:
            return  # the caller was interrupted or has died meanwhile
        refusal = self._judge(listener, notification)
        response = _Response(id=notification.id)
        if refusal is None:
            response.flags = _USER_NOTIF_FLAG_CONTINUE
        else:
            if refusal is not _QUIET:
                self._refusals.setdefault(self._labels[listener], []).append(refusal)
            response.error = -errno.EACCES
        _libc.ioctl(listener, _IOCTL_SEND, ctypes.byref(response))  # ENOENT: caller gone

    def _judge(self, listener: int, notification: _Notification) -> str | None:
        """Why the connect() must fail, or None to let it go on."""
        pointer, length = notification.args[1], notification.args[2]
        try:
            sockaddr = read_memory(notification.pid, pointer, min(length, _SOCKADDR_MAX))
        except OSError as exc:
            return f"a connection that could not be checked ({exc})"
        notification_id = ctypes.c_uint64(notification.id)
        if _libc.ioctl(listener, _IOCTL_ID_VALID, ctypes.byref(notification_id)) != 0:
            return "a connection by a thread that ended while it was checked"
        target = parse_sockaddr(sockaddr)
        if target is None:
            return None  # not an internet address: a local socket, which the policy leaves be
        address, port = target
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # an IPv4 connection through an IPv6 socket
        if port == _DNS_PORT and address in self.nameservers:
            return None
        why = self._policy_refusal(address)
        out_of_scope = self.scope is not None and not self.scope.allows(address, port)
        if why is None and not out_of_scope:
            return None
        if _is_datagram(notification.pid, int(notification.args[0])):
            # The resolver sorting a name's addresses (RFC 6724): no packet leaves, and the
            # refusal only tells it that this address is out of reach. Not worth a record.
            return _QUIET
        if why is None and self.scope is not None:
            return self.scope.refusal(address, port)
        where = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        how = "where the endpoint redirected, or its name resolved again"
        return f"refused by egress policy: a connection to {where} ({how}): {why}"

    def _policy_refusal(self, address: IPAddress) -> str | None:
        """The egress policy's answer for `address` (kept: a run meets few, and again)."""
        if self.policy is None:
            return None
        if address not in self._verdicts:
            self._verdicts[address] = self.policy.refusal(address)
        return self._verdicts[address]


class _IoVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("length", ctypes.c_size_t))


def read_memory(thread: int, address: int, length: int) -> bytes:
    """`length` bytes at `address` in the memory of the thread's process (process_vm_readv:
    one system call, allowed to the process's ancestors). Where a seccomp profile refuses
    that call (Docker's default one does, without CAP_SYS_PTRACE), the same bytes are read
    through /proc/PID/mem, which the same ancestors may read."""
    buffer = ctypes.create_string_buffer(length)
    local = _IoVec(ctypes.cast(buffer, ctypes.c_void_p), length)
    remote = _IoVec(address, length)
    read = _libc.process_vm_readv(thread, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if read >= 0:
        return buffer.raw[:read]
    error = ctypes.get_errno()
    if error in (errno.EPERM, errno.ENOSYS):
        return _read_proc_mem(thread, address, length)
    raise OSError(error, f"reading the caller's memory: {os.strerror(error)}")


# /proc/PID/mem is read at a file offset, which is signed: higher addresses are the kernel's.
_OFFSET_MAX = 2**63 - 1


def _read_proc_mem(thread: int, address: int, length: int) -> bytes:
    if address + length > _OFFSET_MAX:
        raise OSError(errno.EFAULT, "reading the caller's memory: a kernel address")
    try:
        fd = os.open(f"/proc/{thread}/mem", os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.pread(fd, length, address)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OSError(exc.errno, f"reading the caller's memory: {exc.strerror}") from None


def _is_datagram(thread: int, fd: int) -> bool:
    """Whether descriptor `fd` of the thread's process is a datagram socket (False when that
    cannot be told: the call is then judged as a connection)."""
    try:
        status = Path(f"/proc/{thread}/status").read_text()
        process = int(next(line for line in status.splitlines() if line.startswith("Tgid:"))[5:])
        pidfd = os.pidfd_open(process)
    except (OSError, StopIteration, ValueError):
        return False
    try:
        copy = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
        if copy < 0:
            return False
        with socket.socket(fileno=int(copy)) as sock:
            return sock.type == socket.SOCK_DGRAM
    finally:
        os.close(pidfd)


def parse_sockaddr(raw: bytes) -> tuple[IPAddress, int] | None:
    """(address, port) of a sockaddr_in or sockaddr_in6; None for any other family."""
    if len(raw) < 2:
        return None
    (family,) = struct.unpack_from("=H", raw)
    if family == socket.AF_INET and len(raw) >= 8:
        return ipaddress.IPv4Address(raw[4:8]), struct.unpack_from("!H", raw, 2)[0]
    if family == socket.AF_INET6 and len(raw) >= 24:
        return ipaddress.IPv6Address(raw[8:24]), struct.unpack_from("!H", raw, 2)[0]
    return None


def _nameservers(path: Path = _RESOLV_CONF) -> frozenset[IPAddress]:
    """The resolvers name lookups ask (on port 53): the guard lets those through, so a name
    resolves whatever the policy says of the resolver's own address."""
    found: set[IPAddress] = set()
    with suppress(OSError):
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == "nameserver":
                with suppress(ValueError):
                    found.add(ipaddress.ip_address(words[1].split("%", 1)[0]))
    return frozenset(found)
