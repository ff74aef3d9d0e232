"""Command line: ``translate`` (``python -m nmt translate --model DIR <src >hyp``), ``score``, ``subword``,
``binarize``, ``train``, ``export``.

``train`` is what the workflow runs under ``torchrun`` for data-parallel training; it works on its
own too, also under ``srun torchrun ...`` across nodes.
"""

import argparse
import json
import os
import signal
import sys
from contextlib import nullcontext
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import get_args

from nmt.config import AUTO_WORKERS, DecodeConfig, from_dict
from nmt.entry import entry_point
from nmt.errors import ConfigError, DataError
from nmt.training.files import TrainFiles


def decode_config(args: argparse.Namespace) -> DecodeConfig:
    """The search of ``translate``'s options. Without ``--method`` it is the config's default (beam), or greedy
    search in CTranslate2 (``--runtime ctranslate2``, or ``auto`` on an export, which runs there only), whose beam
    search is GNMT's only with ``--length-normalization ctranslate2`` (it normalises by ``length ** alpha``)."""
    from nmt.model_dir import EXPORT_FILE

    export = any((Path(model) / EXPORT_FILE).is_file() for model in args.model)
    in_ctranslate2 = args.runtime == "ctranslate2" or (args.runtime == "auto" and export)
    method = args.method or ("greedy" if in_ctranslate2 else DecodeConfig.method)
    return from_dict(
        DecodeConfig,
        {
            "method": method,
            "beam_size": args.beam_size,
            "length_penalty": args.length_penalty,
            "sampling_topk": args.sampling_topk,
            "seed": args.seed,
            "max_len_a": args.max_len_a,
            "max_len_b": args.max_len_b,
            "batch_size": args.batch_size,
            "runtime": args.runtime,
            "eos_at_limit": args.eos_at_limit,
            "length_normalization": args.length_normalization,
            "quantization": args.quantization,
        },
        "translate",
    )


def translate(args: argparse.Namespace) -> None:
    from nmt.allocator import keep_freed_memory
    from nmt.atomic import atomic_text, check_apart, check_file_outputs
    from nmt.decoding.streaming import check_source, read_source, translate_windows
    from nmt.decoding.translation import load_decoding
    from nmt.model_dir import input_tag, normalize_input, with_tag

    config = decode_config(args)
    if args.src_lang and args.src_lang == args.trg_lang:
        raise ConfigError(
            f"translate: --src-lang and --trg-lang are both '{args.src_lang}'; a model translates between two"
        )
    if args.nbest is not None and (config.method != "beam" or args.nbest > config.beam_size):
        raise ConfigError(f"translate: --nbest {args.nbest} needs --method beam and --beam-size >= {args.nbest}")
    if args.input is None and sys.stdin is None:
        raise DataError("stdin is closed: pipe the source text in, e.g. python -m nmt translate --model DIR < src")
    name = str(check_source(args.input, pipes=True)) if args.input else "stdin"
    check_file_outputs(args.output)
    check_apart([args.output], [args.input, *args.model])
    tag = input_tag(args.model[0], args.trg_lang)  # a multilingual model's first question, before the source's
    keep_freed_memory(mkl_buffers=False)  # reuse each step's freed tensors instead of faulting pages in
    translator = load_decoding(args.model, config, args.device, args.bf16, threads=args.threads, workers=args.workers)
    source = open(args.input, "rb") if args.input else nullcontext(sys.stdin.buffer)
    output = atomic_text(args.output) if args.output else nullcontext(sys.stdout)
    with source as src, output as out:
        # as cleaning normalized the training sources (the first model's meta.json)
        lines = normalize_input(args.model[0], read_source(src, name), args.src_lang)
        lines = with_tag(lines, tag)  # a multilingual model's target-language tag
        first_line = 1
        for hyps in translate_windows(translator, lines, name, args.window, args.nbest):
            if args.nbest is None:
                out.writelines(hyp + "\n" for hyp in hyps)
            else:
                out.writelines(
                    f"{first_line + i}\t{hyp}\t{score:.4f}\t{logprob:.4f}\n"
                    for i, nbest in enumerate(hyps)
                    for hyp, score, logprob in nbest
                )
            first_line += len(hyps)
            out.flush()  # a closed pipe shows here, inside main(), not at interpreter exit


