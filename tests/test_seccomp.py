"""The seccomp filter as the kernel reads it: each table's program, run here on a small
classic-BPF interpreter, for every ABI it is built for (tests/test_sandbox_seccomp.py
runs it in the kernel, for this machine's)."""

from __future__ import annotations

import errno
import struct

import pytest

from dlm_lsp.bench import seccomp
from dlm_lsp.bench.sandbox_child import own_pid_in

ALLOW = seccomp.RET_ALLOW


def run_filter(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """What the kernel's classic BPF would return for one call: the instructions the
    filter uses (load a word of seccomp_data, jeq/jge/jset on a constant, return)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    code = [seccomp.INSTRUCTION.unpack_from(program, at) for at in range(0, len(program), 8)]
    accumulator, at = 0, 0
    while True:
        op, jt, jf, k = code[at]
        if op == seccomp.LD_ABS_W:
            accumulator = struct.unpack_from("=I", data, k)[0]
        elif op == seccomp.RET:
            return k
        elif op in (seccomp.JEQ, seccomp.JGE, seccomp.JSET):
            taken = {seccomp.JEQ: accumulator == k, seccomp.JGE: accumulator >= k,
                     seccomp.JSET: bool(accumulator & k)}[op]
            at += jt if taken else jf
        else:
            raise AssertionError(f"instruction {op:#x} the filter should not use")
        at += 1


ABIS = ["x86_64", "aarch64"]
EPERM = seccomp.RET_ERRNO | errno.EPERM


@pytest.mark.parametrize("abi", ABIS)
def test_every_refused_call_fails_with_eperm_and_nothing_else_is_touched(abi):
    program = seccomp.build(abi)
    arch, column = seccomp.AUDIT_ARCH[abi], seccomp.COLUMN[abi]
    refused = {numbers[column] for numbers in seccomp.REFUSED.values()}
    for name, numbers in seccomp.REFUSED.items():
        assert run_filter(program, numbers[column], arch) == EPERM, name
    special = {seccomp.SOCKET[abi], seccomp.SOCKETPAIR[abi], seccomp.SENDTO[abi],
               seccomp.CLONE[abi],
               seccomp.CLONE3, seccomp.KILL[abi], seccomp.SETPRIORITY[abi],
               seccomp.IOPRIO_SET[abi], seccomp.FCNTL[abi], seccomp.IOCTL[abi],
               *(numbers[column] for table in (seccomp.OWN_PROCESS, seccomp.ON_ITSELF)
                 for numbers in table.values())}
    for nr in set(range(500)) - refused - special:
        assert run_filter(program, nr, arch) == ALLOW, nr


@pytest.mark.parametrize("abi", ABIS)
@pytest.mark.parametrize("call", ["socket", "socketpair"])
def test_sockets_and_socket_pairs_other_than_unix_ones_are_refused(abi, call):
    program, arch = seccomp.build(abi), seccomp.AUDIT_ARCH[abi]
    nr = {"socket": seccomp.SOCKET, "socketpair": seccomp.SOCKETPAIR}[call][abi]
    assert run_filter(program, nr, arch, (1, 1)) == ALLOW  # AF_UNIX, SOCK_STREAM
    # the family is an int: the kernel reads the argument's low word, as the filter does
    assert run_filter(program, nr, arch, (1 | 1 << 32, 1)) == ALLOW
    for family in (2, 10, 16, 17, 0):  # INET, INET6, NETLINK, PACKET, UNSPEC
        assert run_filter(program, nr, arch, (family, 1)) == EPERM, family


@pytest.mark.parametrize("abi", ABIS)
def test_a_socket_is_reached_by_its_name_by_no_call(abi):
    """connect, sendmsg and sendmmsg always; sendto only where it names an address,
    which the kernel reads only where the length (an int, its sixth argument) is not 0:
    a connected socket's send, which glibc makes as sendto with no address, goes on."""
    program, arch, column = seccomp.build(abi), seccomp.AUDIT_ARCH[abi], seccomp.COLUMN[abi]
    for name in ("connect", "sendmsg", "sendmmsg"):
        assert run_filter(program, seccomp.REFUSED[name][column], arch, (3, 1, 16)) == EPERM
    sendto = seccomp.SENDTO[abi]
    assert run_filter(program, sendto, arch, (3, 1, 1, 0, 0, 0)) == ALLOW
    assert run_filter(program, sendto, arch, (3, 1, 1, 0, 0x7F0000001000, 0)) == ALLOW
    assert run_filter(program, sendto, arch, (3, 1, 1, 0, 0x7F0000001000, 110)) == EPERM
    assert run_filter(program, sendto, arch, (3, 1, 1, 0, 0, 3)) == EPERM
    assert run_filter(program, sendto, arch, (3, 1, 1, 0, 0, 1 << 32)) == ALLOW  # an int


@pytest.mark.parametrize("abi", ABIS)
def test_clone_into_a_new_namespace_is_refused_and_clone3_sends_glibc_back_to_clone(abi):
    program, arch = seccomp.build(abi), seccomp.AUDIT_ARCH[abi]
    clone = seccomp.CLONE[abi]
    thread = 0x3D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|*_TID: pthread's
    assert run_filter(program, clone, arch, (thread,)) == ALLOW
    assert run_filter(program, clone, arch, (17,)) == ALLOW  # fork(): SIGCHLD alone
    for flag in (0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000,
                 0x40000000):
        assert run_filter(program, clone, arch, (17 | flag,)) == EPERM, hex(flag)
    assert run_filter(program, seccomp.CLONE3, arch) == seccomp.RET_ERRNO | errno.ENOSYS


@pytest.mark.parametrize("abi", ABIS)
def test_a_call_of_another_abi_is_refused_whatever_its_number(abi):
    program = seccomp.build(abi)
    other = seccomp.AUDIT_ARCH["aarch64" if abi == "x86_64" else "x86_64"]
    for arch in (other, 0x40000003):  # the other table's, i386's (int 0x80)
        assert run_filter(program, 39, arch) == EPERM  # getpid on x86_64
    if abi == "x86_64":  # x32: the same arch field, numbers from 0x40000000
        assert run_filter(program, 0x40000000 | 39, seccomp.AUDIT_ARCH[abi]) == EPERM


def test_the_refusal_can_be_another_errno_to_tell_the_filter_from_the_kernel():
    program = seccomp.build("x86_64", errno.ENOTRECOVERABLE)
    assert run_filter(program, 101, seccomp.AUDIT_ARCH["x86_64"]) == (
        seccomp.RET_ERRNO | errno.ENOTRECOVERABLE)


@pytest.mark.parametrize(("abi", "table"), [
    (("x86_64", 64), "x86_64"), (("aarch64", 64), "aarch64"), (("arm64", 64), "aarch64"),
    (("x86_64", 32), None), (("riscv64", 64), None)])
def test_the_filter_follows_the_interpreters_abi_and_says_why_there_is_none(abi, table):
    program, note = seccomp.program(abi)
    if table is None:
        assert program is None
        assert note == f"no system call table for {abi[0]} ({abi[1]}-bit Python)"
    else:
        assert program == seccomp.build(table) and note.startswith(f"{table}: ")


# The new mount API's calls by the kernel's own numbers (the same on every architecture,
# include/uapi/asm-generic/unistd.h), not by the filter's table: open_tree_attr (Linux
# 6.15) clones a mount tree as open_tree does, with mount_setattr's attributes.
MOUNT_API = {"open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
             "fsmount": 432, "fspick": 433, "mount_setattr": 442, "open_tree_attr": 467}


@pytest.mark.parametrize("abi", ABIS)
def test_every_call_of_the_new_mount_api_is_refused(abi):
    program, arch = seccomp.build(abi), seccomp.AUDIT_ARCH[abi]
    for name, nr in MOUNT_API.items():
        assert run_filter(program, nr, arch) == EPERM, name


# The signal calls' filter as the program's process installs it, its pid (4242) patched in
PID, OTHER = 4242, 4243
WORD = 0xFFFFFFFF


def patched(abi: str) -> bytes:
    return own_pid_in(seccomp.build(abi), PID)


def as_int(number: int, upper: int = 0) -> int:
    """A C int in a 64-bit register: its low word the kernel reads, `upper` above it."""
    return (number & WORD) | upper << 32


@pytest.mark.parametrize("abi", ABIS)
def test_kill_reaches_the_programs_own_process_and_group_only(abi):
    program, arch, kill = patched(abi), seccomp.AUDIT_ARCH[abi], seccomp.KILL[abi]
    for pid in (PID, 0, -PID):  # itself, its group, its group by number
        for upper in (0, WORD, 0x1234):  # the kernel reads the low word, an int
            assert run_filter(program, kill, arch, (as_int(pid, upper), 9)) == ALLOW, pid
    for pid in (-1, 1, OTHER, -OTHER, PID << 1):  # every process, init, another, ...
        for upper in (0, WORD, 0x1234):
            assert run_filter(program, kill, arch, (as_int(pid, upper), 0)) == EPERM, pid


@pytest.mark.parametrize("abi", ABIS)
@pytest.mark.parametrize("call", list(seccomp.OWN_PROCESS))
def test_thread_and_queued_signals_reach_the_programs_own_pid_only(abi, call):
    """tgkill's thread must then be one of its own (the kernel checks that it is the
    tgid's); tkill names a thread of any process."""
    program, arch = patched(abi), seccomp.AUDIT_ARCH[abi]
    nr = seccomp.OWN_PROCESS[call][seccomp.COLUMN[abi]]
    assert run_filter(program, nr, arch, (as_int(PID, WORD), OTHER, 0)) == ALLOW
    for pid in (0, -1, OTHER, -PID):
        assert run_filter(program, nr, arch, (as_int(pid), PID, 0)) == EPERM, pid


@pytest.mark.parametrize("abi", ABIS)
@pytest.mark.parametrize("call", list(seccomp.ON_ITSELF))
def test_limits_and_scheduling_are_set_on_the_programs_own_process_only(abi, call):
    """A CPU limit set on another process kills it; glibc's setrlimit is prlimit64(0)."""
    program, arch = patched(abi), seccomp.AUDIT_ARCH[abi]
    nr = seccomp.ON_ITSELF[call][seccomp.COLUMN[abi]]
    for pid in (0, PID):
        assert run_filter(program, nr, arch, (as_int(pid, WORD), 0, 0, 0)) == ALLOW
    for pid in (OTHER, 1, -1, -PID):
        assert run_filter(program, nr, arch, (as_int(pid), 0, 0, 0)) == EPERM


@pytest.mark.parametrize("abi", ABIS)
@pytest.mark.parametrize(("call", "user"), [("SETPRIORITY", seccomp.PRIO_USER),
                                            ("IOPRIO_SET", seccomp.IOPRIO_WHO_USER)])
def test_priorities_are_set_on_the_programs_process_or_group_never_a_users_every_one(
        abi, call, user):
    """(which, who): PRIO_USER's who 0 is the caller's user, every process of it."""
    program, arch = patched(abi), seccomp.AUDIT_ARCH[abi]
    nr = getattr(seccomp, call)[abi]
    for which in {0, 1, 2, 3} - {user}:  # a process, a group (or what the kernel refuses)
        for who in (0, PID):
            assert run_filter(program, nr, arch, (which, as_int(who, WORD), 19)) == ALLOW
        for who in (OTHER, 1, -1):
            assert run_filter(program, nr, arch, (which, as_int(who), 19)) == EPERM
    for who in (0, PID, 1000):
        assert run_filter(program, nr, arch, (user, who, 19)) == EPERM
        assert run_filter(program, nr, arch, (as_int(user, WORD), who, 19)) == EPERM


@pytest.mark.parametrize("abi", ABIS)
def test_a_descriptors_io_signals_go_to_the_programs_own_process_or_group_only(abi):
    program, arch = patched(abi), seccomp.AUDIT_ARCH[abi]
    fcntl, ioctl = seccomp.FCNTL[abi], seccomp.IOCTL[abi]
    for pid in (PID, 0, -PID):
        assert run_filter(program, fcntl, arch, (3, seccomp.F_SETOWN, as_int(pid))) == ALLOW
    for pid in (OTHER, -OTHER, -1):
        assert run_filter(program, fcntl, arch, (3, seccomp.F_SETOWN, as_int(pid))) == EPERM
    # F_SETOWN_EX and the ioctls pass the pid in memory: refused whatever it is
    assert run_filter(program, fcntl, arch, (3, seccomp.F_SETOWN_EX, 0)) == EPERM
    for command in (seccomp.FIOSETOWN, seccomp.SIOCSPGRP):
        assert run_filter(program, ioctl, arch, (3, command, 0)) == EPERM, hex(command)
    for command in (1, 2, 3, 4, 9):  # F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_GETOWN
        assert run_filter(program, fcntl, arch, (3, command, OTHER)) == ALLOW, command
    for command in (0x5401, 0x541B, 0x5421):  # TCGETS, FIONREAD, FIONBIO
        assert run_filter(program, ioctl, arch, (3, command, OTHER)) == ALLOW, hex(command)


@pytest.mark.parametrize("abi", ABIS)
def test_a_filter_not_yet_given_its_pid_lets_signals_reach_no_other_process(abi):
    program, arch, kill = seccomp.build(abi), seccomp.AUDIT_ARCH[abi], seccomp.KILL[abi]
    assert run_filter(program, kill, arch, (0, 0)) == ALLOW  # its own group
    for pid in (-1, 1, OTHER, PID, -PID):
        assert run_filter(program, kill, arch, (as_int(pid), 0)) == EPERM, pid


@pytest.mark.parametrize("abi", ABIS)
def test_the_pid_goes_where_the_filter_names_it_and_nowhere_else(abi):
    program = seccomp.build(abi)
    before, after = (program[at:at + 8] for at in range(0, len(program), 8)), \
        (patched(abi)[at:at + 8] for at in range(0, len(program), 8))
    changed = [(seccomp.INSTRUCTION.unpack(old)[3], seccomp.INSTRUCTION.unpack(new)[3])
               for old, new in zip(before, after, strict=True) if old != new]
    slots = {seccomp.PID_SLOT: PID, seccomp.NEGATIVE_PID_SLOT: -PID & WORD}
    assert changed and all(slots[old] == new for old, new in changed)


def test_a_pid_namespaces_init_gets_its_own_group_for_minus_itself_not_every_process():
    program, arch = own_pid_in(seccomp.build("x86_64"), 1), seccomp.AUDIT_ARCH["x86_64"]
    assert run_filter(program, seccomp.KILL["x86_64"], arch, (as_int(-1), 0)) == EPERM
    assert run_filter(program, seccomp.KILL["x86_64"], arch, (1, 0)) == ALLOW


def test_a_jump_past_what_one_byte_holds_is_refused_when_assembled():
    """The kernel's jumps are a byte each: a longer one would land elsewhere."""
    lines = [(seccomp.JEQ, 0, "far", 0), *[(seccomp.RET, 0)] * 256, ("label", "far"),
             (seccomp.RET, 0)]
    with pytest.raises(ValueError, match="a jump of 256"):
        seccomp._assemble(lines)
    assert len(seccomp._assemble(lines[:1] + lines[2:])) == 8 * 257
