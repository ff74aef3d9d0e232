"""The C allocator of a training or decoding process: keep freed memory for the next step instead of unmapping it.

Every training update and every search step allocates and frees tensors of megabytes (logits and
log-probabilities over the vocabulary, activations, gradients; in search the beam candidates and the decoder's
key/value caches). glibc serves blocks above its mmap threshold (128 KiB, raised at run time to at most 32 MiB)
with fresh pages from the kernel and hands the top of its heap back above its trim threshold, so each update or
step faults its pages in again, which a virtual machine pays dearly for. Thresholds of 64 MiB (mmap) and 128 MiB
(trim) remove most of those faults at the same output and peak memory; higher ones raised a training's peak
(benchmarks/README.md, "What made it faster", "Page faults").

MKL's own memory manager, which keeps each thread's buffers of matrix products for its next calls, is turned off
in a decoding process (unless the user set ``MKL_DISABLE_FAST_MM``): with glibc keeping freed memory it saved no
time there and raised the peak (benchmarks/history.md, "MKL's memory manager"). Training keeps it.
"""

import ctypes
import logging
import os

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>
MMAP_THRESHOLD, TRIM_THRESHOLD = 64 << 20, 128 << 20  # bytes


def keep_freed_memory(
    mkl_buffers: bool = True, mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD
) -> bool:
    """Raise glibc's mmap and trim thresholds (bytes) for this process; whether the C library took them.

    The thresholds are a no-op (False) with another C library (macOS, musl, Windows), which keeps its own policy.

    :param mkl_buffers: False turns MKL's memory manager off (a decoding process), unless the user set it
    """
    if not mkl_buffers:
        os.environ.setdefault("MKL_DISABLE_FAST_MM", "1")  # MKL reads it at its first matrix product
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError, TypeError):  # no mallopt, or (Windows) no C library by that name
        return False
    taken = bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
    if not taken:
        log.debug("mallopt refused mmap threshold %d or trim threshold %d", mmap_threshold, trim_threshold)
    return taken
