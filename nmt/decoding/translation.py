"""Translate lists of sentences with a :class:`Translator`: a model with its subword models and search settings.

What every runtime shares is here: encoding, cutting, sorting and batching the lines, and decoding the outputs
(streams and files of any length: :mod:`nmt.decoding.streaming`). The search is a :data:`Search`:
:func:`torch_search` in torch, or :func:`nmt.decoding.ctranslate2.ct2_search` in CTranslate2. torch is imported by
the functions of the torch runtime only, so that a CTranslate2 decoding process never loads it (:func:`load_decoding`).
"""

import itertools
import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import sentencepiece as spm

from nmt.config import AUTO_WORKERS, DecodeConfig
from nmt.errors import MAX_WARNINGS, ConfigError, brief_list
from nmt.vocab import EOS

if TYPE_CHECKING:
    import torch

    from nmt.decoding.ctranslate2 import CTranslate2Model
    from nmt.models.seq2seq import DecodingModel

log = logging.getLogger(__name__)


def position_limit(model: "DecodingModel | CTranslate2Model") -> int | None:
    """The longest sequence (source with EOS, or output with EOS) the model can represent.

    That is ``max_positions`` for the Transformer and ConvS2S (the smallest one in an ensemble);
    an RNN has no limit (None).
    """
    members = getattr(model, "members", [model])
    limits = [m.spec["config"]["max_positions"] for m in members if "max_positions" in m.spec["config"]]
    return min(limits, default=None)


def encode_sources(
    sp: spm.SentencePieceProcessor, lines: list[str], limit: int | None, name: str, first_line: int
) -> list[list[int]]:
    """Subword ids of ``lines`` with EOS, each cut to ``limit`` ids (EOS kept) with a warning naming the line."""
    ids = [p + [EOS] for p in sp.encode(lines)]
    if limit is None:
        return ids
    long = [i for i, x in enumerate(ids) if len(x) > limit]
    for i in long[:MAX_WARNINGS]:
        log.warning("%s line %d: %d subwords, cut to the model's limit of %d", name, first_line + i, len(ids[i]), limit)
    if len(long) > 1:
        what = "%s: %d lines longer than the model's limit of %d subwords were cut: lines %s"
        log.warning(what, name, len(long), limit, brief_list([first_line + i for i in long]))
    for i in long:
        ids[i] = ids[i][: limit - 1] + [EOS]
    return ids


def length_limits(src_len: int, config: DecodeConfig, limit: int | None) -> tuple[float, int]:
    """``(a, b)`` of the output limit ``a * S + b`` for a source of ``src_len`` ids, clamped to ``limit``.

    Output positions run up to the limit, so ``a * S + b`` may not pass ``max_positions``; where it
    would, ``(0, limit)`` is the clamped limit (a 700-word line must not end the file in an error).
    """
    if limit is not None and config.max_len_a * src_len + config.max_len_b > limit:
        return 0.0, limit
    return config.max_len_a, config.max_len_b


def output_limit(src_len: int, max_len_a: float, max_len_b: int) -> int:
    """The most output ids, EOS included, for a source of ``src_len`` ids with EOS: ``a * S + b``, at least 1 (as
    :func:`nmt.decoding.search.max_output_lengths`; CTranslate2's output is cut to it too)."""
    return max(1, int(src_len * max_len_a + max_len_b))


class LimitCount:
    """How many of the outputs of a translation stopped at their length limit (as long as :func:`output_limit`
    allows: EOS forced there, or chosen at the last step), which is how an output cut short or looping looks."""

    def __init__(self) -> None:
        self.outputs = self.at_limit = 0

    def add(self, hyps: list[list[int]], limits: list[int]) -> None:
        """Count the ``hyps`` (output ids without EOS) that reach their ``limits`` (with EOS)."""
        self.at_limit += sum(len(hyp) + 1 >= limit for hyp, limit in zip(hyps, limits, strict=True))

    def log(self, name: str, config: DecodeConfig) -> None:
        """One INFO line: how many of the outputs stopped at the limit, and which setting raises it."""
        advice = "; if they are cut short, raise decoding.max_len_b (--max-len-b)" if self.at_limit else ""
        log.info(
            "%s: %s of %s outputs stopped at the length limit max_len_a * S + max_len_b = %g * S + %d subwords%s",
            name,
            f"{self.at_limit:,}",
            f"{self.outputs:,}",
            config.max_len_a,
            config.max_len_b,
            advice,
        )


