"""Search quality of trained models: how often beam search scores below greedy, BLEU and decoding time.

    python benchmarks/search_quality.py --model results/en-de/transformer/baseline/seed1/model \\
        --src data/eval/test.en --ref data/eval/test.de --trg-lang de --limit 500 --threads 2
    python benchmarks/search_quality.py --memorise

For every model and every beam size (1, 5, 10) and length penalty (0, 0.6, 1.0) it prints the share
of sentences whose beam hypothesis has a lower model score (sum of log-probabilities, with EOS) than
the greedy one, unnormalised and normalised by that length penalty, BLEU (sacreBLEU, tokenizer of
the target language) and the decoding time; then beam 5 (length penalty 1) with the exact stopping
rule against fairseq's K-finished rule and a search to the length limit. ``--memorise`` trains a
tiny RNN to memorise 200 random sentence pairs and reports how often beam 5 scores below greedy
under each stopping rule (the case where the K-finished rule errs most).
"""

import argparse
import time
from functools import partial

import torch
import torch.nn.functional as F

from nmt.atomic import read_lines
from nmt.data.batches import pad
from nmt.decoding.beam import beam_search, length_penalty
from nmt.decoding.search import greedy_search
from nmt.device import get_device
from nmt.evaluation.metrics import score_metric
from nmt.model_dir import load_model
from nmt.models.seq2seq import build_model
from nmt.vocab import BOS, EOS

BEAMS, ALPHAS = (1, 5, 10), (0.0, 0.6, 1.0)


def decode(model, src_ids: list[list[int]], search, batch_size: int) -> tuple[list[list[int]], float]:
    """Output ids of ``search(model, src)`` for every sentence, in input order, and the seconds it took."""
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    hyps: list[list[int]] = [[] for _ in src_ids]
    tick = time.perf_counter()
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        for i, hyp in zip(chunk, search(model, pad([src_ids[i] for i in chunk])), strict=True):
            hyps[i] = hyp
    return hyps, time.perf_counter() - tick


@torch.no_grad()
def model_scores(model, src_ids: list[list[int]], hyps: list[list[int]], batch_size: int) -> list[float]:
    """Sum of the log-probabilities of every ``hyp`` + EOS given its source, by teacher forcing."""
    scores = []
    for start in range(0, len(src_ids), batch_size):
        src = pad(src_ids[start : start + batch_size])
        trg = [hyp + [EOS] for hyp in hyps[start : start + batch_size]]
        trg_in, trg_out = pad([[BOS] + t[:-1] for t in trg]), pad(trg)
        lprobs = F.log_softmax(model(src, trg_in).float(), dim=-1)  # (B, T, V)
        token = lprobs.gather(2, trg_out[:, :, None])[:, :, 0].masked_fill(trg_out == 0, 0.0)
        scores += token.sum(dim=1).tolist()
    return scores


def share_below(scores: list[float], lengths: list[int], ref_scores: list[float], ref_lengths: list[int], alpha):
    """Percent of sentences whose score (normalised by ``alpha``; None: raw) is below the reference's."""

    def norm(score, length):
        return score if alpha is None else score / length_penalty(length + 1, alpha)

    below = sum(
        norm(s, n) < norm(r, m) - 1e-5 for s, n, r, m in zip(scores, lengths, ref_scores, ref_lengths, strict=True)
    )
    return 100.0 * below / max(len(scores), 1)


def report_model(model_dir: str, src_lines: list[str], refs: list[str], trg_lang: str, batch_size: int) -> None:
    model, src_sp, trg_sp = load_model(model_dir, get_device("cpu"))
    src_ids = [p + [EOS] for p in src_sp.encode(src_lines)]
    greedy, greedy_s = decode(model, src_ids, greedy_search, batch_size)
    g_scores, g_lengths = model_scores(model, src_ids, greedy, batch_size), [len(h) for h in greedy]
    bleu = score_metric("bleu", trg_sp.decode(greedy), refs, trg_lang)[0]
    print(f"\n## {model_dir} ({len(src_ids)} sentences)\n")
    print("| search | alpha | beam < greedy, raw % | beam < greedy, normalised % | BLEU | decode s |")
    print("|---|---|---|---|---|---|")
    print(f"| greedy | - | - | - | {bleu:.2f} | {greedy_s:.1f} |")
    for K in BEAMS:
        for alpha in ALPHAS:
            hyps, seconds = decode(model, src_ids, partial(beam_search, beam_size=K, alpha=alpha), batch_size)
            scores, lengths = model_scores(model, src_ids, hyps, batch_size), [len(h) for h in hyps]
            raw = share_below(scores, lengths, g_scores, g_lengths, None)
            normalised = share_below(scores, lengths, g_scores, g_lengths, alpha)
            bleu = score_metric("bleu", trg_sp.decode(hyps), refs, trg_lang)[0]
            print(f"| beam {K} | {alpha} | {raw:.1f} | {normalised:.1f} | {bleu:.2f} | {seconds:.1f} |")
    print("\nBeam 5, length penalty 1, by stopping rule:\n")
    print("| stop | decode s | BLEU | worse than exact (normalised) % |")
    print("|---|---|---|---|")
    results = {}
    for stop in ("exact", "first_k", "never"):
        hyps, seconds = decode(model, src_ids, partial(beam_search, beam_size=5, alpha=1.0, stop=stop), batch_size)
        results[stop] = (model_scores(model, src_ids, hyps, batch_size), [len(h) for h in hyps])
        worse = share_below(*results[stop], *results["exact"], 1.0)
        bleu = score_metric("bleu", trg_sp.decode(hyps), refs, trg_lang)[0]
        print(f"| {stop} | {seconds:.1f} | {bleu:.2f} | {worse:.1f} |")


