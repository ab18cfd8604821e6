"""Small C helpers built with the system's C compiler on first use, cached.

Why (decisions 0046 and 0052): a loop that must run without the GIL (a
TLS body, a file's chunked writes) is one C call instead of one GIL
hand-over per step; the package stays pure Python, so the source ships
and is compiled where a compiler is (a process without one keeps the
Python loop, which stays the reference).

The build depends only on the source and the machine (its name says both),
so one made under the user's default cache (``~/.cache/synxfer``) serves a
process whose ``XDG_CACHE_HOME`` points elsewhere (a benchmark's or a job's
scratch directory) instead of being compiled again for every process.
Blocking: call it on a worker thread, never on the event loop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

__all__ = ["compiled"]


def compiled(source: Path, stem: str) -> ctypes.CDLL | None:
    """``source`` built into ``<cache>/synxfer/<stem>-<hash>.so`` (once) and
    loaded, or None: no compiler (``CC``, else ``cc``), or the build failed."""
    import ctypes
    import hashlib
    import platform
    import shutil
    import subprocess
    import tempfile

    code = source.read_bytes()
    tag = hashlib.sha256(code + platform.machine().encode()).hexdigest()[:16]
    name = f"{stem}-{tag}.so"
    default = Path(os.path.expanduser("~")) / ".cache" / "synxfer" / name
    base = os.environ.get("XDG_CACHE_HOME")
    out = Path(base) / "synxfer" / name if base else default
    if not out.exists() and default.exists():
        out = default
    if not out.exists():
        cc = shutil.which(os.environ.get("CC") or "cc")
        if cc is None:
            return None
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
        os.close(fd)
        try:
            done = subprocess.run(
                [cc, "-O2", "-shared", "-fPIC", "-o", tmp, str(source)],
                capture_output=True,
                timeout=120,
                check=False,
            )
            if done.returncode != 0:
                return None
            os.replace(tmp, out)  # atomic: another process may build it too
        except (OSError, subprocess.SubprocessError):
            return None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return ctypes.CDLL(str(out))
