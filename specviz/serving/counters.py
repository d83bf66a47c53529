"""vLLM's own spec-decode counters from /metrics: the figures every trace is cross-checked against.

    before = scrape_spec_counters(url); ...run...; delta = counters_delta(before, scrape_spec_counters(url))
    delta.num_drafts, delta.num_draft_tokens, delta.num_accepted_tokens, delta.num_accepted_tokens_per_pos
"""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ..runfile import SpecDecodeCounters

_COUNTER_FIELDS = {
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens",
}


def parse_spec_counters(metrics_text: str) -> SpecDecodeCounters | None:
    """vLLM's spec-decode counters from a /metrics page, summed over engines; None if absent."""
    totals = {f: 0 for f in _COUNTER_FIELDS.values()}
    per_pos: dict[int, int] = {}
    seen = False
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            base = sample.name.removesuffix("_total")
            if base in _COUNTER_FIELDS:
                totals[_COUNTER_FIELDS[base]] += int(sample.value)
                seen = True
            elif base == "vllm:spec_decode_num_accepted_tokens_per_pos":
                pos = int(sample.labels["position"])
                per_pos[pos] = per_pos.get(pos, 0) + int(sample.value)
    if not seen:
        return None
    vector = [per_pos.get(i, 0) for i in range(max(per_pos) + 1)] if per_pos else []
    return SpecDecodeCounters(**totals, num_accepted_tokens_per_pos=vector)


def scrape_spec_counters(url: str) -> SpecDecodeCounters | None:
    r = httpx.get(f"{url}/metrics", timeout=10)
    r.raise_for_status()
    return parse_spec_counters(r.text)


def scrape_members_counters(members: list) -> SpecDecodeCounters | None:
    """The spec-decode counters of a server's members (Server.members()), added up; None when none speculates
    or a /metrics page cannot be read."""
    try:
        return sum_counters([scrape_spec_counters(m.url) for m in members])
    except (httpx.HTTPError, ValueError, KeyError):  # unreachable, or not Prometheus text
        return None


def sum_counters(counters: list[SpecDecodeCounters | None]) -> SpecDecodeCounters | None:
    """Counters of several servers added up; None if none of them speculates."""
    present = [c for c in counters if c is not None]
    if not present:
        return None
    width = max(len(c.num_accepted_tokens_per_pos) for c in present)
    return SpecDecodeCounters(
        num_drafts=sum(c.num_drafts for c in present),
        num_draft_tokens=sum(c.num_draft_tokens for c in present),
        num_accepted_tokens=sum(c.num_accepted_tokens for c in present),
        num_accepted_tokens_per_pos=[sum(c.num_accepted_tokens_per_pos[j] for c in present
                                         if j < len(c.num_accepted_tokens_per_pos)) for j in range(width)],
    )


def counters_delta(before: SpecDecodeCounters | None, after: SpecDecodeCounters | None) -> SpecDecodeCounters | None:
    if after is None:
        return None
    if before is None:
        return after
    width = max(len(before.num_accepted_tokens_per_pos), len(after.num_accepted_tokens_per_pos))
    pad = lambda v: v + [0] * (width - len(v))  # noqa: E731
    return SpecDecodeCounters(
        num_drafts=after.num_drafts - before.num_drafts,
        num_draft_tokens=after.num_draft_tokens - before.num_draft_tokens,
        num_accepted_tokens=after.num_accepted_tokens - before.num_accepted_tokens,
        num_accepted_tokens_per_pos=[a - b for a, b in zip(pad(after.num_accepted_tokens_per_pos),
                                                           pad(before.num_accepted_tokens_per_pos))],
    )

