"""The box's seccomp filter: a classic BPF program, built here without libseccomp, that bwrap loads with --seccomp.

It refuses what an unprivileged command has no business calling and what widens the kernel's attack
surface: new namespaces (a nested user namespace would give the command every capability inside
it), mounts, tracing other processes, kernel keyrings, eBPF, perf, userfaultfd, io_uring, kernel
modules and kexec, handles that bypass path checks, and terminal input injection. A refused call
fails with EPERM (clone3, whose flags a filter cannot read, with ENOSYS, so libc falls back to
clone, whose flags it can). Any other architecture or ABI (i386 or x32 calls on x86_64) kills the
process: the numbers below would mean other calls there. The same filter holds whether the harness
runs as root or not.
"""

from __future__ import annotations

import errno
import platform
import struct

# (op, jt, jf, k) of struct sock_filter
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ, _JGE, _JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_K with JEQ, JGE, JSET
_RET = 0x06  # BPF_RET | BPF_K

RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

# Offsets into struct seccomp_data: nr, arch, instruction_pointer, args[6] (little-endian: the low word first).
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24

NAMESPACE_FLAGS = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC
                   | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080)  # NEWUSER, NEWPID, NEWNET, NEWTIME
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # PER_LINUX, PER_LINUX32, with UNAME26, and the query
TTY_IOCTLS = (0x5412, 0x541C)  # TIOCSTI (push input into the terminal), TIOCLINUX

REFUSED = (
    # namespaces and mounts
    "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "open_tree_attr", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    # the kernel itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module", "query_module",
    "get_kernel_syms", "reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "quotactl_fd", "lookup_dcookie",
    "nfsservctl", "uselib", "ioperm", "iopl", "vhangup", "settimeofday", "clock_settime", "clock_adjtime",
    # other processes' memory and file descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    # large kernel attack surface an unprivileged command never needs
    "perf_event_open", "bpf", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init",
    "keyctl", "add_key", "request_key",
    # file handles (open_by_handle_at skips every path check)
    "open_by_handle_at", "name_to_handle_at",
)

# Syscall numbers per architecture: x86_64 from asm/unistd_64.h, aarch64 from asm-generic/unistd.h.
SYSCALLS = {
    "x86_64": {
        "audit_arch": 0xC000003E, "abi_bit": 0x40000000,  # x32 calls carry this bit
        "clone": 56, "clone3": 435, "unshare": 272, "personality": 135, "ioctl": 16,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "move_mount": 429,
        "open_tree": 428, "open_tree_attr": 467, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "create_module": 174, "query_module": 178, "get_kernel_syms": 177, "reboot": 169,
        "swapon": 167, "swapoff": 168, "acct": 163, "syslog": 103, "quotactl": 179, "quotactl_fd": 443,
        "lookup_dcookie": 212, "nfsservctl": 180, "uselib": 134, "ioperm": 173, "iopl": 172, "vhangup": 153,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438, "process_madvise": 440, "perf_event_open": 298,
        "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "fanotify_init": 300, "keyctl": 250, "add_key": 248, "request_key": 249, "open_by_handle_at": 304,
        "name_to_handle_at": 303,
    },
    "aarch64": {
        "audit_arch": 0xC00000B7, "abi_bit": 0,
        "clone": 220, "clone3": 435, "unshare": 97, "personality": 92, "ioctl": 29,
        "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "move_mount": 429,
        "open_tree": 428, "open_tree_attr": 467, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89, "syslog": 116,
        "quotactl": 60, "quotactl_fd": 443, "lookup_dcookie": 18, "nfsservctl": 42, "vhangup": 58,
        "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "ptrace": 117, "process_vm_readv": 270,
        "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438, "process_madvise": 440, "perf_event_open": 241,
        "bpf": 280, "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "fanotify_init": 262, "keyctl": 219, "add_key": 217, "request_key": 218, "open_by_handle_at": 265,
        "name_to_handle_at": 264,
    },
}


class Unsupported(Exception):
    """No syscall table for this machine's architecture."""


def _assemble(program: list[tuple]) -> bytes:
    """Instructions with symbolic jump targets -> struct sock_filter bytes.

    An instruction is (op, k) or (op, k, jt, jf) where jt/jf are labels (or None: the next one);
    ("label", name) marks a place.
    """
    labels, code = {}, []
    for ins in program:
        if ins[0] == "label":
            labels[ins[1]] = len(code)
        else:
            code.append(ins)
    out = bytearray()
    for pc, ins in enumerate(code):
        op, k = ins[0], ins[1]
        jt = jf = 0
        if len(ins) == 4:
            jt, jf = (0 if t is None else labels[t] - pc - 1 for t in ins[2:])
            if not (0 <= jt < 256 and 0 <= jf < 256):
                raise ValueError("seccomp program: jump out of range")
        out += struct.pack("=HBBI", op, jt, jf, k)
    return bytes(out)


def program(arch: str | None = None) -> bytes:
    """The filter for `arch` (default: this machine) as the raw BPF bwrap's --seccomp reads."""
    arch = arch or platform.machine()
    table = SYSCALLS.get(arch)
    if table is None:
        raise Unsupported(f"no seccomp syscall table for {arch}")
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    p: list[tuple] = [
        (_LD_ABS, _ARCH),
        (_JEQ, table["audit_arch"], None, "kill"),
        (_LD_ABS, _NR),
    ]
    if table["abi_bit"]:
        p.append((_JGE, table["abi_bit"], "kill", None))
    p += [(_JEQ, table[name], "eperm", None) for name in REFUSED if name in table]
    p += [
        (_JEQ, table["clone"], "flags", None),
        (_JEQ, table["unshare"], "flags", None),
        (_JEQ, table["clone3"], "enosys", None),
        (_JEQ, table["personality"], "personality", None),
        (_JEQ, table["ioctl"], "ioctl", None),
        (_RET, RET_ALLOW),
        ("label", "flags"),  # clone and unshare: any namespace flag is refused, plain forks and threads pass
        (_LD_ABS, _ARG0),
        (_JSET, NAMESPACE_FLAGS, "eperm", "allow"),
        ("label", "personality"),
        (_LD_ABS, _ARG0),
        *[(_JEQ, value, "allow", None) for value in PERSONALITIES],
        (_RET, eperm),
        ("label", "ioctl"),
        (_LD_ABS, _ARG1),
        *[(_JEQ, value, "eperm", None) for value in TTY_IOCTLS],
        ("label", "allow"),
        (_RET, RET_ALLOW),
        ("label", "eperm"),
        (_RET, eperm),
        ("label", "enosys"),
        (_RET, enosys),
        ("label", "kill"),
        (_RET, RET_KILL_PROCESS),
    ]
    return _assemble(p)
