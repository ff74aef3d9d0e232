"""CTranslate2 4.8.5 as a decoding peer: our model and OpenNMT-py's, converted, decode the test set.

CTranslate2 does not train. In each repeat the harness converts the final model of that repeat's ``ours``
run with ``nmt export`` (float32 weights) and, with ``opennmt``, OpenNMT-py's final checkpoint with
``ct2-opennmt-py-converter`` (a different model: a second row, labelled so); conversions are timed on
their own. Each converted model decodes the test pieces once per compute type: ``float32``, and ``int8``
(weights quantized when the model is loaded). Decoding runs ``ct2_translate.py`` in the harness's
environment, which has ctranslate2 (pinned in pyproject.toml), sorted by length in batches of
``decode_batch`` sentences as ours, ``intra_threads`` = the harness's threads.

Equal work: on our export, greedy search and beam search without length normalisation (alpha 0) rank
hypotheses alike in both, and our model never writes ``<pad>`` or ``<s>`` and never ends before its first
word; ``translate(..., ours=True)`` tells CTranslate2 the same. The harness compares those outputs line by
line with ours. Known differences from our search that no option removes:

- The length penalty divides a hypothesis's log-probability by ``length ** alpha`` (CTranslate2's
  ``TranslationOptions``), not by GNMT's ``((5 + length) / 6) ** alpha`` as ours, OpenNMT-py's ``wu`` and
  Joey's; with alpha 1 that is the mean log-probability per token.
- One output length limit per batch (ours: per sentence); ``ct2_translate.py`` takes ours for the
  batch's longest source.

Check of the conversion (``--task synthetic --systems opennmt ctranslate2 --updates 400 --repeats 1``):
greedy float32 output equal to onmt_translate's on 197 of the 200 test sentences (int8: 184), beam 5 on 86
(the length penalties differ).
"""

import sys
from pathlib import Path

from toolkits.command import Command, thread_env
from toolkits.task import Setup, Task

COMPUTE_TYPES = ("float32", "int8")
DECODER = Path(__file__).with_name("ct2_translate.py")


class CTranslate2:
    def __init__(self, compute_type: str) -> None:
        self.compute_type = compute_type
        self.name = f"ctranslate2-{compute_type}"

    @staticmethod
    def convert(onmt_checkpoint: Path, out: Path) -> Command:
        """``ct2-opennmt-py-converter`` of the harness's environment on an OpenNMT-py checkpoint, into ``out``.

        The checkpoint holds an argparse Namespace, which torch>=2.6 refuses to unpickle with ``weights_only``:
        the converter's ``--unsafe_deserialization`` lifts that (the checkpoint is our own run's).
        """
        converter = Path(sys.executable).with_name("ct2-opennmt-py-converter")
        argv = [str(converter), "--model_path", str(onmt_checkpoint), "--output_dir", str(out), "--force"]
        return Command([*argv, "--unsafe_deserialization"], env=thread_env(1))

    @staticmethod
    def export_ours(model_dir: Path, out: Path) -> Command:
        """``nmt export`` of our trained ``model_dir`` into ``out``, float32 weights."""
        return Command([sys.executable, "-m", "nmt", "export", str(model_dir), str(out)], env=thread_env(1))

    def translate(
        self, task: Task, setup: Setup, model: Path, beam_size: int, out: Path, ours: bool = False
    ) -> Command:
        """Decode the test source pieces with the converted ``model``; pieces go to ``out``.

        :param ours: ``model`` is our export: no ``<pad>``, no ``<s>`` and no empty output, as in our search
        """
        argv = [sys.executable, str(DECODER), str(model), self.compute_type, str(beam_size), str(setup.alpha)]
        argv += [str(setup.decode_batch), str(setup.threads)]
        argv += ["1", "<pad>", "<s>"] if ours else ["0"]
        return Command(argv, env=thread_env(setup.threads), stdin=task.pieces("test", "src"), stdout=out)

    def hypotheses(self, task: Task, out: Path) -> list[str]:
        return task.read_hypotheses(out)