def memorise(n_pairs: int = 200, vocab: int = 40, steps: int = 600, seed: int = 1) -> None:
    """Train a tiny RNN to memorise random pairs; count beam-5 results scoring below greedy per stopping rule."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)

    def sentence(low: int, high: int) -> list[int]:
        return torch.randint(4, vocab, (int(torch.randint(low, high + 1, (1,), generator=g)),), generator=g).tolist()

    src_ids = [sentence(3, 8) + [EOS] for _ in range(n_pairs)]
    trg = [sentence(3, 10) for _ in range(n_pairs)]
    model = build_model({"arch": "rnn", "size": "tiny", "dropout": 0.0}, vocab, vocab, True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    src, trg_in, trg_out = pad(src_ids), pad([[BOS] + t for t in trg]), pad([t + [EOS] for t in trg])
    tick = time.perf_counter()
    for _ in range(steps):
        logits = model(src, trg_in)
        loss = F.cross_entropy(logits.flatten(0, 1), trg_out.flatten(), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    print(f"\n## memorisation: tiny RNN, {n_pairs} random pairs, {steps} full-batch steps "
          f"({time.perf_counter() - tick:.0f} s), final loss {loss.item():.3f}\n")  # fmt: skip
    greedy, _ = decode(model, src_ids, greedy_search, 64)
    g_scores = model_scores(model, src_ids, greedy, 64)
    exact_matches = sum(h == t for h, t in zip(greedy, trg, strict=True))
    print(f"greedy reproduces {exact_matches} of {n_pairs} targets\n")
    print("| stop | alpha | beam 5 < greedy, raw (sentences) | beam 5 < greedy, normalised (sentences) | decode s |")
    print("|---|---|---|---|---|")
    for alpha in (0.0, 1.0):
        for stop in ("first_k", "exact", "never"):
            hyps, seconds = decode(model, src_ids, partial(beam_search, beam_size=5, alpha=alpha, stop=stop), 64)
            scores, lengths = model_scores(model, src_ids, hyps, 64), [len(h) for h in hyps]
            g_lengths = [len(h) for h in greedy]
            raw = round(share_below(scores, lengths, g_scores, g_lengths, None) * n_pairs / 100)
            normalised = round(share_below(scores, lengths, g_scores, g_lengths, alpha) * n_pairs / 100)
            print(f"| {stop} | {alpha} | {raw} | {normalised} | {seconds:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", default=[], help="trained model directory (repeatable)")
    parser.add_argument("--src", help="test source file")
    parser.add_argument("--ref", help="test reference file")
    parser.add_argument("--trg-lang", default="", help="target language (picks the BLEU tokenizer)")
    parser.add_argument("--limit", type=int, default=0, help="first N sentences only (0: all)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--memorise", action="store_true", help="also run the memorisation demonstration")
    args = parser.parse_args()
    if args.model and not (args.src and args.ref):
        parser.error("--model needs --src and --ref")
    if not args.model and not args.memorise:
        parser.error("give --model (with --src and --ref) or --memorise")
    if args.threads:
        torch.set_num_threads(args.threads)
    src_lines, refs = (read_lines(args.src), read_lines(args.ref)) if args.model else ([], [])
    if args.limit:
        src_lines, refs = src_lines[: args.limit], refs[: args.limit]
    print(f"# Search quality ({torch.get_num_threads()} threads)")
    for model_dir in args.model:
        report_model(model_dir, src_lines, refs, args.trg_lang, args.batch_size)
    if args.memorise:
        memorise()


if __name__ == "__main__":
    main()
