"""The machine's fp32 matrix-product peak as torch reaches it: the best GFLOP/s of square products.

    python benchmarks/gemm_peak.py --threads 2

The share of this peak that training reaches (about 6 x parameters FLOPs per target token) is what
``train_speed.py`` and ``compare_toolkits.py`` print; both measure it with :func:`fp32_gemm_peak`.
"""

import argparse
import time

SIZES = (512, 1024, 2048, 3072)


def fp32_gemm_peak(threads: int, seconds: float = 1.0, rounds: int = 3) -> float:
    """The best GFLOP/s of ``n x n`` fp32 products over SIZES, each repeated for about ``seconds``, in ``rounds``
    rounds (a shared VM's rate varies by a fifth from second to second)."""
    import torch  # here: a process that only imports this module (the harness) stays small

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    best = 0.0
    try:
        for n in SIZES * rounds:
            a, b = torch.randn(n, n), torch.randn(n, n)
            a @ b  # warm-up
            count, tick = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - tick) < seconds:
                a @ b
                count += 1
            best = max(best, 2 * n**3 * count / elapsed / 1e9)
    finally:
        torch.set_num_threads(before)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"{fp32_gemm_peak(args.threads):.1f}")


if __name__ == "__main__":
    main()
