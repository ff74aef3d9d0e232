"""fairseq-train with a log the harness can time, and optionally a training clock of CPU time; run in fairseq's venv.

Run by ``toolkits/fairseq.py`` as the measured training process:

    python fairseq_train.py [--cpu-clock REPORT_JSON] DATA_DIR FAIRSEQ_TRAIN_OPTIONS...

fairseq_cli/train.py calls logging.basicConfig with whole-second time stamps at import; logging is configured
first here (the default time stamps have milliseconds, as ``command.log_time`` reads), then its main runs.

``--cpu-clock``: fairseq stops at ``--stop-time-hours`` of ``Trainer.cumulative_training_time``, which it checks
after every update (``fairseq_cli/train.py``, validate_and_save, which then saves the checkpoint); that clock is
wall time. With this option it is the CPU time (user + system, of this process and its finished children) since
the first update began: a budget of CPU time holds however busy the machine is, and start-up (imports, loading
the data) is outside it, as our ``summary.json``'s ``train_seconds`` counts the updates only. REPORT_JSON gets the
updates and the CPU seconds from the start of the first update to the end of the last.
"""

import json
import logging
import resource
import sys


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def use_cpu_clock() -> dict:
    """Make fairseq's training clock the CPU seconds since the first update.

    :return: the updates and the CPU seconds of the updates so far, kept up to date
    """
    from fairseq.trainer import Trainer

    clock = {"start": None, "seconds": 0.0, "updates": 0}
    train_step = Trainer.train_step

    def timed_train_step(self, samples, raise_oom=False):
        if clock["start"] is None:
            clock["start"] = cpu_seconds()
        out = train_step(self, samples, raise_oom)
        clock["seconds"], clock["updates"] = cpu_seconds() - clock["start"], self.get_num_updates()
        return out

    def cumulative_training_time(self):
        return 0.0 if clock["start"] is None else cpu_seconds() - clock["start"]

    Trainer.train_step = timed_train_step
    Trainer.cumulative_training_time = cumulative_training_time
    return clock


def main() -> None:
    argv = sys.argv[1:]
    report = None
    if argv[:1] == ["--cpu-clock"]:
        report, argv = argv[1], argv[2:]
    sys.argv = [sys.argv[0], *argv]  # what fairseq's own parser reads
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level="INFO", stream=sys.stdout)
    from fairseq_cli.train import cli_main

    clock = use_cpu_clock() if report is not None else None
    cli_main()
    if clock is not None:
        with open(report, "w", encoding="utf-8") as f:
            json.dump({"updates": clock["updates"], "update_cpu_seconds": clock["seconds"]}, f)


if __name__ == "__main__":
    main()