class SourceBatch(NamedTuple):
    """Sources (subword ids, each ending with EOS) searched together within the output limit ``a * S + b``."""

    src: list[list[int]]
    max_len_a: float
    max_len_b: int


def _batches(ids: list[list[int]], config: DecodeConfig, limit: int | None) -> Iterator[tuple[list[int], float, int]]:
    """Batches of line indices (the non-empty lines, sorted by length) with the ``(a, b)`` of their output limit."""
    order = sorted((i for i in range(len(ids)) if len(ids[i]) > 1), key=lambda i: len(ids[i]))
    for start in range(0, len(order), config.batch_size):
        batch = order[start : start + config.batch_size]
        # A clamped limit holds for the longest sentences only: give them batches of their own.
        groups = itertools.groupby(batch, key=lambda i: length_limits(len(ids[i]), config, limit))
        for (max_len_a, max_len_b), chunk in groups:
            yield list(chunk), max_len_a, max_len_b


# A search over the batches of one window: what it finds for each batch, in their order (a list per sentence).
Search = Callable[[list[SourceBatch]], Iterator[list]]


@dataclass(frozen=True)
class Translator:
    """What every translation with a model shares: the model, its subword models and the search settings.

    :func:`load_decoding` loads one from model directories (or a CTranslate2 export); a model in memory (a test's,
    training's validation) makes one with the defaults: the torch runtime's search in the calling thread.
    """

    model: "DecodingModel | CTranslate2Model"  # a Seq2Seq, an Ensemble of them, or CTranslate2's (its runtime)
    src_sp: spm.SentencePieceProcessor
    trg_sp: spm.SentencePieceProcessor
    config: DecodeConfig
    device: "torch.device | None" = None  # torch's; None for CTranslate2, whose model holds its device
    bf16: str = "auto"  # torch: the precision setting (auto, on, off) of autocast (nmt.device.autocast)
    threads: int = 1  # torch on the CPU: the process's computing threads, shared by the workers (1 on a GPU)
    workers: int | None = None  # torch on the CPU: batches searched at once (None: torch_search's default)

    def new_search(self, nbest: int | None = None) -> Search:
        """The search of the model's runtime, with a random generator seeded anew with ``config.seed``:
        :func:`torch_search`, or :func:`nmt.decoding.ctranslate2.ct2_search` (with ``nbest``: beam search's n-best
        lists)."""
        translator = getattr(self.model, "translator", None)  # CTranslate2's
        if translator is not None:
            from nmt.decoding.ctranslate2 import ct2_search

            return ct2_search(translator, self.src_sp, self.trg_sp, self.config, nbest)
        return torch_search(self, nbest)


def search_lines(
    translator: Translator,
    lines: list[str],
    search: Search,
    name: str = "input",
    first_line: int = 1,
    progress: Callable[[int], None] | None = None,
) -> Iterator[tuple[list[int], list[int], list]]:
    """The setup that :func:`translate_lines` and :func:`translate_nbest` share: yield, batch by batch,
    the indices of its lines, their :func:`output_limit` and what ``search`` finds for them.

    The model is in eval mode meanwhile. Lines are encoded and cut to the model's :func:`position_limit`
    (:func:`encode_sources`) and sorted by length into batches (:func:`_batches`); empty lines are
    never searched. ``progress`` is called with the number of empty lines first, then after each batch.
    """
    model, config = translator.model, translator.config
    was_training = model.training
    model.eval()
    try:
        limit = position_limit(model)
        ids = encode_sources(translator.src_sp, lines, limit, name, first_line)
        if progress:
            progress(sum(len(x) <= 1 for x in ids))  # the empty lines
        batches = list(_batches(ids, config, limit))
        found = search([SourceBatch([ids[i] for i in chunk], a, b) for chunk, a, b in batches])
        for (chunk, a, b), out in zip(batches, found, strict=True):
            yield chunk, [output_limit(len(ids[i]), a, b) for i in chunk], out
            if progress:
                progress(len(chunk))
    finally:
        model.train(was_training)


