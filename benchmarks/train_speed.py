"""Training and decoding speed of one model on Multi30k en-de from the offline mirror; prints a table.

    python benchmarks/train_speed.py --mirror ../shared/data/mirror --steps 60 --bf16 off on

Reports training target tokens/s (EOS included, padding excluded), the share of the CPU's fp32
GEMM peak (measured by ``gemm_peak.py``: the best of square products) that this is (about
6 x parameters FLOPs per target token), peak RSS, and beam/greedy decoding time for the first
sentences of test_2016_flickr. ``--profile N`` prints the operators of N more updates by their own
time (torch.profiler), matrix products first.
"""

import argparse
import gzip
import resource
import statistics
import tempfile
import time
from pathlib import Path

import torch
from gemm_peak import fp32_gemm_peak

from nmt.allocator import keep_freed_memory
from nmt.config import DecodeConfig, SubwordConfig, TrainConfig
from nmt.data.batches import ParallelData, make_batch, token_batches
from nmt.data.subword import load_subword, train_subword
from nmt.decoding.translation import Translator, translate_lines
from nmt.device import autocast
from nmt.models.seq2seq import build_model
from nmt.training.loss import LabelSmoothedCrossEntropy
from nmt.training.optimizer import lr_at_step

URL_PATH = "raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"


def unpack(mirror: Path, name: str, work: Path) -> Path:
    out = work / name.removesuffix(".gz")
    if not out.exists():
        out.write_text(gzip.open(mirror / URL_PATH / name, "rt", encoding="utf-8").read(), encoding="utf-8")
    return out


def measure_training(model, data, config: TrainConfig, steps: int, device, profile: int = 0) -> tuple[list[float], str]:
    """Tokens/s of each update after two warm-up updates; with ``profile``, then that many updates profiled
    (:func:`profile_table`, else "")."""
    optimizer = torch.optim.Adam(
        model.parameters(), lr=config.lr, betas=config.adam_betas, eps=config.adam_eps, fused=True
    )
    criterion = LabelSmoothedCrossEntropy(config.label_smoothing)
    batches = token_batches(data.src.lengths, data.trg.lengths, config.batch_tokens, config.seed, 1)
    rates = []
    model.train()
    for step in range(1, steps + 3 + profile):
        if profile and step == steps + 3:
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            profiler.start()
        batch = make_batch(data, batches[step % len(batches)]).to(device)
        tick = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, config.bf16):
            logits = model(batch.src, batch.trg_in)
        loss, _ = criterion(logits, batch.trg_out)
        (loss / batch.n_trg_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        for group in optimizer.param_groups:
            group["lr"] = lr_at_step(step, config.lr, config.warmup_steps)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if 2 < step < steps + 3:
            rates.append(batch.n_trg_tokens / (time.perf_counter() - tick))
    if not profile:
        return rates, ""
    profiler.stop()
    return rates, profile_table(profiler, profile)


def profile_table(profiler, updates: int, unit: str = "update") -> str:
    """Operators by their own CPU time per update (per ``unit``), the 20 largest; the share of matrix products
    (mm, addmm, bmm)."""
    events = sorted(profiler.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    gemm = sum(e.self_cpu_time_total for e in events if e.key in ("aten::mm", "aten::addmm", "aten::bmm"))
    lines = [
        f"\nprofile of {updates} {unit}{'s' if updates != 1 else ''}: {total / updates / 1e3:.1f} ms per {unit}, "
        f"matrix products {100 * gemm / total:.0f}%\n",
        f"| operator | ms per {unit} | share | calls per {unit} |",
        "|---|---:|---:|---:|",
    ]
    for e in events[:20]:
        ms, share = e.self_cpu_time_total / updates / 1e3, 100 * e.self_cpu_time_total / total
        lines.append(f"| {e.key} | {ms:.2f} | {share:.1f}% | {e.count / updates:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", default="../shared/data/mirror", type=Path)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--arch", default="transformer")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--decode-sentences", type=int, default=200)
    parser.add_argument("--bf16", nargs="+", default=["off"], choices=["off", "on"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", type=int, default=0, help="profile this many more updates (torch.profiler)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--peak-gflops", type=float, help="fp32 GEMM peak of the machine (default: measured)")
    args = parser.parse_args()

    keep_freed_memory()  # as nmt train
    peak = args.peak_gflops or fp32_gemm_peak(args.threads)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    work = Path(tempfile.gettempdir()) / "nmt_bench"
    work.mkdir(exist_ok=True)
    files = {
        f"{s}.{lang}": unpack(args.mirror, f"{s}.{lang}.gz", work)
        for s in ("train", "test_2016_flickr")
        for lang in ("en", "de")
    }
    spm_model = work / f"spm{args.vocab_size}.model"
    if not spm_model.exists():
        train_subword(
            [files["train.en"]],
            [files["train.de"]],
            spm_model,
            work / f"spm{args.vocab_size}.copy",
            SubwordConfig(vocab_size=args.vocab_size),
        )
    sp = load_subword(spm_model)
    data = ParallelData.from_files(files["train.en"], files["train.de"], sp, sp, max_length=128)
    test_src = files["test_2016_flickr.en"].read_text(encoding="utf-8").splitlines()[: args.decode_sentences]

    print(
        f"machine: {torch.get_num_threads()} threads, device {device}, torch {torch.__version__}, "
        f"fp32 GEMM peak {peak:.0f} GFLOP/s (benchmarks/gemm_peak.py)"
    )
    columns = ["arch", "size", "params", "bf16", "train tok/s (median)", "% of fp32 peak", "beam5 sent/s"]
    print("| " + " | ".join([*columns, "greedy sent/s", "peak RSS MiB"]) + " |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    profiles = []
    for bf16 in args.bf16:
        torch.manual_seed(1)
        model = build_model({"arch": args.arch, "size": args.preset}, len(sp), len(sp), True).to(device)
        config = TrainConfig(batch_tokens=args.batch_tokens, bf16=bf16)
        rates, profile = measure_training(model, data, config, args.steps, device, args.profile)
        profiles.append(profile)
        rate = statistics.median(rates)
        gflops = 6 * model.n_parameters() * rate / 1e9
        speeds = {}
        for method in ("beam", "greedy"):
            translator = Translator(model, sp, sp, DecodeConfig(method=method, beam_size=5), device, bf16)
            tick = time.perf_counter()
            translate_lines(translator, test_src)
            speeds[method] = len(test_src) / (time.perf_counter() - tick)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"| {args.arch} | {args.preset} | {model.n_parameters()} | {bf16} | {rate:.0f} | "
            f"{100 * gflops / peak:.0f}% | {speeds['beam']:.1f} | {speeds['greedy']:.1f} | {rss:.0f} |"
        )
    for profile in profiles:
        print(profile)


if __name__ == "__main__":
    main()
