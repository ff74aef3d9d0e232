"""Where a torch search's time goes: the model's steps against the search's own work, by the rows of a step.

    python benchmarks/search_profile.py --model DIR --src FILE [--method beam] [--beam-size 5]
        [--length-penalty 0] [--batch-size 64] [--threads 2] [--profile]

Translates ``--src`` (plain text) in one process as ``python -m nmt translate`` does (the same reading,
sorting and batching, one batch at a time), after loading and a warm-up on the first batch, and times every
call of the model's step and of its ``init_state`` (the encoder). Prints the search's seconds, the steps' share
of them, the encoder's, the rest (the search's own work: log-softmax, top-k, reordering, bookkeeping; and
the subword encoding and decoding of the lines), and the steps grouped by their rows (hypotheses
in the batch: they shrink as sentences finish) with milliseconds per step. ``--profile`` adds the
operators of the whole search by their own time (torch.profiler). Figures: benchmarks/README.md.
"""

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from train_speed import profile_table

from nmt.allocator import keep_freed_memory
from nmt.config import DecodeConfig
from nmt.decoding.streaming import check_source, read_source
from nmt.decoding.translation import load_decoding, translate_lines
from nmt.errors import NmtError

ROW_BINS = (1, 16, 64, 128, 256, 384)  # lower ends of the row groups (the last is open)


def timed(model, method: str) -> list[tuple[int, float]]:
    """Wrap ``model.<method>`` (``init_state`` or ``step``, whose first argument is batch-first) so that each call
    appends (rows, seconds) to the returned list."""
    record: list[tuple[int, float]] = []
    call = getattr(model, method)

    def timed_call(first: torch.Tensor, *args):
        tick = time.perf_counter()
        out = call(first, *args)
        record.append((first.size(0), time.perf_counter() - tick))
        return out

    setattr(model, method, timed_call)
    return record


def row_table(record: list[tuple[int, float]]) -> str:
    """Steps grouped by :data:`ROW_BINS`: count, seconds and milliseconds per step, as a Markdown table."""
    groups: dict[int, list[float]] = defaultdict(list)
    for rows, seconds in record:
        groups[max(b for b in ROW_BINS if b <= rows)].append(seconds)
    lines = ["| rows | steps | s | ms per step |", "|---|---:|---:|---:|"]
    for low, high in zip(ROW_BINS, (*ROW_BINS[1:], None), strict=True):
        times = groups.get(low, [])
        label = f"{low}-{high - 1}" if high else f"{low}+"
        ms = 1e3 * sum(times) / len(times) if times else 0.0
        lines.append(f"| {label} | {len(times)} | {sum(times):.2f} | {ms:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, type=Path, help="a trained model directory")
    parser.add_argument("--src", required=True, type=Path, help="plain-text source sentences, one per line")
    parser.add_argument("--method", default="beam", choices=["beam", "greedy"])
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--length-penalty", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="the operators of the search (torch.profiler)")
    args = parser.parse_args()

    keep_freed_memory(mkl_buffers=False)  # as nmt translate
    config = DecodeConfig(
        method=args.method, beam_size=args.beam_size, length_penalty=args.length_penalty, batch_size=args.batch_size
    )
    with check_source(args.src).open("rb") as stream:  # as nmt translate reads it: bad bytes named, not fatal
        lines = list(read_source(stream, str(args.src)))
    translator = load_decoding([args.model], config, "cpu", "off", args.threads, workers=1)
    translate_lines(translator, lines[: args.batch_size])  # warm-up
    starts, record = timed(translator.model, "init_state"), timed(translator.model, "step")
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if args.profile else None
    if profiler:
        profiler.start()
    tick = time.perf_counter()
    translate_lines(translator, lines)
    total = time.perf_counter() - tick
    steps, encoder = (sum(seconds for _, seconds in calls) for calls in (record, starts))
    print(
        f"{len(lines)} sentences, {config.describe()} alpha {args.length_penalty:g}, batches of {args.batch_size}, "
        f"{args.threads} threads: search {total:.2f} s, {len(record)} model steps {steps:.2f} s "
        f"({100 * steps / total:.0f}%), the encoder {encoder:.2f} s, the rest (the search's own work, subwords) "
        f"{total - steps - encoder:.2f} s\n"
    )
    print(row_table(record))
    if profiler:
        profiler.stop()
        print(profile_table(profiler, 1, unit="search"))


if __name__ == "__main__":
    try:
        main()
    except NmtError as e:  # a missing or unfit model or source: its one-line message
        sys.exit(f"error: {e}")