def score(args: argparse.Namespace) -> None:
    from nmt.evaluation.metrics import score_files

    for option, files in (("--hyp", args.hyp), ("--ref", args.ref)):
        if len(files) > 1:
            raise ConfigError(f"score: {option} given {len(files)} times ({', '.join(files)}); give one file")
    scores = score_files(args.hyp[0], args.ref[0], args.trg_lang)
    if args.json:
        print(json.dumps(scores, indent=2))
        return
    for name, value in scores.items():
        print(f"{name}\t{value['score']:.2f}\t{value['signature']}")


def train_files(args: argparse.Namespace) -> TrainFiles:
    """The files of ``train``'s options (those :meth:`TrainFiles.options` writes)."""
    if (args.train_data is None) == (args.train_src is None or args.train_trg is None):
        raise ConfigError("train: give either --train-data PREFIX or both --train-src FILE... and --train-trg FILE...")
    data = args.train_data or (args.train_src, args.train_trg)
    return TrainFiles(data, args.dev_src, args.dev_ref, args.src_spm, args.trg_spm, args.model_dir)


def train(args: argparse.Namespace) -> None:
    from nmt.allocator import keep_freed_memory
    from nmt.config import TrainConfig
    from nmt.model_config import ModelMeta
    from nmt.training.loop import train as train_model

    config = from_dict(TrainConfig, args.training, "--training")
    meta = from_dict(ModelMeta, args.meta, "--meta") if args.meta else None
    files = train_files(args)
    keep_freed_memory()  # reuse each update's freed tensors instead of faulting pages in
    train_model(args.model_options, config, files, meta=meta)


def subword(args: argparse.Namespace) -> None:
    from nmt.atomic import check_apart, check_file_outputs, check_utf8
    from nmt.config import SubwordConfig
    from nmt.data.subword import train_subword

    config = from_dict(SubwordConfig, args.subword, "--subword")
    check_file_outputs(args.src_spm, args.trg_spm)
    check_apart([args.src_spm, args.trg_spm], [*args.src, *args.trg])
    for path in filter(os.path.isfile, [*args.src, *args.trg]):  # sentencepiece learns from any bytes
        check_utf8(path)
    train_subword(args.src, args.trg, args.src_spm, args.trg_spm, config, args.threads)


def binarize(args: argparse.Namespace) -> None:
    from nmt.data.binarize import binarize as binarize_files

    binarize_files(args.src, args.trg, args.src_spm, args.trg_spm, args.out, args.max_length, args.threads)


def export(args: argparse.Namespace) -> None:
    from nmt.atomic import check_apart
    from nmt.decoding.ctranslate2 import export_model

    check_apart([args.out], [args.model_dir])
    print(export_model(args.model_dir, args.out, args.quantization, args.force))


def json_mapping(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e})") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from e
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``prog: error: ...``), like every other error of the command line.

    Help texts show the defaults (of every subcommand too: the subparsers are of this class).
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def main(argv: list[str] | None = None) -> None:
    """Run a command; errors of the input are one line on stderr, a closed output pipe ends quietly (141).

    The usage names the command as it was typed: ``nmt`` for the console script, else ``python -m nmt``.
    """
    prog = "nmt" if Path(sys.argv[0]).name == "nmt" else "python -m nmt"
    previous = signal.signal(signal.SIGTERM, _terminate)  # a training sets its own while it trains (it saves)
    try:
        run(argv, prog)
    except BrokenPipeError:  # e.g. `... | head -1`: stop like other Unix tools, without a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit would fail again otherwise
        sys.exit(141)  # 128 + SIGPIPE, what a shell reports for a tool killed by the closed pipe
    except KeyboardInterrupt:
        sys.exit(130)  # 128 + SIGINT
    except Terminated:
        sys.exit(143)  # 128 + SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


class Terminated(BaseException):
    """SIGTERM (``kill``, ``timeout``) as an exception, so that outputs being written are removed as on Ctrl-C."""


def _terminate(signum, frame) -> None:
    raise Terminated


def package_version() -> str:
    try:
        return version("nmt")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown (not installed)"


def run(argv: list[str] | None = None, prog: str = "python -m nmt") -> None:
    args = build_parser(prog).parse_args(argv)
    with entry_point(getattr(args, "log_file", None)):
        args.run(args)


