"""The sweep file: a Sweep as JSON, saved atomically, read with its kind and version checked; where sweeps live.

    save_sweep(sweep, Path("sample_runs/sweeps/code/sweep.json"))     # .part first, then renamed over the file
    load_sweep("sample_runs/sweeps/code/sweep.json")                 # -> Sweep; SweepError says why one is refused
    list_sweep_files()                 # [sample_runs/sweeps/smollm2-code/sweep.json, ...]: one per folder, showcase first
    list_head_to_head_files("sample_runs/sweeps/code")  # its head-to-heads, every drafter's
    confirmation_folder("sample_runs/sweeps/code", "ngram lookup 2-4")
    -> sample_runs/sweeps/code/confirm/ngram_lookup_2-4/      (`specviz tune` keeps the drafter's confirmation there)
    head_to_head_folder("sample_runs/sweeps/code", "ngram lookup 2-4", "ngram lookup 2-4 k by batch 1:5 2-16:4")
    -> .../confirm/ngram_lookup_2-4/head-to-head/ngram_lookup_2-4_k_by_batch_1_5_2-16_4/  (a schedule beside the static configs)

A file of schema 1 or 2 reads as today's Sweep (SweepCell reads its cells in today's shape) and is written back
as schema 3.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from .files import SAMPLE_RUNS_DIR, first_error, read_versioned_json
from .sweep import SWEEP_FILE_KIND, SWEEP_SCHEMA_VERSION, Sweep, SweepError

READABLE_SWEEP_SCHEMA_VERSIONS = (1, 2, 3)
SWEEPS_DIR = SAMPLE_RUNS_DIR / "sweeps"  # the recorded sweeps the pages list
# The sweep the pages open on: the Playground's showcase workload (code), in the demo model's default dtype,
# with the tuner's schedule measured beside every static k. The others follow by name.
SHOWCASE_SWEEP = "smollm2-code"


def save_sweep(sweep: Sweep, path: Path) -> Path:
    """Write atomically: an interrupted sweep never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(sweep.model_dump_json(indent=1))
    tmp.replace(path)
    return path


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep file; raise SweepError saying why a corrupt or foreign file is refused."""
    path = Path(path)
    doc = read_versioned_json(path, kind=SWEEP_FILE_KIND, versions=READABLE_SWEEP_SCHEMA_VERSIONS, error=SweepError,
                              label="sweep")
    doc["schema_version"] = SWEEP_SCHEMA_VERSION  # a version-1 cell reads as a cell of one run (SweepCell)
    try:
        return Sweep.model_validate(doc)
    except ValidationError as e:
        raise SweepError(f"{path}: invalid sweep file {first_error(e)}") from e


def file_stem(label: str) -> str:
    """A label as a file name: 'ngram lookup 2-4' -> 'ngram_lookup_2-4'."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)


def confirmation_folder(sweep_dir: str | Path, drafter: str) -> Path:
    """Where `specviz tune` keeps a drafter's confirmation: `<sweep>/confirm/<drafter as a file name>/`.
    ("ngram lookup 2-4" -> confirm/ngram_lookup_2-4/)"""
    return Path(sweep_dir) / "confirm" / file_stem(drafter)


def load_confirmation(sweep_dir: str | Path, drafter: str) -> Sweep | None:
    """The drafter's confirmation sweep, or None when `specviz tune` has not measured one."""
    path = confirmation_folder(sweep_dir, drafter) / "sweep.json"
    return load_sweep(path) if path.exists() else None


def head_to_head_folder(sweep_dir: str | Path, drafter: str, schedule: str) -> Path:
    """Where `specviz tune` measures a schedule (its sweep label) side by side with the static configs it must
    beat: one folder per schedule, so new picks never overwrite an older schedule's measurement."""
    return confirmation_folder(sweep_dir, drafter) / "head-to-head" / file_stem(schedule)


def load_head_to_heads(sweep_dir: str | Path, drafter: str) -> list[Sweep]:
    """The drafter's head-to-head sweeps (schedule.head_to_head_grid), one per schedule measured, by folder name."""
    return [load_sweep(p) for p in sorted((confirmation_folder(sweep_dir, drafter) / "head-to-head").glob("*/sweep.json"))]


def list_head_to_head_files(sweep_dir: str | Path) -> list[Path]:
    """Every head-to-head `specviz tune` measured for the sweep in `sweep_dir`, every drafter's, by folder name:
    `<sweep>/confirm/<drafter>/head-to-head/<schedule>/sweep.json`."""
    return sorted((Path(sweep_dir) / "confirm").glob("*/head-to-head/*/sweep.json"))


def list_sweep_files(folder: Path = SWEEPS_DIR) -> list[Path]:
    """Recorded sweeps: `<folder>/<name>/sweep.json`, SHOWCASE_SWEEP first, then by name."""
    return sorted(folder.glob("*/sweep.json"), key=lambda p: (p.parent.name != SHOWCASE_SWEEP, p.parent.name))
