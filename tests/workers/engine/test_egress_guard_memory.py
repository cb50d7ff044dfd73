"""The egress guard reads the address a connect() names from the caller's memory, also where
a seccomp profile refuses process_vm_readv, as Docker's default profile does without
CAP_SYS_PTRACE: every copy run failed with class egress in the compose stack until it read
/proc/PID/mem instead (docs/deployment.md).

Each test runs in a process of its own that refuses process_vm_readv as such a profile does
(the filter cannot be taken back) and, when the tests run as root, has dropped to `nobody`
first, so that nothing but the ancestry a worker's clients have lets it read their memory.
"""

from __future__ import annotations

import ctypes
import encodings.idna  # noqa: F401  (socket's name encoding: `nobody` cannot import it later)
import errno
import os
import platform
import pwd
import socket
import subprocess
from multiprocessing.connection import Connection
from typing import Any

import pytest

from tests.workers.engine.test_egress_guard import answer_from_child, connect_outcome
from workers.engine.egress import EgressPolicy
from workers.engine.egress_guard import EgressGuard, read_memory

KNOWN = b"fedprobe: the bytes at a known address of another process"
# A program holding KNOWN at an address it prints, until its stdin closes. Debian's Python:
# `nobody` may run it, and it needs nothing but the standard library.
HOLDER = (
    "import ctypes, sys\n"
    f"known = ctypes.create_string_buffer({KNOWN!r}, {len(KNOWN)})\n"
    "print(ctypes.addressof(known), flush=True)\n"
    "sys.stdin.read()\n"
)
SYSTEM_PYTHON = "/usr/bin/python3"

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_SET_NO_NEW_PRIVS, _PR_SET_DUMPABLE = 38, 4
_LOAD_WORD, _JUMP_EQUAL, _RETURN = 0x20, 0x15, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_PROCESS_VM_READV = {"x86_64": 310, "aarch64": 270}
_libc = ctypes.CDLL(None, use_errno=True)


class _Instruction(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction)))


def refuse_process_vm_readv(error: int) -> None:
    """From now on process_vm_readv fails with `error` in this process and its children."""
    steps = [
        (_LOAD_WORD, 0, 0, 0),  # the system call's number
        (_JUMP_EQUAL, 0, 1, _PROCESS_VM_READV[platform.machine()]),
        (_RETURN, 0, 0, _RET_ERRNO | error),
        (_RETURN, 0, 0, _RET_ALLOW),
    ]
    array = (_Instruction * len(steps))(*(_Instruction(*step) for step in steps))
    program = _Program(len(steps), array)
    assert _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    assert _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) == 0


def process_vm_readv_errno(pid: int, address: int) -> int:
    """The errno of one process_vm_readv call (0 when it read)."""
    buffer = ctypes.create_string_buffer(8)
    local = (ctypes.c_void_p * 2)(ctypes.cast(buffer, ctypes.c_void_p), 8)
    remote = (ctypes.c_void_p * 2)(address, 8)
    read = _libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    return 0 if read >= 0 else ctypes.get_errno()


def as_a_worker_would(error: int) -> None:
    """This process as a worker in a container: no root (so no CAP_SYS_PTRACE) and
    process_vm_readv refused with `error`."""
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.setgroups([])
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
        # Changing user made this process undumpable; a worker started as its user is not.
        assert _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0) == 0
    refuse_process_vm_readv(error)


def _read_a_holder(sink: Connection, error: int, elsewhere: list[int]) -> None:
    """Read KNOWN in a holder process, and `elsewhere` (addresses) in it too."""
    as_a_worker_would(error)
    holder = subprocess.Popen(
        [SYSTEM_PYTHON, "-I", "-c", HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    address = int(holder.stdout.readline())
    seen: dict[str, Any] = {"process_vm_readv": process_vm_readv_errno(holder.pid, address)}
    seen["known"] = read_memory(holder.pid, address, len(KNOWN))
    for where in elsewhere:
        try:
            seen[str(where)] = read_memory(holder.pid, where, len(KNOWN))
        except OSError as exc:
            seen[str(where)] = (exc.errno, str(exc))
    holder.stdin.close()
    holder.wait(timeout=10)
    sink.send(seen)


@pytest.mark.parametrize("error", [errno.EPERM, errno.ENOSYS], ids=["EPERM", "ENOSYS"])
def test_memory_is_read_through_proc_where_process_vm_readv_is_refused(error: int) -> None:
    seen = answer_from_child(_read_a_holder, error, [])
    assert seen["process_vm_readv"] == error  # the usual way is closed...
    assert seen["known"] == KNOWN  # ...and the bytes are read all the same


def test_an_unreadable_address_is_an_error_of_the_call_not_of_the_guard() -> None:
    """Unmapped memory, and an address no file offset reaches (a kernel address a caller
    may pass), fail that one check with OSError, which the guard turns into a refusal."""
    unmapped, kernel = 4096, 2**64 - 4096  # below vm.mmap_min_addr; above any offset
    seen = answer_from_child(_read_a_holder, errno.EPERM, [unmapped, kernel])
    assert seen[str(unmapped)][0] == errno.EIO
    assert seen[str(kernel)][0] == errno.EFAULT
    assert "reading the caller's memory" in seen[str(kernel)][1]


def _guard_a_child(sink: Connection, allowed: int, refused: int) -> None:
    """A run's process in a container: its guard, and a client forked from it that
    connects once where the policy allows and once where it does not."""
    as_a_worker_would(errno.EPERM)
    with EgressGuard.running(EgressPolicy.allowing(["127.0.0.1/32"])) as guard:
        assert guard is not None
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(reader)
            guard.link.attach("client 1")
            seen = (
                f"{connect_outcome('127.0.0.1', allowed)}\n{connect_outcome('127.0.0.2', refused)}"
            )
            os.write(writer, seen.encode())
            os._exit(0)
        os.close(writer)
        with os.fdopen(reader) as answers:
            allowed_seen, refused_seen = answers.read().splitlines()
        os.waitpid(child, 0)
        sink.send(
            {"allowed": allowed_seen, "refused": refused_seen, "why": guard.refusal("client 1")}
        )


def test_the_guard_lets_allowed_connections_go_where_process_vm_readv_is_refused() -> None:
    """What failed every copy run in Docker: the guard could not read the address, so it
    refused every connection, allowed ones too."""
    with (
        socket.create_server(("127.0.0.1", 0)) as here,
        socket.create_server(("127.0.0.2", 0)) as elsewhere,
    ):
        seen = answer_from_child(_guard_a_child, here.getsockname()[1], elsewhere.getsockname()[1])
    assert seen["allowed"] == "connected"
    assert seen["refused"] == "refused: Permission denied"
    assert seen["why"] is not None
    assert "a connection to 127.0.0.2:" in seen["why"]
    assert "could not be checked" not in seen["why"]
