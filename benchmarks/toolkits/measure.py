"""Run a command and write its wall time, CPU time and peak RSS to a JSON file: the harness's launcher.

Linux reports a child's peak RSS (``ru_maxrss``) as at least the RSS of the process that forked it: the
counter carries over fork and exec. The harness holds corpora, sentencepiece and torch, hundreds of MB, so
it does not fork a measured command itself: this small process (about 10 MB) does, and reports. The CPU time
is user + system of the command and of the descendants it waited for (``wait4``'s resource usage).

    python -S measure.py OUT_JSON ARGV...
"""

import json
import os
import subprocess
import sys
import time


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    tick = time.perf_counter()
    process = subprocess.Popen(argv)  # stdin, stdout, stderr, environment and folder: this process's
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - tick
    with open(out, "w", encoding="utf-8") as f:
        cpu_seconds = usage.ru_utime + usage.ru_stime
        json.dump({"seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss_mb": usage.ru_maxrss / 1024}, f)
    code = os.waitstatus_to_exitcode(status)
    sys.exit(code if code >= 0 else 128 - code)  # killed by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    main()