def build_parser(prog: str = "python -m nmt") -> argparse.ArgumentParser:
    """The command line: one subcommand per function above, with the options its ``add_*_command`` below gives."""
    parser = Parser(prog=prog, description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_translate_command(commands)
    add_score_command(commands)
    add_subword_command(commands)
    add_train_command(commands)
    add_binarize_command(commands)
    add_export_command(commands)
    return parser


Commands = argparse._SubParsersAction  # what add_subparsers returns: add_parser makes a subcommand


def add_search_options(p: argparse.ArgumentParser) -> None:
    """The search's options of ``translate``, with the defaults of a decoding config (one home: nmt.config)."""
    search = DecodeConfig()
    # None: decode_config picks it by the runtime; %(default).0s prints nothing where argparse would print None.
    p.add_argument(
        "--method",
        default=None,
        choices=decoding_choices("method"),
        help=f"search (default: {search.method}; greedy with --runtime ctranslate2)%(default).0s",
    )
    p.add_argument("--beam-size", type=positive_int, default=search.beam_size, help="beam: hypotheses kept per step")
    p.add_argument(
        "--length-penalty",
        type=float,
        default=search.length_penalty,
        help="beam: exponent alpha of ((5 + |Y|) / 6)^alpha",
    )
    p.add_argument(
        "--sampling-topk", type=int, default=search.sampling_topk, help="sample: among the k best tokens (0: all)"
    )
    p.add_argument("--seed", type=int, default=search.seed, help="sample: random seed")
    p.add_argument("--max-len-a", type=float, default=search.max_len_a, help="output limit a * S + b subwords")
    p.add_argument("--max-len-b", type=int, default=search.max_len_b, help="(S: source subwords, EOS included)")
    p.add_argument(
        "--eos-at-limit",
        default=search.eos_at_limit,
        choices=decoding_choices("eos_at_limit"),
        help="beam: the EOS forced at the output limit adds its log-probability (charged, as fairseq does) or "
        "nothing (free, as CTranslate2, to compare with it)",
    )
    p.add_argument(
        "--length-normalization",
        default=search.length_normalization,
        choices=decoding_choices("length_normalization"),
        help="beam: divide by ((5 + |Y|) / 6)^alpha (gnmt) or by |Y|^alpha with CTranslate2's rules (ctranslate2), "
        "which --runtime ctranslate2 runs too",
    )


def decoding_choices(key: str) -> list[str]:
    """The values of a ``decoding`` key, as :class:`nmt.config.DecodeConfig` declares them (one home)."""
    return list(get_args(DecodeConfig.__annotations__[key]))


def add_translate_command(commands: Commands) -> None:
    """``translate``: its search defaults come from :class:`DecodeConfig`."""
    p = commands.add_parser("translate", help="translate text (stdin or --input) with a trained model directory")
    p.add_argument(
        "--model",
        required=True,
        action="append",
        help="model directory (model.pt, src.model, trg.model); repeat it to decode with an ensemble; "
        "with --runtime ctranslate2 also a CTranslate2 export (nmt export)",
    )
    p.add_argument(
        "--trg-lang",
        help="a multilingual model's target language: its tag (meta.json) starts every source, e.g. de for <2de>",
    )
    p.add_argument(
        "--src-lang",
        help="the source language whose normalization the input gets, for a model from several (multilingual)",
    )
    add_search_options(p)
    p.add_argument("--batch-size", type=positive_int, default=DecodeConfig.batch_size, help="sentences per batch")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: CUDA if available")
    p.add_argument(
        "--threads",
        type=positive_int,
        help="CPU threads of the search (default: OMP_NUM_THREADS if set, else the CPUs this process may use, "
        "which taskset -c narrows); beside a busy process give fewer, e.g. --threads 1%(default).0s",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        help="CPU: batches searched at once, each by its share of the threads "
        f"(default: greedy one per thread, at most {AUTO_WORKERS}; beam 1; sample always 1)%(default).0s",
    )
    p.add_argument(
        "--bf16",
        nargs="?",
        const="on",
        default="auto",
        choices=["auto", "on", "off"],
        help="bfloat16 weights (float16 autocast on GPUs without bfloat16); auto: on CUDA only; --bf16 alone: on",
    )
    p.add_argument(
        "--runtime",
        default=DecodeConfig.runtime,
        choices=decoding_choices("runtime"),
        help="ctranslate2: search in CTranslate2 (greedy, sample, or beam with --length-normalization ctranslate2), "
        "on a CTranslate2 export or on an export of the model directory made at start-up (float32 output equals "
        "torch's); auto: CTranslate2 where it is installed and runs the search over the models, else torch",
    )
    p.add_argument(
        "--quantization",
        default=DecodeConfig.quantization,
        choices=decoding_choices("quantization"),
        help="CTranslate2: the weights of the export made at start-up (int8: faster, not float32's output)",
    )
    p.add_argument(
        "--nbest",
        type=positive_int,
        help="beam search: print the N best as LINE<TAB>HYP<TAB>SCORE<TAB>LOGPROB lines, best first "
        "(SCORE: LOGPROB / length penalty, what the beam ranks by)",
    )
    p.add_argument("--input", help="read this file instead of stdin")
    p.add_argument("--output", help="write this file (a temp file renamed at the end) instead of stdout")
    p.add_argument(
        "--window",
        type=positive_int,
        default=1000,
        help="lines read, sorted by length, translated and written (flushed) together; 1 answers each line "
        "before reading the next (interactive)",
    )
    p.set_defaults(run=translate)


def add_score_command(commands: Commands) -> None:
    p = commands.add_parser("score", help="BLEU, chrF and TER of a hypothesis file against a reference file")
    p.add_argument("--hyp", required=True, action="append")
    p.add_argument("--ref", required=True, action="append", help="one reference file (given once)")
    p.add_argument("--trg-lang", default="", help="target language (picks the BLEU tokenizer, e.g. zh, ja)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=score)


def add_subword_command(commands: Commands) -> None:
    p = commands.add_parser("subword", help="learn the source and target sentencepiece models (with nmt's special ids)")
    p.add_argument("--src", required=True, nargs="+", help="source text files")
    p.add_argument("--trg", required=True, nargs="+", help="target text files")
    p.add_argument("--src-spm", required=True, help="output: the source sentencepiece model")
    p.add_argument("--trg-spm", required=True, help="output: the target model (a copy of the source one when joint)")
    p.add_argument("--subword", default={}, type=json_mapping, help="subword keys as JSON (config.yaml's subword)")
    p.add_argument("--threads", type=positive_int, default=1, help="sentencepiece trainer threads")
    p.add_argument("--log-file", help="append the log to this file (default: stderr)")
    p.set_defaults(run=subword)


def add_train_command(commands: Commands) -> None:
    """``train``: the files are :class:`TrainFiles`' fields (``--dev-src``: ``dev_src``), as its ``options`` writes."""
    p = commands.add_parser("train", help="train a model into a directory (data parallel under torchrun)")
    p.add_argument("--model-options", required=True, type=json_mapping, help='e.g. {"arch": "transformer"}')
    p.add_argument("--training", default={}, type=json_mapping, help="training keys as JSON (config.yaml's training)")
    p.add_argument("--train-data", help="prefix of a binarized training set (python -m nmt binarize)")
    p.add_argument("--train-src", nargs="+", help="or: source text files, binarized into MODEL_DIR/train at each start")
    p.add_argument("--train-trg", nargs="+", help="and the target text files aligned with them")
    p.add_argument("--dev-src", required=True, help="source side of the dev set (validation)")
    p.add_argument("--dev-ref", required=True, help="reference translations of the dev set")
    p.add_argument("--src-spm", required=True, help="source sentencepiece model (python -m nmt subword)")
    p.add_argument("--trg-spm", required=True, help="target sentencepiece model")
    p.add_argument("--model-dir", required=True, help="the model directory to write (resumes its checkpoints)")
    p.add_argument(
        "--meta", type=json_mapping, help="languages and normalization for meta.json (nmt.model_config.ModelMeta)"
    )
    p.add_argument("--log-file", help="append the log to this file (default: stderr)")
    p.set_defaults(run=train)


def add_binarize_command(commands: Commands) -> None:
    p = commands.add_parser("binarize", help="encode aligned text files once into memory-mapped training data")
    p.add_argument("--src", required=True, nargs="+", help="source text files")
    p.add_argument("--trg", required=True, nargs="+", help="target text files, aligned with --src one by one")
    p.add_argument("--src-spm", required=True, help="source sentencepiece model")
    p.add_argument("--trg-spm", required=True, help="target sentencepiece model")
    p.add_argument("--out", required=True, help="output prefix: writes OUT.json, OUT.{src,trg}.{ids,offsets}")
    p.add_argument("--max-length", type=int, help="drop pairs longer than this many subwords (EOS included)")
    p.add_argument("--threads", type=int, default=1, help="sentencepiece encoding threads")
    p.add_argument("--log-file", help="append the log to this file (default: stderr)")
    p.set_defaults(run=binarize)


def add_export_command(commands: Commands) -> None:
    p = commands.add_parser("export", help="convert a Transformer model directory for CTranslate2")
    p.add_argument("--quantization", help="CTranslate2 weight type, e.g. int8 or float16; none given: float32")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("model_dir", help="model directory (model.pt, src.model, trg.model)")
    p.add_argument("out", help="output directory of the CTranslate2 model")
    p.set_defaults(run=export)


if __name__ == "__main__":
    main()
