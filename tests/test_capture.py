"""`simulator capture` on the two seed models: the captured trace's parameter bytes and FLOPs
equal the generator's. Needs PyTorch (`pip install '.[torch]'`); skipped where it is absent."""

import dataclasses
import json

import pytest
from conftest import REPO

from simulator.cli import main
from simulator.config.workload import load_workload
from simulator.workload import tracefile
from simulator.workload.generate import build_trace
from simulator.workload.memory import profile
from simulator.workload.trace import Phase

torch = pytest.importorskip("torch", reason="capture needs the optional torch extra")

SEEDS = REPO / "tests/capture/seed_steps.py"


@pytest.mark.parametrize("function, workload", [("transformer_step", "transformer"),
                                                ("cnn_step", "cnn")])
def test_capture_matches_the_generator(tmp_path, capsys, function, workload):
    out = tmp_path / f"{workload}.jsonl"
    assert main(["capture", f"{SEEDS}:{function}", "-o", str(out), "--name", workload]) == 0
    captured, header = tracefile.read(out)
    assert header["captured"]["optimizer"] == "Adam"
    spec = load_workload(workload)
    # on the meta device PyTorch takes its CPU paths: unfused attention, a per-tensor Adam loop
    spec = dataclasses.replace(
        spec, execution=dataclasses.replace(spec.execution, attention="math"),
        optimizer=dataclasses.replace(spec.optimizer, implementation="for_loop"))
    generated = build_trace(spec)
    assert captured.parameter_bytes == generated.parameter_bytes
    assert len(captured.parameters) == len(generated.parameters)
    for phase in Phase:
        assert captured.flops(phase) == generated.flops(phase)
    assert profile(captured).peak_bytes == pytest.approx(profile(generated).peak_bytes, rel=0.05)
    capsys.readouterr()
    assert main(["run", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["workload"]["parameters"] == generated.parameter_count


def test_capture_bad_targets(capsys):
    assert main(["capture", "no_such_module:f", "-o", "x.jsonl"]) == 2
    assert "cannot import" in capsys.readouterr().err
    assert main(["capture", f"{SEEDS}:nothing_here", "-o", "x.jsonl"]) == 2
    assert "has no function" in capsys.readouterr().err


def test_torch_fused_lists_the_optimizers_torch_has_a_fused_kernel_for():
    """`memory` says which fused remedies torch.optim cannot give (config.workload)."""
    import inspect

    from simulator.config.workload import _OPTIMIZER_KEYS, NOT_TORCH_OPTIM, TORCH_FUSED

    classes = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "adamax": "Adamax",
               "rmsprop": "RMSprop", "adagrad": "Adagrad"}
    assert set(classes) == set(_OPTIMIZER_KEYS) - NOT_TORCH_OPTIM
    fused = {kind for kind, name in classes.items()
             if "fused" in inspect.signature(getattr(torch.optim, name).__init__).parameters}
    assert fused == TORCH_FUSED
