"""zett-agent's own token estimator, as a counter zett_lab can pass and recognise."""

from __future__ import annotations

from collections.abc import Sequence

from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.messages import AnyMessage

from ...tokens import EXACT_COUNTER, provision_o200k


class _EngineEstimator:
    """zett-agent's own default estimator (``CompactionExtension._count_tokens``), its vocabulary provisioned
    offline first: the reference every exact counter is checked against, and the naive baseline of benchmarks."""

    identity = EXACT_COUNTER

    def __call__(self, messages: Sequence[AnyMessage]) -> int:
        provision_o200k()
        return CompactionExtension._count_tokens(messages)


engine_count_tokens = _EngineEstimator()


def counts_with_engine_estimator(extension: CompactionExtension) -> bool:
    """Whether an extension counts with zett-agent's own estimator (the default), not a counter it was given."""
    return extension.count_tokens is CompactionExtension._count_tokens
