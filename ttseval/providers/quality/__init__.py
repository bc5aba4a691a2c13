"""Reference-free quality (MOS) predictors."""

from __future__ import annotations

from ttseval.core.protocols import QualityProvider
from ttseval.core.registry import Registry

QUALITY = Registry[QualityProvider](
    "quality",
    QualityProvider,
    {
        "dnsmos": "ttseval.providers.quality.dnsmos:DNSMOSQuality",
        "distillmos": "ttseval.providers.quality.distillmos:DistillMOSQuality",
        "utmos22": "ttseval.providers.quality.utmos22:UTMOS22Quality",
        "nisqa": "ttseval.providers.quality.nisqa:NISQAQuality",
        "command": "ttseval.providers.quality.command:CommandQuality",
    },
)
