"""Systems of many languages, from the config's ``multilingual`` and ``pivot`` sections: multilingual models (one model
for several directions, Johnson et al. 2017) with their zero-shot directions, and pivot cascades through bilingual
models. Each is a row of the result table in the group of every pair it translates.

Torch-free, as :mod:`nmt.experiment`, which holds them (:attr:`nmt.experiment.Experiment.multilingual`).
"""

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nmt.config import SubwordConfig, TrainConfig, from_dict
from nmt.errors import ConfigError
from nmt.vocab import target_tag

# The {kind} of the results paths of these rows, in place of a bilingual system's {stage}.
MULTILINGUAL, ZERO_SHOT, PIVOT = "multilingual", "zero_shot", "pivot"
# Training keys a system cannot set: the workflow sets the corpus weights (by temperature), and a multilingual model
# starts from scratch (its joint subword model is its own, so no other model's weights fit it).
NOT_IN_SYSTEMS = ("corpus_weights", "mix", "temperature", "init_from", "trg_lang")


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


@dataclass(frozen=True)
class MultilingualSystem:
    """One model trained on several ``directions`` (``SRC-TRG``) at once: every source starts with the tag of its
    target language (:func:`nmt.vocab.target_tag`), one joint subword model (``subword``) covers every language, the
    directions' corpora are drawn by ``temperature`` (Arivazhagan et al. 2019). It is built as the entry ``model``
    of ``models`` and trains with that model's ``training``, updated by the system's own keys. ``zero_shot`` are
    directions between its languages it is asked for without having seen them."""

    name: str
    model: str
    directions: tuple[str, ...]
    temperature: float
    zero_shot: tuple[str, ...]
    training: TrainConfig
    subword: SubwordConfig

    @property
    def src_langs(self) -> list[str]:
        return unique(direction.split("-")[0] for direction in self.directions)

    @property
    def trg_langs(self) -> list[str]:
        """The target languages, each with its tag in the subword model."""
        return unique(direction.split("-")[1] for direction in self.directions)

    @property
    def langs(self) -> list[str]:
        return unique([*self.src_langs, *self.trg_langs])

    @property
    def tags(self) -> list[str]:
        return [target_tag(lang) for lang in self.trg_langs]

    @property
    def served(self) -> tuple[str, ...]:
        """Every direction the model translates, trained or zero-shot: the pairs that share its cost."""
        return (*self.directions, *self.zero_shot)

    def kind(self, pair: str) -> str | None:
        """How the system serves ``pair``: a trained direction, zero-shot, or not at all (None)."""
        return MULTILINGUAL if pair in self.directions else ZERO_SHOT if pair in self.zero_shot else None

    def describe(self, kind: str) -> str:
        """The data column of its rows, e.g. ``multilingual (m2m: 4 directions, T=5)``, ``zero-shot (m2m: ...)``."""
        temperature = f", T={self.temperature:g}" if self.temperature != 1 else ""
        what = "zero-shot" if kind == ZERO_SHOT else "multilingual"
        return f"{what} ({self.name}: {len(self.directions)} directions{temperature})"


@dataclass(frozen=True)
class Pivot:
    """A cascade that translates ``pair`` through the languages ``via`` (src -> via... -> trg), each step by the
    bilingual model of a pair of the config; the translation into each pivot language is kept."""

    pair: str
    via: tuple[str, ...]

    @property
    def chain(self) -> list[str]:
        src, trg = self.pair.split("-")
        return [src, *self.via, trg]

    @property
    def hops(self) -> list[str]:
        chain = self.chain
        return [f"{a}-{b}" for a, b in zip(chain[:-1], chain[1:], strict=True)]

    def describe(self) -> str:
        """The data column of its rows, e.g. ``pivot via en``."""
        return f"pivot via {'-'.join(self.via)}"


@dataclass(frozen=True)
class Multilingual:
    """The multilingual systems and pivot cascades of an experiment (none without the sections)."""

    systems: dict[str, MultilingualSystem] = field(default_factory=dict)
    pivots: dict[str, Pivot] = field(default_factory=dict)

    def pairs(self) -> list[str]:
        """Every pair these rows translate: each system's directions and zero-shot directions, each pivot's pair."""
        return unique([*(pair for s in self.systems.values() for pair in s.served), *self.pivots])

    def rows(self, pair: str, models: Iterable[str]) -> list[tuple[str, str]]:
        """The rows of ``pair`` as (name, kind): each system that serves it, then a pivot cascade of each of
        ``models`` (the pair's pivot through that model's bilingual models)."""
        rows = [(name, system.kind(pair)) for name, system in self.systems.items() if system.kind(pair)]
        return rows + ([(model, PIVOT) for model in models] if pair in self.pivots else [])

    def describe(self, name: str, kind: str, pair: str) -> str:
        """The data column of a row of ``pair``."""
        return self.pivots[pair].describe() if kind == PIVOT else self.systems[name].describe(kind)


