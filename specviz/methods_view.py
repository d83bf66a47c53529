"""The catalog and the method trials as the Methods page and `specviz methods` show them: the
families side by side, one row per method, the trials' table and captions. Pure: data in, rows
and text out.
"""

from __future__ import annotations

from typing import Any

from .catalog import FAMILY_TEXT, Family, MethodInfo, is_mtp_alias
from .method_trials import MethodTrials, acceptance_lengths, failure_reasons, once

# ---- the catalog -------------------------------------------------------------------------------

def catalog_table(entries: list[MethodInfo]) -> str:
    """A plain-text table for the terminal, one method per line."""
    rows = [("method", "in vLLM", "family", "drafter receives", "drafts by", "model", "known to run")]
    for m in entries:
        rows.append((m.name, "yes" if m.installed else "NO", m.family, " + ".join(m.receives) or "-", m.drafts_by,
                     m.model, "; ".join(r.text for r in m.known_to_run) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows)


CORE_FAMILIES: tuple[Family, ...] = (
    "model-free lookup", "separate draft model", "native MTP (built into the target)",
    "separate MTP drafter sharing the target's KV cache", "target-conditioned draft network",
)


def family_overview(entries: list[MethodInfo]) -> list[dict[str, Any]]:
    """One row per family present: its methods (aliases counted, not listed), what drafters receive, how they draft."""
    rows = []
    families = list(dict.fromkeys([*CORE_FAMILIES, *(m.family for m in entries)]))
    for family in families:
        members = [m for m in entries if m.family == family]
        if not members:
            continue
        named = [m.name for m in members if not is_mtp_alias(m)]
        aliases = len(members) - len(named)
        rows.append({
            "family": family,
            "methods": ", ".join(named) + (f" (+{aliases} model-specific MTP names)" if aliases else ""),
            "drafter receives": "; ".join(dict.fromkeys(" + ".join(m.receives) for m in members if m.receives)),
            "drafts by": ", ".join(dict.fromkeys(m.drafts_by for m in members)),
            "in short": FAMILY_TEXT[family],
        })
    return rows


# Pixel widths that fit the seven columns in the main area at 1440 px (about 980 px): sized by their content,
# "model" and "known to run" ran off the right edge. A cut cell shows its whole text on hover.
METHOD_COLUMNS = {"method": {"width": 100}, "in this vLLM": {"width": 90}, "family": {"width": 110},
                  "drafter receives": {"width": 150}, "drafts by": {"width": 150}, "model": {"width": 160},
                  "known to run": {"width": 210}}


def method_rows(entries: list[MethodInfo], *, aliases: bool = False) -> list[dict[str, Any]]:
    return [{
        "method": m.name, "in this vLLM": m.installed, "family": m.family,
        "drafter receives": " + ".join(m.receives), "drafts by": m.drafts_by,
        "model": m.model + (f": {m.model_role}" if m.model_role and m.model != "unused" else ""),
        "known to run": "; ".join(r.text for r in m.known_to_run),
    } for m in entries if aliases or not is_mtp_alias(m)]


def alias_rows(entries: list[MethodInfo]) -> list[dict[str, Any]]:
    """The model-specific MTP names (vLLM treats each as 'mtp'), one row each."""
    return [{"method": m.name, "in this vLLM": m.installed, "what it is": m.summary}
            for m in entries if is_mtp_alias(m)]


# ---- the trials --------------------------------------------------------------------------------

def trials_caption(trials: MethodTrials) -> str:
    """Where and on what the trials ran: a failure here is this platform's and these targets', not the method's."""
    targets = ", ".join(once(t.target for t in trials.trials))
    methods = len(once(t.method for t in trials.trials))
    return (f"{len(trials.trials)} trials of {methods} methods on {trials.platform.upper()} ({trials.device_name}) with "
            f"vLLM {trials.vllm_version}, {trials.created_at[:10]}: the machine scripts/try_methods.py ran on, which "
            "need not be the one a recorded run or sweep names beside its figures. Llama-architecture targets "
            f"({targets}; see "
            "scripts/try_methods.py) and tiny or random-weight drafters: an acceptance length says the method works, "
            "not how well it drafts, and a failure says it did not run on this platform with this target (the MTP "
            "methods need a target that has MTP layers).")


def trials_table(trials: MethodTrials) -> list[dict[str, Any]]:
    """One row per method tried: outcome, mean acceptance length per target, why it failed (each reason once),
    what drafted, and the platform ("–" where there is nothing to say; "ran (retried)": it failed first, e.g.
    before arctic-inference was installed, and its reason is kept). Methods whose rows would be the same apart from the name share one row
    (the 28 MTP names that all fail with "Unsupported speculative method: 'mtp'" on a Llama target)."""
    rows: list[dict[str, Any]] = []
    for method in once(t.method for t in trials.trials):
        mine = [t for t in trials.trials if t.method == method]
        ran, failed = [t for t in mine if t.ran], [t for t in mine if not t.ran]
        outcome = ("ran" if not failed else "ran (retried)") if ran else "failed"
        rows.append({
            "method": method, "outcome": outcome, "mean acceptance length (target)": acceptance_lengths(ran) or "–",
            "why it failed": failure_reasons(failed) or "–",
            "drafter": "; ".join(once(t.draft for t in mine if t.draft)) or "–",
            "platform": f"{trials.platform} ({trials.device_name}), vLLM {trials.vllm_version}",
        })
    merged: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        same = tuple(v for k, v in row.items() if k != "method")
        if same in merged:
            merged[same]["method"] += f", {row['method']}"
        else:
            merged[same] = dict(row)
    return list(merged.values())


def trial_errors(trials: MethodTrials) -> list[tuple[str, str]]:
    """(methods, full error) for each distinct error message once, for engineers who want the whole text."""
    by_error: dict[str, list[str]] = {}
    for t in trials.trials:
        if not t.ran and t.error:
            by_error.setdefault(t.error, [])
            if t.method not in by_error[t.error]:
                by_error[t.error].append(t.method)
    return [(", ".join(methods), error) for error, methods in by_error.items()]


# ---- the three drafting families as cards ------------------------------------------------------

# (family in the catalog, title, receives, how it drafts, what "layers vs num_speculative_tokens" means, demo run)
_FAMILY_CARDS = (
    ("native MTP (built into the target)", "Native MTP",
     "the target's last hidden state (before its final norm), with the embedding of the token the target just "
     "produced",
     "an MTP layer (one decoder layer with its own norms and an input projection of [hidden state, embedding]) "
     "predicts the next token through the target's own lm_head; layer i drafts position i",
     "a checkpoint ships a fixed number of MTP layers (DeepSeek-V3 and MiMo-7B: 1). With num_speculative_tokens "
     "above that, vLLM runs the last layer again on its own output, which it was not trained on, so acceptance "
     "falls at each re-used position",
     "none yet: the demo model's MiMo form (specviz demo-model --mtp) has an untrained MTP layer; its output is "
     "the Llama form's, its drafts are noise"),
    ("separate MTP drafter sharing the target's KV cache", "Separate MTP drafter (Gemma 4)",
     "the target's last hidden state and the target's KV cache: the assistant's attention layers have only query "
     "projections and read the target's keys and values",
     "the whole assistant (a few layers, narrower than the target, its own lm_head) runs once per draft token, its "
     "output projected back to the target's width and fed in again",
     "its layers are depth, not positions: vLLM treats an assistant as one predictor (n_predict 1) and runs all its "
     "layers again for every one of the num_speculative_tokens",
     "none: no Gemma 4 model fits this CPU; a tiny random pair ran (its acceptance says nothing about real Gemma 4), "
     "and Google's E2B/E4B assistants use ordered embeddings, which need CUDA graphs (GPU only)"),
    ("target-conditioned draft network", "Target-conditioned draft networks (EAGLE-3, DFlash, DSpark)",
     "hidden states from several target layers (EAGLE-3: low, middle and high, fused by one linear layer; EAGLE: "
     "the last one), with the tokens",
     "EAGLE and EAGLE-3 run their one layer once per draft token, feeding their own hidden state back; DFlash and "
     "DSpark fill a block of masked positions in one pass",
     "the head has one layer whatever k: EAGLE-3 is trained on its own earlier drafts, so re-running it is what it "
     "learned; a DFlash or DSpark block size is set when it is trained",
     "sample_runs/showcase/eagle3-k3-chat-c1.json.gz: the shipped EAGLE-3 head (drafters/) on the demo model, k=3, "
     "float32, identical output"),
)


def drafting_family_cards(entries: list[MethodInfo], trials: MethodTrials | None = None) -> list[dict[str, str]]:
    """The three families that draft from the target's own state, one card each (keys family, title, methods,
    receives, drafts, layers_vs_k, demo_run, ran_here), with what ran here.

    `ran_here` lists, per method of the family, the targets a trial ran it on with its mean acceptance
    length ("mtp: 4.00 (tiny-mimo-2L)"), or says none ran.
    """
    cards = []
    for family, title, receives, drafts, layers_vs_k, demo_run in _FAMILY_CARDS:
        members = [m for m in entries if m.family == family and not is_mtp_alias(m)]
        names = [m.name for m in members]
        ran = []
        if trials is not None:
            for name in names:
                # Gemma 4's assistant runs under method 'mtp': its trials are the ones on a Gemma 4 target
                mine = [t for t in trials.trials if t.ran and t.method in (name, "mtp" if name == "gemma4_mtp" else name)
                        and (("gemma4" in t.target.lower()) == (family.startswith("separate MTP")))]
                if mine:
                    ran.append(f"{name}: {acceptance_lengths(mine)}")
        cards.append(dict(family=family, title=title, methods=", ".join(names), receives=receives,
                                drafts=drafts, layers_vs_k=layers_vs_k, demo_run=demo_run,
                                ran_here="; ".join(ran) or "no trial ran here"))
    return cards