def torch_search(translator: Translator, nbest: int | None = None) -> Search:
    """``config.method``'s search over the translator's model in torch, on padded batches (B, S) on its device under
    autocast, or with ``nbest`` the n-best lists of beam search. Sampling draws from a generator seeded with
    ``config.seed``, which goes on from one call to the next (one search per file:
    :func:`nmt.decoding.streaming.translate_windows`).

    The translator's ``threads`` (the process's CPU threads; 1 on a GPU) are split among its ``workers`` threads,
    each searching a batch of the window with its share of torch's threads; never more workers than threads or than
    the window has batches. A search step's small operators and its matrix products of a few rows keep one core busy
    better than they split over two, and each worker holds one batch's search in memory (benchmarks/README.md,
    "What made it faster"). So by default greedy search runs one worker per thread (at most
    :data:`nmt.config.AUTO_WORKERS`), and beam search, whose batch holds K hypotheses per sentence, one batch at a
    time. Sampling, so that its draws follow the batches' order, and the n-best lists always take one batch at a time.
    """
    import torch

    from nmt.data.batches import pad
    from nmt.decoding.beam import beam_search, beam_search_nbest
    from nmt.decoding.search import greedy_search, sample_search
    from nmt.device import autocast

    model, config, device, bf16 = translator.model, translator.config, translator.device, translator.bf16
    threads, workers = translator.threads, translator.workers
    generator = torch.Generator(device=device).manual_seed(config.seed)
    beam = {"beam_size": config.beam_size, "alpha": config.length_penalty, "eos_at_limit": config.eos_at_limit}
    beam["normalization"] = config.length_normalization

    @torch.no_grad()
    def search_batch(batch: SourceBatch) -> list:
        src = pad(batch.src).to(device)
        a, b = batch.max_len_a, batch.max_len_b
        with autocast(device, bf16):
            if nbest is not None:
                return beam_search_nbest(model, src, max_len_a=a, max_len_b=b, nbest=nbest, **beam)
            if config.method == "greedy":
                return greedy_search(model, src, a, b)
            if config.method == "sample":
                return sample_search(model, src, config.sampling_topk, generator, a, b)
            return beam_search(model, src, max_len_a=a, max_len_b=b, **beam)

    if config.method == "sample" or nbest is not None:
        most = 1
    else:
        most = min(threads, workers or (AUTO_WORKERS if config.method == "greedy" else 1))

    def search(batches: list[SourceBatch]) -> Iterator[list]:
        n = min(most, len(batches))
        if n <= 1:
            yield from map(search_batch, batches)
            return
        try:  # each worker sets its own threads: OpenMP's and MKL's settings are per thread
            yield from in_threads(search_batch, batches, n, start=lambda: torch.set_num_threads(threads // n))
        finally:
            torch.set_num_threads(threads)  # and torch's default for new threads, which the workers set

    return search


def in_threads(fn: Callable, items: Iterable, workers: int, start: Callable[[], object] | None = None) -> Iterator:
    """``map(fn, items)`` run by ``workers`` threads, each of which first calls ``start``: results in the order of
    ``items``, with at most ``workers`` items started ahead of the one awaited (bounded memory). Items not started
    yet when the caller stops or an item fails are never run."""
    with ThreadPoolExecutor(workers, thread_name_prefix="search", initializer=start) as pool:
        pending: deque[Future] = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) > workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def translate_lines(
    translator: Translator,
    lines: list[str],
    name: str = "input",
    first_line: int = 1,
    progress: Callable[[int], None] | None = None,
    search: Search | None = None,
    count: LimitCount | None = None,
) -> list[str]:
    """Translate plain-text ``lines`` into detokenized plain text, one output line per input line, in order.

    Policies: an empty (or all-whitespace) line gives an empty line without running the model; a
    line longer than the model's :func:`position_limit` is cut to it, with a warning naming the line
    (``name`` and ``first_line`` number the lines in warnings).

    Sentences are sorted by length so that each batch holds similar lengths (little padding).
    Without ``search``, sampling draws from a new generator seeded with ``config.seed``
    (:meth:`Translator.new_search`), so the same lines sample the same way twice.

    :param progress: called with the number of lines done after each batch (e.g. :meth:`nmt.progress.Progress.update`)
    :param search: a search to go on with (its generator goes on) instead of a new one
    :param count: adds the outputs that stopped at their length limit to it; without, they are logged
        (:meth:`LimitCount.log`)
    """
    search = search or translator.new_search()
    tally = LimitCount() if count is None else count
    tally.outputs += len(lines)
    hyps = [""] * len(lines)
    for chunk, limits, out in search_lines(translator, lines, search, name, first_line, progress):
        tally.add(out, limits)
        for i, hyp in zip(chunk, out, strict=True):
            hyps[i] = translator.trg_sp.decode(hyp)
    if count is None:
        tally.log(name, translator.config)
    return hyps


def translate_nbest(
    translator: Translator,
    lines: list[str],
    nbest: int,
    name: str = "input",
    first_line: int = 1,
    count: LimitCount | None = None,
) -> list[list[tuple[str, float, float]]]:
    """The ``nbest`` best beam search translations of each line as ``(hyp, score, logprob)``, best first.

    ``score`` is what the beam ranks by: ``logprob`` (the sum of the log-probabilities of the
    output's subwords and EOS) divided by the length penalty. An empty line gives one entry
    ``("", 0.0, 0.0)``; otherwise the policies of :func:`translate_lines` (``count``: of the best translations).
    """
    search = translator.new_search(nbest)
    tally = LimitCount() if count is None else count
    tally.outputs += len(lines)
    result: list[list[tuple[str, float, float]]] = [[("", 0.0, 0.0)] for _ in lines]
    for chunk, limits, out in search_lines(translator, lines, search, name, first_line):
        tally.add([hyps[0][0] if hyps else [] for hyps in out], limits)
        for i, hyps in zip(chunk, out, strict=True):  # (ids, score, logprob) each
            result[i] = [(translator.trg_sp.decode(ids), score, logprob) for ids, score, logprob in hyps]
    if count is None:
        tally.log(name, translator.config)
    return result


def decoding_threads(asked: int | None = None) -> tuple[int, str]:
    """The computing threads of a decoding process, and where the number comes from: ``asked`` (``--threads``, a
    workflow job's threads), else ``OMP_NUM_THREADS`` when it is a number above 0, else the CPUs this process may
    use (its affinity: ``taskset``, a cluster job's cpuset), else every CPU of the machine.

    Not torch's own default: torch sizes its thread pool when it loads, so a process pinned to fewer CPUs later
    (``taskset -p``, ``os.sched_setaffinity``) would still run a thread per CPU of the machine. Threads that share a
    CPU, with each other or with a busy process, wait for each other at every operator, so give fewer there
    (``--threads 1``; docs/cli.md, ``--threads``, has the figures).
    """
    if asked:
        return asked, "asked"
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp), "OMP_NUM_THREADS"
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)), "the CPUs this process may use"
    return os.cpu_count() or 1, "the CPUs of the machine"