def parse_multilingual(
    config: dict[str, Any], models: dict[str, Any], pairs: list[str], subword: SubwordConfig
) -> Multilingual:
    """The ``multilingual`` and ``pivot`` sections, checked against the pairs and models of the config.

    :param models: the experiment's :class:`nmt.experiment.Model` entries by name (not imported: it holds these)

    :raises ConfigError: one line naming the key: a system named as a model, of an undefined model, whose model
        trains in stages with data mixes; a direction with no data (neither it nor its reverse in ``pairs``); a
        zero-shot direction whose target tag (or source language) is not in the system's subword model; a pivot
        chain whose steps are not pairs of the config (no bilingual models meet there)
    """
    systems = {
        name: parse_system(name, section, models, pairs, subword) for name, section in config["multilingual"].items()
    }
    pivots = {}
    for pair, via in config["pivot"].items():
        pivot = Pivot(pair, tuple([via] if isinstance(via, str) else via))
        chain = pivot.chain
        if len(set(chain)) < len(chain):
            raise ConfigError(f"pivot.{pair}: the chain {'-'.join(chain)} passes a language twice")
        missing = [hop for hop in pivot.hops if hop not in pairs]
        if missing:
            raise ConfigError(
                f"pivot.{pair}: the chain {'-'.join(chain)} needs a bilingual model for each step, but "
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in pairs (pairs: {', '.join(pairs)})"
            )
        pivots[pair] = pivot
    return Multilingual(systems, pivots)


def parse_system(
    name: str, section: dict[str, Any], models: dict[str, Any], pairs: list[str], subword: SubwordConfig
) -> MultilingualSystem:
    """One entry of the ``multilingual`` section (see :func:`parse_multilingual`)."""
    where = f"multilingual.{name}"
    if name in models:
        raise ConfigError(f"{where}: '{name}' names a model too; give the system another name")
    model = models.get(section["model"])
    if model is None:
        raise ConfigError(f"{where}.model: '{section['model']}' is not a key of models (defined: {', '.join(models)})")
    for direction in section["directions"]:
        check_direction(direction, pairs, f"{where}.directions")
    own = dict(section.get("training") or {})
    for key in NOT_IN_SYSTEMS:
        if key in own:
            raise ConfigError(
                f"{where}.training.{key}: not a key of a multilingual system's training: the workflow sets it (the "
                "system's temperature weighs its directions; it trains from scratch, scored in each target language)"
            )
    stages = own.pop("stages", [dict(stage) for stage in model.stages]) or []
    if any("data" in stage for stage in stages):
        raise ConfigError(
            f"{where}: '{model.name}' trains in stages with data mixes, which name corpora a multilingual system has "
            f"not (its corpora are its directions); set {where}.training.stages without data, or null"
        )
    merged = {**dataclasses.asdict(model.training), **own, "stages": stages or None, "init_from": None}
    training = from_dict(TrainConfig, {**merged, "temperature": section["temperature"]}, f"{where}.training")
    own_subword = dict(section.get("subword") or {})
    if "joint" in own_subword:
        raise ConfigError(f"{where}.subword.joint: a multilingual system's subword model is always joint")
    merged_subword = {**dataclasses.asdict(subword), **own_subword, "joint": True}
    system = MultilingualSystem(
        name=name,
        model=model.name,
        directions=tuple(section["directions"]),
        temperature=section["temperature"],
        zero_shot=tuple(section["zero_shot"]),
        training=training,
        subword=from_dict(SubwordConfig, merged_subword, f"{where}.subword"),
    )
    for direction in system.zero_shot:
        check_zero_shot(system, direction, f"{where}.zero_shot")
    return system


def check_direction(direction: str, pairs: list[str], where: str) -> None:
    """Raise ConfigError on a direction that translates a language into itself or has no data: a multilingual
    model's directions train on the cleaned corpora of a pair of the config, the direction or its reverse."""
    src, trg = direction.split("-")
    if src == trg:
        raise ConfigError(f"{where}: '{direction}' translates a language into itself")
    if direction not in pairs and f"{trg}-{src}" not in pairs:
        vias = [
            lang
            for lang in dict.fromkeys(p.split("-")[1] for p in pairs)
            if {f"{src}-{lang}", f"{lang}-{trg}"} <= set(pairs)
        ]
        by_pivot = f"by pivot (pivot: {{{direction}: {vias[0]}}}) or " if vias else ""
        raise ConfigError(
            f"{where}: '{direction}' has no data (neither {direction} nor {trg}-{src} is in pairs); add one of them "
            f"to pairs, or translate it {by_pivot}as a zero-shot direction (zero_shot)"
        )


def check_zero_shot(system: MultilingualSystem, direction: str, where: str) -> None:
    """Raise ConfigError on a zero-shot direction the system trains on, or whose target tag or source language its
    subword model lacks (it knows the tags of its target languages and the text of its languages only)."""
    src, trg = direction.split("-")
    if direction in system.directions:
        raise ConfigError(f"{where}: '{direction}' is one of the directions {system.name} trains on")
    if src == trg:
        raise ConfigError(f"{where}: '{direction}' translates a language into itself")
    if trg not in system.trg_langs:
        raise ConfigError(
            f"{where}: '{direction}' needs the tag {target_tag(trg)}, which is not in the subword model of "
            f"{system.name} (its tags: {', '.join(system.tags)}: its target languages)"
        )
    if src not in system.langs:
        raise ConfigError(
            f"{where}: '{direction}' translates from {src}, which is not in the subword model of {system.name} "
            f"(its languages: {', '.join(system.langs)})"
        )


def check_eval_sets(multilingual: Multilingual, data: Any, corpora: dict[str, Any], pairs: list[str]) -> None:
    """Raise ConfigError when a dev or test set lacks a language of a pair that only these rows translate (a TSV
    file without its column): every such pair is scored on the test sets, and each direction on the dev set."""
    for pair in multilingual.pairs():
        if pair in pairs:
            continue
        for name in data.eval_sets:
            columns = corpora[name].tsv_columns
            for lang in pair.split("-"):
                if columns and lang not in columns:
                    raise ConfigError(f"corpora.{name}.tsv_columns: no column for '{lang}' (needed by {pair})")
