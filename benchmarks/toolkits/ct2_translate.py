"""Decode space-separated source pieces from stdin with a CTranslate2 model; pieces go to stdout.

Run by ``toolkits/ct2.py`` as a process of its own (so that the harness measures it as every other decoder):

    python ct2_translate.py MODEL_DIR COMPUTE_TYPE BEAM_SIZE LENGTH_PENALTY BATCH_SENTENCES THREADS MIN_LENGTH \
        [NEVER ...]

The sentences are sorted by length and decoded in batches of BATCH_SENTENCES, as ours does; each output is
cut to ours' limit for its own source (1.5 x source with EOS + 10, minus the EOS). MIN_LENGTH is the shortest
output (ours: 1, EOS never first; OpenNMT-py: 0), and the pieces NEVER (e.g. ``<pad> <s>``, which our search
never writes) are never generated.
"""

import sys

import ctranslate2


def limit(n_src_pieces: int) -> int:
    return int(1.5 * (n_src_pieces + 1) + 10) - 1


def main() -> None:
    model_dir, compute_type, beam_size, length_penalty, batch, threads, min_length, *never = sys.argv[1:]
    translator = ctranslate2.Translator(
        model_dir, device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=int(threads)
    )
    src = [line.split() for line in sys.stdin.buffer.read().decode("utf-8").splitlines()]
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    out = [""] * len(src)
    for start in range(0, len(order), int(batch)):
        chunk = order[start : start + int(batch)]
        results = translator.translate_batch(
            [src[i] for i in chunk],
            beam_size=int(beam_size),
            length_penalty=float(length_penalty),
            max_decoding_length=max(limit(len(src[i])) for i in chunk),
            min_decoding_length=int(min_length),
            suppress_sequences=[[piece] for piece in never] or None,
        )
        for i, result in zip(chunk, results, strict=True):
            out[i] = " ".join(result.hypotheses[0][: limit(len(src[i]))]) + "\n"
    sys.stdout.buffer.write("".join(out).encode("utf-8"))


if __name__ == "__main__":
    main()