def load_decoding(
    model_dirs: list[str | Path],
    config: DecodeConfig,
    device: str = "auto",
    bf16: str = "auto",
    threads: int | None = None,
    workers: int | None = None,
) -> Translator:
    """The :class:`Translator` of ``config.runtime`` (``auto``: :func:`resolve_runtime`): its model with its subword
    models and search settings.

    torch loads model directories (several as an ensemble, :func:`nmt.decoding.ensemble.load_ensemble`) and searches
    with :func:`torch_search`; ctranslate2 loads one CTranslate2 export, or one model directory exported at start-up
    (:func:`nmt.decoding.ctranslate2.load_ctranslate2`), searches with :func:`nmt.decoding.ctranslate2.ct2_search`,
    and does not import torch when it loads an export.

    :param device: ``auto`` (CUDA when there is one), ``cpu`` or ``cuda``
    :param threads: the process's computing threads (torch's intra-op threads, CTranslate2's ``intra_threads``);
        None: :func:`decoding_threads`, the CPUs this process may use unless ``OMP_NUM_THREADS`` says otherwise
    :param workers: torch on the CPU: batches searched at once, each by ``threads / workers`` threads (None: greedy
        search one per thread, at most :data:`nmt.config.AUTO_WORKERS`, other searches 1; see :func:`torch_search`)
    :raises ConfigError: for ctranslate2 with an ensemble, another architecture or GNMT's beam search
    """
    threads, source = decoding_threads(threads)
    if resolve_runtime(model_dirs, config) == "torch":
        import torch

        from nmt.decoding.ensemble import load_ensemble
        from nmt.device import get_device

        torch.set_num_threads(threads)
        dev = get_device(device)
        model, src_sp, trg_sp = load_ensemble(model_dirs, dev, bf16)
        cpu_threads = torch.get_num_threads() if dev.type == "cpu" else 1
        if dev.type == "cpu":
            _log_threads(threads, source)
        return Translator(model, src_sp, trg_sp, config, dev, bf16, cpu_threads, workers)
    from nmt.decoding.ctranslate2 import ct2_device, load_ctranslate2

    # CTranslate2's own default is 4 threads, whatever the machine.
    ct2_dev = ct2_device(device)
    model, src_sp, trg_sp = load_ctranslate2(model_dirs[0], ct2_dev, threads, config.quantization, bf16)
    if ct2_dev == "cpu":
        _log_threads(threads, source)
    return Translator(model, src_sp, trg_sp, config)


