"""The C allocator of a decoding process: keep freed memory for the next search step instead of unmapping it.

Every step of a search allocates and frees tensors of megabytes (logits, log-probabilities, beam
candidates, the decoder's key/value caches). glibc serves blocks above its mmap threshold (128 KiB,
raised at run time to at most 32 MiB) with fresh pages from the kernel and hands the top of its heap
back above its trim threshold, so each step faults its pages in again. Raised thresholds cut the page
faults of a beam search by an order of magnitude at the same output and peak memory; training keeps the
defaults, where the raised thresholds cost peak memory (benchmarks/README.md, "Measurements behind the code").

MKL's own memory manager, which keeps each thread's buffers of matrix products for its next calls, is turned off
in a decoding process (unless the user set ``MKL_DISABLE_FAST_MM``): with glibc keeping freed memory it saved no
time, and it raised the peak by 5-20 MiB, differently from run to run (benchmarks/README.md, "What made it faster").
"""

import ctypes
import logging
import os

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>


def keep_freed_memory(mmap_threshold: int = 256 << 20, trim_threshold: int = 512 << 20) -> bool:
    """Raise glibc's mmap and trim thresholds (bytes) for this process, and turn MKL's memory manager off; whether
    the C library took the thresholds.

    The thresholds are a no-op (False) with another C library (macOS, musl, Windows), which keeps its own policy.
    """
    os.environ.setdefault("MKL_DISABLE_FAST_MM", "1")  # MKL reads it at its first matrix product
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError, TypeError):  # no mallopt, or (Windows) no C library by that name
        return False
    taken = bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
    if not taken:
        log.debug("mallopt refused mmap threshold %d or trim threshold %d", mmap_threshold, trim_threshold)
    return taken
