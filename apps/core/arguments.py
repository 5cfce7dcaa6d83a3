"""Argument types of the management commands: a value that cannot work is refused by the
parser, as one line naming the option, with exit status 2, before the command does anything
(never a traceback halfway through, never a dry run that accepts what the real run refuses).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

# PostgreSQL's memory units (case-sensitive, as the server reads them) in kilobytes.
_MEMORY_UNITS_KB = {"B": 1 / 1024, "kB": 1, "MB": 1024, "GB": 1024**2, "TB": 1024**3}
_MEMORY = re.compile(r"(\d+)\s*(B|kB|MB|GB|TB)?")
# maintenance_work_mem's bounds on the server: 1MB to 2147483647kB.
MAINTENANCE_WORK_MEM_MIN_KB = 1024
MAINTENANCE_WORK_MEM_MAX_KB = 2_147_483_647


def positive_int(text: str) -> int:
    """A whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def port_number(text: str) -> int:
    """A TCP port to listen on: 1 to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (1 to 65535)")
    return value


def maintenance_work_mem(text: str) -> str:
    """A ``maintenance_work_mem`` PostgreSQL accepts: a number with an optional unit (B, kB,
    MB, GB, TB; without one, kilobytes), from 1MB to 2147483647kB. Returned as given."""
    match = _MEMORY.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an amount of memory: give a number and a unit, e.g. 512MB or 2GB "
            "(units B, kB, MB, GB, TB; case matters)"
        )
    kilobytes = int(match.group(1)) * _MEMORY_UNITS_KB[match.group(2) or "kB"]
    if not MAINTENANCE_WORK_MEM_MIN_KB <= kilobytes <= MAINTENANCE_WORK_MEM_MAX_KB:
        raise argparse.ArgumentTypeError(
            f"{text!r} is outside what PostgreSQL accepts (1MB to 2147483647kB)"
        )
    return text.strip()


def writable_file(text: str) -> Path:
    """A file the command will write: its folder must exist and it must not be a folder
    (checked first, so a long run does not end in an error about where to put its output)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {path.parent} does not exist")
    return path
