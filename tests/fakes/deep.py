"""Trees deeper than PATH_MAX, made fd-relative (a path to their bottom is too long to open)."""

from __future__ import annotations

import os


def deep_tree(root, depth: int = 30, name_len: int = 200, mode: int | None = None,
              leaves: dict = {"bottom.txt": b"deep\n", b"bad-\xff-name.md": b"deep\n"}) -> list[str]:
    """depth nested folders of name_len characters under root, `leaves` (name: bytes) written at the bottom and its
    folder chmod-ed to `mode`; returns the folder names."""
    names = [(f"{i:04d}" * name_len)[:name_len] for i in range(depth)]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        for leaf, body in leaves.items():
            out = os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o444, dir_fd=fd)
            os.write(out, body)
            os.close(out)
        if mode is not None:
            os.chmod(fd, mode)
    finally:
        os.close(fd)
    return names
