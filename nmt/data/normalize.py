"""Unicode and punctuation normalization of one language's sentences: cleaning's first step, and what
``nmt translate`` applies to its input for a model whose training sources were normalized (meta.json).

Only sacremoses' punctuation normalizer is used, and it is loaded from its own module file, which imports only
``re``, ``regex`` and ``itertools``: ``import sacremoses`` runs the package's ``__init__``, which imports its
tokenizer, truecaser and joblib as well: nearly all of the package's import time, for nothing used here
(benchmarks/history.md, "What made it faster", "Start-up").
"""

import functools
import importlib.util
import unicodedata
from pathlib import Path

# Zero-width (non-)joiners are format characters (Cf) that spell words in Persian and Indic scripts.
KEEP_FORMAT_CHARS = {"\u200c", "\u200d"}


class Normalizer:
    """Unicode and punctuation normalization of one language's sentences.

    Applies, in order: NFC; Moses punctuation normalization (as in Moses'
    ``normalize-punctuation.perl``, via sacremoses) if enabled; removal of control and other
    non-printing characters (Unicode category C*), with whitespace controls such as tab turned
    into spaces; whitespace collapse and strip.
    """

    def __init__(self, lang: str, punctuation: bool = True):
        """
        :param lang: ISO 639-1 code, selects the language-specific Moses rules (e.g. French quotes)
        :param punctuation: whether to apply Moses punctuation normalization
        """
        self.lang = lang
        # Building the normalizer compiles dozens of regexes, so it is done once per language.
        self.punct = moses_punct_normalizer()(lang=lang) if punctuation else None

    def __call__(self, line: str) -> str:
        """
        :param line: one sentence without line terminator
        :return: the normalized sentence; empty if nothing printable was left
        """
        line = unicodedata.normalize("NFC", line)
        if self.punct is not None:
            line = self.punct.normalize(line)
        # isprintable() is False for every C* (and non-ASCII-space Z*) character: a fast path for clean lines.
        if not line.isprintable():
            line = "".join(_printable(ch) for ch in line)
        return " ".join(line.split())


def _printable(ch: str) -> str:
    """Map a whitespace control to a space, drop other C* characters, keep the rest."""
    if ch.isspace():
        return " "
    if unicodedata.category(ch)[0] == "C" and ch not in KEEP_FORMAT_CHARS:
        return ""
    return ch


@functools.cache
def moses_punct_normalizer() -> type:
    """sacremoses' ``MosesPunctNormalizer`` class, from ``sacremoses/normalize.py`` alone (see the module's
    docstring); through the package when that file is not where sacremoses 0.2.0 keeps it."""
    package = importlib.util.find_spec("sacremoses")
    path = Path(package.submodule_search_locations[0], "normalize.py") if package else None
    if path is None or not path.is_file():
        from sacremoses import MosesPunctNormalizer

        return MosesPunctNormalizer
    spec = importlib.util.spec_from_file_location("sacremoses.normalize", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MosesPunctNormalizer
