"""`python -m simulator memory`: peak against capacity, by category, and remedies that work."""

import json

import pytest

from simulator.cli import main


def run_memory(capsys, *argv):
    code = main(["memory", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract_when_it_fits(capsys):
    code, out, _ = run_memory(capsys, "cnn", "--json")
    assert code == 0
    doc = json.loads(out)
    for key in ("peak_bytes", "capacity_bytes", "fits", "by_category", "remedies"):
        assert key in doc
    assert doc["fits"] is True and doc["remedies"] == []
    assert sum(doc["by_category"].values()) == doc["peak_bytes"]
    assert doc["peak_bytes"] == max(doc["peak_by_phase"].values())


def test_remedies_when_it_does_not_fit(capsys):
    code, out, _ = run_memory(capsys, "llama-7b", "--hardware", "l40s", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["fits"] is False and doc["headroom_bytes"] < 0
    names = {r["name"]: r for r in doc["remedies"]}
    assert names["8-bit optimizer state"]["peak_bytes"] < doc["peak_bytes"]
    assert names["fused optimizer"]["peak_bytes"] < doc["peak_bytes"]
    zero3 = names["ZeRO-3 / FSDP: state, gradients and parameters sharded"]
    assert zero3["fits"] and zero3["peak_bytes"] <= doc["capacity_bytes"]
    for r in doc["remedies"]:
        assert r["fits"] == (r["peak_bytes"] <= doc["capacity_bytes"])
        # a regenerated step has an allocator reserve; sharding scales the timeline, none
        if r["name"].startswith("ZeRO"):
            assert r["reserved_bytes"] is None and r["reserve_fits"] is None
        else:
            assert r["reserved_bytes"] >= r["peak_bytes"]
            assert r["reserve_fits"] == (r["reserved_bytes"] <= doc["capacity_bytes"])


def test_smaller_batch_is_the_largest_that_fits():
    import dataclasses

    from simulator.config.workload import load_workload
    from simulator.workload.allocator import place
    from simulator.workload.generate import build_trace
    from simulator.workload.memory import profile
    from simulator.workload.remedies import remedies

    spec = dataclasses.replace(load_workload("gpt2-small"), batch_size=12)
    capacity = 8 * 2**30
    base = profile(build_trace(spec))
    assert base.peak_bytes > capacity
    fixes = {r.name: r for r in remedies(spec, capacity, base)}
    smaller = fixes["smaller batch"]
    n = int(smaller.change.split()[1])
    assert smaller.fits and smaller.reserve_fits and 1 <= n < 12
    # held to the allocator's reserve, as an out-of-memory error is: one more does not fit
    bigger = place(build_trace(dataclasses.replace(spec, batch_size=n + 1))).reserved_peak
    assert smaller.reserved_bytes <= capacity < bigger
    accumulation = fixes["gradient accumulation"]
    assert accumulation.reserve_fits and "batch_size 12 kept" in accumulation.change


@pytest.mark.parametrize("micro_batches", [1, 4])
def test_largest_batch_that_fits_is_held_to_the_allocators_reserve(micro_batches):
    """A step that fits is told how far its batch could grow: the largest batch whose
    caching-allocator reserve (what an out-of-memory error checks) fits, its micro-batch count
    kept; one micro-batch sample more does not fit."""
    import dataclasses

    from simulator.config.workload import load_workload
    from simulator.workload.allocator import place
    from simulator.workload.generate import build_trace
    from simulator.workload.memory import profile
    from simulator.workload.remedies import Footprint, largest_batch

    def footprint(spec):
        trace = build_trace(spec)
        return Footprint(profile(trace).peak_bytes, place(trace).reserved_peak)

    spec = dataclasses.replace(load_workload("transformer"), batch_size=8,
                               micro_batches=micro_batches)
    capacity = 4 * 2**30
    found = largest_batch(spec, capacity, footprint(spec))
    assert found.micro_batches == micro_batches and found.batch_size % micro_batches == 0
    assert found.batch_size > spec.batch_size
    trace = build_trace(dataclasses.replace(spec, batch_size=found.batch_size))
    assert place(trace).reserved_peak == found.reserved_bytes <= capacity
    assert found.peak_bytes <= found.reserved_bytes
    more = dataclasses.replace(spec, batch_size=found.batch_size + micro_batches)
    assert place(build_trace(more)).reserved_peak > capacity
    # nothing to grow: a step whose own reserve does not fit, or a benchmark
    assert largest_batch(spec, 2**20, footprint(spec)) is None
    stream = load_workload("stream")
    assert largest_batch(stream, capacity, footprint(stream)) is None


def test_memory_report_names_the_largest_batch_only_when_it_fits(capsys):
    code, out, _ = run_memory(capsys, "bert-base", "--hardware", "rtx-3070", "--json")
    found = json.loads(out)["largest_batch_that_fits"]
    assert code == 0 and found["batch_size"] >= 32
    assert found["reserved_bytes"] <= json.loads(out)["capacity_bytes"]
    code, out, _ = run_memory(capsys, "bert-base", "--hardware", "rtx-3070")
    assert f"largest batch that fits: batch_size {found['batch_size']} (from 32)" in out
    code, out, _ = run_memory(capsys, "llama-7b", "--hardware", "a40", "--json")
    assert json.loads(out)["largest_batch_that_fits"] is None


def test_a_remedy_whose_reserve_does_not_fit_says_live_only():
    """The verdict a user meets is the reserve's; the live peak alone fitting is said apart."""
    from simulator.report.text import fit_verdict

    assert fit_verdict(True, True) == "yes"
    assert fit_verdict(True, False) == "live only"
    assert fit_verdict(False, False) == "no"
    assert fit_verdict(True, None) == "yes"  # no reserve (sharding): by its live peak


def test_text_report(capsys):
    code, out, _ = run_memory(capsys, "llama-7b", "--hardware", "a40")
    assert code == 0 and "DOES NOT FIT" in out and "remedies" in out and "ZeRO" in out


def test_combined_takes_every_single_gpu_remedy(capsys):
    """LLaMA-7B (bf16) on a 40 GB A100: no one remedy on one GPU fits, all of them together
    do (the combined row once left out the fused optimizer and said no)."""
    code, out, _ = run_memory(capsys, "llama-7b", "--hardware", "a100-40gb", "--json")
    assert code == 0
    doc = json.loads(out)
    names = {r["name"]: r for r in doc["remedies"]}
    single_gpu = [r for name, r in names.items()
                  if name != "combined" and not name.startswith("ZeRO")]
    assert single_gpu and not any(r["fits"] for r in single_gpu)
    combined = names["combined"]
    assert combined["change"] == "full checkpointing + fused optimizer + 8-bit state"
    assert combined["fits"]
    assert combined["peak_bytes"] < min(r["peak_bytes"] for r in single_gpu)


@pytest.mark.parametrize("optimizer, custom", [("adam", False), ("adagrad", False),
                                               ("rmsprop", True), ("adamax", True)])
def test_a_remedy_says_where_the_library_has_no_such_kernel(optimizer, custom):
    """torch.optim has fused=True for SGD, Adam, AdamW and Adagrad only (PyTorch 2.13);
    bitsandbytes has no 8-bit Adamax."""
    import dataclasses

    from simulator.config.workload import load_workload
    from simulator.workload.generate import build_trace
    from simulator.workload.memory import profile
    from simulator.workload.remedies import remedies

    spec = load_workload("cnn")
    spec = dataclasses.replace(spec, optimizer=dataclasses.replace(spec.optimizer,
                                                                   type=optimizer))
    base = profile(build_trace(spec))
    fixes = {r.name: r for r in remedies(spec, base.peak_bytes // 2, base)}
    note = f"(a custom kernel: torch.optim has no fused {optimizer})"
    assert (note in fixes["fused optimizer"].change) is custom
    assert (note in fixes["combined"].change) is custom
    # bitsandbytes' 8-bit optimizers: Adam, AdamW, SGD, RMSprop, Adagrad (LAMB, LARS, Lion)
    note = f"(a custom kernel: bitsandbytes has no 8-bit {optimizer})"
    assert (note in fixes["8-bit optimizer state"].change) is (optimizer == "adamax")
    assert (note in fixes["combined"].change) is (optimizer == "adamax")


def test_zero_shards_the_optimizer_steps_temporaries_with_its_state():
    """Each ZeRO rank steps the optimizer on its own partition, so the step's parameter-sized
    temporaries are 1/N of the whole (DeepSpeed's stage 1 already): LLaMA-7B with Adam on the
    48 GB L40S needs 2 GPUs for ZeRO-1, not 4 (with them unsharded it asked for 4)."""
    from simulator.config.workload import load_workload
    from simulator.workload.generate import build_trace
    from simulator.workload.memory import profile
    from simulator.workload.trace import Category, Phase

    trace = build_trace(load_workload("cnn"))
    prof = profile(trace)
    in_opt = [op.index for op in trace.ops if op.phase == Phase.OPTIMIZER]
    assert prof.optimizer_scratch[in_opt].max() > 0
    assert prof.optimizer_scratch.sum() == prof.optimizer_scratch[in_opt].sum()
    temporaries = prof.during[:, list(Category).index(Category.TEMPORARY)]
    assert (prof.optimizer_scratch <= temporaries).all()
    state = {Category.OPTIMIZER_STATE: 0.5}
    assert prof.peak_scaled(state, 0.5) <= prof.peak_scaled(state) <= prof.peak_bytes


def test_zero_1_for_llama_7b_on_the_l40s_takes_two_gpus(capsys):
    code, out, _ = run_memory(capsys, "llama-7b", "--hardware", "l40s", "--json")
    zero1 = next(r for r in json.loads(out)["remedies"] if r["name"].startswith("ZeRO-1"))
    assert zero1["change"] == "2 GPUs" and zero1["fits"]


def test_every_fit_verdict_leaves_room_for_the_runtime(capsys):
    """The CUDA context and the libraries' workspaces come off the capacity: ResNet-50 on
    the 24 GB A10 once got batch 259 with 23.98 of 24.00 GiB reserved, which a real card
    would refuse."""
    from simulator.config.hardware import load_hardware
    from simulator.config.runtime import CONTEXT_BYTES

    a10 = load_hardware("a10")
    res = a10.runtime_reserve
    assert res.context_bytes == CONTEXT_BYTES and res.workspace_bytes > 8 << 20
    assert a10.usable_bytes == (a10.memory.capacity_bytes - a10.memory.ecc_reserved_bytes -
                                res.total_bytes)  # inline ECC: a sixteenth
    assert load_hardware("h100-sxm").runtime_reserve.workspace_bytes > res.workspace_bytes
    code, out, _ = run_memory(capsys, "resnet50", "--hardware", "a10", "--json")
    doc = json.loads(out)
    assert doc["usable_bytes"] == a10.usable_bytes == doc["runtime_reserve"]["usable_bytes"]
    largest = doc["largest_batch_that_fits"]
    assert largest["reserved_bytes"] <= a10.usable_bytes
    assert largest["batch_size"] < 259
    assert "runtime reserve" in run_memory(capsys, "resnet50", "--hardware", "a10")[1]


def test_kept_gradients_offer_setting_them_to_none():
    """A step whose zero_grad keeps the gradients (set_to_none=False) holds them through the
    forward pass; freeing them is a remedy, smaller by up to their bytes, and part of the
    combined one."""
    import dataclasses

    from simulator.config.workload import load_workload
    from simulator.workload.generate import build_trace
    from simulator.workload.memory import profile
    from simulator.workload.remedies import remedies

    spec = dataclasses.replace(load_workload("gpt2-small"), batch_size=12)
    kept = dataclasses.replace(spec, execution=dataclasses.replace(spec.execution,
                                                                   zero_grad="zeros"))
    trace = build_trace(kept)
    base = profile(trace)
    grad_bytes = sum(trace.tensors[i].nbytes for i in trace.held_gradients)
    assert profile(build_trace(spec)).peak_bytes < base.peak_bytes
    fixes = {r.name: r for r in remedies(kept, base.peak_bytes - 1, base)}
    freed = fixes["gradients set to None"]
    assert freed.change == "zero_grad none (optimizer.zero_grad(set_to_none=True))"
    assert base.peak_bytes - grad_bytes <= freed.peak_bytes < base.peak_bytes
    assert fixes["combined"].change.startswith("gradients set to None + ")
    assert "gradients set to None" not in {r.name for r in remedies(spec, 1, profile(
        build_trace(spec)))}
