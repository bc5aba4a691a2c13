"""Tiny transformers models with random weights, built by the tests that need them (never downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

CTC_VOCAB = {"<pad>": 0, "<unk>": 1, "|": 2, **{c: i + 3 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz'")}}
LID_LABELS = ["pus", "urd", "eng"]  # MMS-LID's ISO 639-3 labels


def _wav2vec2_config(**extra):
    from transformers import Wav2Vec2Config

    return Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                          conv_dim=(16, 16, 16), conv_kernel=(10, 3, 3), conv_stride=(5, 4, 4),
                          num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, **extra)


def _extractor():
    from transformers import Wav2Vec2FeatureExtractor

    return Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                    return_attention_mask=True)


def build_tiny_ctc(directory: Path) -> Path:
    """A wav2vec2 CTC recogniser (letters a-z) saved with its processor."""
    import torch
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2ForCTC, Wav2Vec2Processor

    directory.mkdir(parents=True, exist_ok=True)
    vocab_path = directory / "vocab.json"
    vocab_path.write_text(json.dumps(CTC_VOCAB))
    tokenizer = Wav2Vec2CTCTokenizer(str(vocab_path), unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|")
    torch.manual_seed(0)
    model = Wav2Vec2ForCTC(_wav2vec2_config(vocab_size=len(CTC_VOCAB), pad_token_id=0)).eval()
    with torch.no_grad():
        # random weights mostly predict one token; push <pad> down so the decode is a non-empty string
        model.lm_head.bias[0] = -5.0
    model.save_pretrained(directory)
    Wav2Vec2Processor(feature_extractor=_extractor(), tokenizer=tokenizer).save_pretrained(directory)
    return directory


def build_tiny_lid(directory: Path) -> Path:
    """An MMS-LID-shaped audio classifier (wav2vec2 + mean pooling + a head) over LID_LABELS."""
    import torch
    from transformers import Wav2Vec2ForSequenceClassification

    torch.manual_seed(0)
    config = _wav2vec2_config(num_labels=len(LID_LABELS), id2label=dict(enumerate(LID_LABELS)),
                              label2id={label: i for i, label in enumerate(LID_LABELS)}, classifier_proj_size=8)
    Wav2Vec2ForSequenceClassification(config).eval().save_pretrained(directory)
    _extractor().save_pretrained(directory)
    return directory
