"""Decode space-separated source pieces from stdin with a CTranslate2 model; pieces go to stdout.

Run by ``toolkits/ct2.py`` as a process of its own (so that the harness measures it as every other decoder):

    python ct2_translate.py MODEL_DIR COMPUTE_TYPE BEAM_SIZE LENGTH_PENALTY BATCH_SENTENCES THREADS
"""

import sys

import ctranslate2


def main() -> None:
    model_dir, compute_type, beam_size, length_penalty, batch, threads = sys.argv[1:]
    translator = ctranslate2.Translator(
        model_dir, device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=int(threads)
    )
    src = [line.split() for line in sys.stdin.buffer.read().decode("utf-8").splitlines()]
    out = []
    for start in range(0, len(src), int(batch)):
        chunk = src[start : start + int(batch)]
        # One limit per batch: ours (1.5 x source with EOS + 10) for the batch's longest source, minus the EOS.
        limit = int(1.5 * (max(len(s) for s in chunk) + 1) + 10) - 1
        # min_decoding_length 0: an empty output is allowed, as in ours and OpenNMT-py (CTranslate2's default 1).
        results = translator.translate_batch(
            chunk,
            beam_size=int(beam_size),
            length_penalty=float(length_penalty),
            max_decoding_length=limit,
            min_decoding_length=0,
        )
        out += [" ".join(r.hypotheses[0]) + "\n" for r in results]
    sys.stdout.buffer.write("".join(out).encode("utf-8"))


if __name__ == "__main__":
    main()
