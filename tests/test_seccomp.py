"""The seccomp filter as the kernel reads it: each table's program, run here on a small
classic-BPF interpreter, for every ABI it is built for (tests/test_sandbox_seccomp.py
runs it in the kernel, for this machine's)."""

from __future__ import annotations

import errno
import struct

import pytest

from dlm_lsp.bench import seccomp

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
    special = {seccomp.SOCKET[abi], seccomp.CLONE[abi], seccomp.CLONE3}
    for nr in set(range(500)) - refused - special:
        assert run_filter(program, nr, arch) == ALLOW, nr


@pytest.mark.parametrize("abi", ABIS)
def test_sockets_other_than_unix_ones_are_refused(abi):
    program, arch = seccomp.build(abi), seccomp.AUDIT_ARCH[abi]
    socket = seccomp.SOCKET[abi]
    assert run_filter(program, socket, arch, (1, 1)) == ALLOW  # AF_UNIX, SOCK_STREAM
    # the family is an int: the kernel reads the argument's low word, as the filter does
    assert run_filter(program, socket, arch, (1 | 1 << 32, 1)) == ALLOW
    for family in (2, 10, 16, 17, 0):  # INET, INET6, NETLINK, PACKET, UNSPEC
        assert run_filter(program, socket, arch, (family, 1)) == EPERM, family


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
