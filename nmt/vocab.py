"""The vocabulary's fixed special ids, which every stage and architecture shares, and the tags of sources."""

# Every sentencepiece model of this toolkit is trained with these ids (nmt.data.subword), so models,
# batches, search and the CTranslate2 export agree without reading a vocabulary file.
PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIAL_IDS = {"pad_id": PAD, "unk_id": UNK, "bos_id": BOS, "eos_id": EOS}
# Marks back-translated sources (Caswell et al. 2019); always one piece, so tagging needs no new vocabulary.
BT_TAG = "<BT>"


def target_tag(lang: str) -> str:
    """The tag that starts every source of a multilingual model to ask for the target language ``lang``, e.g.
    ``<2de>`` (Johnson et al. 2017): a user-defined piece of the model's joint subword model, so always one piece."""
    return f"<2{lang}>"