def resolve_runtime(model_dirs: list[str | Path], config: DecodeConfig) -> str:
    """The runtime that decodes with ``model_dirs`` (model directories or CTranslate2 exports) and ``config``:
    ``config.runtime``, or for ``auto`` what :func:`nmt.runtime.choose_runtime` picks, logged with the
    reason in one line. An export decodes in CTranslate2 only.

    :raises ConfigError: for ctranslate2 (or an export) where CTranslate2 cannot run the search, as torch does
    """
    from nmt.model_dir import EXPORT_FILE, read_arch
    from nmt.runtime import choose_runtime, ctranslate2_installed, why_not_ctranslate2

    if config.runtime == "torch":
        return "torch"
    archs = [read_arch(model_dir) for model_dir in model_dirs]
    export = next((Path(d) for d in model_dirs if (Path(d) / EXPORT_FILE).is_file()), None)
    why = why_not_ctranslate2(config, archs)
    if export is not None and config.runtime == "auto" and why:
        raise ConfigError(f"{export}: a CTranslate2 export decodes in CTranslate2, which cannot decode {why}")
    runtime, reason = choose_runtime(config, archs, ctranslate2_installed() or export is not None)
    if config.runtime == "auto":
        log.info("runtime auto: %s (%s)", runtime, reason)
    return runtime


def _log_threads(threads: int, source: str) -> None:
    """One INFO line, once the model loaded (an error before it stays the only line): the threads and their source."""
    how = "" if source == "asked" else "; --threads N (or OMP_NUM_THREADS) sets them, e.g. 1 beside a busy process"
    log.info("decoding on %d CPU thread%s (%s%s)", threads, "s" if threads > 1 else "", source, how)


def decoding_record(model: "DecodingModel | CTranslate2Model", device: str = "auto", bf16: str = "auto") -> dict:
    """What decodes with ``model``: the runtime, and the device and precision that the settings ``device`` and
    ``bf16`` (kept beside them) resolved to on this machine. ``auto`` differs from one node to another: CUDA and
    bfloat16 weights where a GPU has them (:func:`nmt.device.mixed_precision`), a CPU and float32 elsewhere; a
    CTranslate2 model says its own device and compute type."""
    settings = {"device_setting": device, "bf16_setting": bf16}
    translator = getattr(model, "translator", None)
    if translator is not None:
        return {"runtime": "ctranslate2", "device": translator.device, "precision": translator.compute_type, **settings}
    from nmt.device import get_device, mixed_precision

    dev = get_device(device)
    dtype = mixed_precision(dev, bf16)
    precision = str(dtype).removeprefix("torch.") if dtype else "float32"
    return {"runtime": "torch", "device": dev.type, "precision": precision, **settings}
