"""The input pipeline: hosts and datasets as data, the simpy simulation's invariants, the
verdicts it must give, and the command line around them."""

import dataclasses
import json
import subprocess
import sys

import pytest
from conftest import REPO

from simulator.cli import main
from simulator.config.host import host_names, load_host
from simulator.config.workload import load_workload
from simulator.errors import InputError
from simulator.feed import costs
from simulator.feed.analysis import analyze_feed
from simulator.feed.simulation import Scenario, simulate, steps_for
from simulator.units import GB, GiB

RESNET = load_workload("resnet50")
IMAGENET = RESNET.dataset


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def a10_resnet_step():
    """ResNet-50, batch 256, AMP on the A10: the step the verdicts below feed (sampled
    replay, as `run` times it)."""
    from simulator.pipeline import analyze

    doc = json.loads((REPO / "workloads/resnet50.json").read_text())
    doc["data"]["batch_size"] = 256
    doc["training"]["mixed_precision"] = "fp16"
    from simulator.config.workload import parse_workload

    spec = parse_workload(doc, "resnet50-b256-amp")
    return spec, analyze(spec, "a10").estimate.step_time_s


# --- the verdicts it must give -----------------------------------------------------------

def test_resnet50_on_a10_from_one_hard_disk_is_storage_bound(a10_resnet_step):
    spec, step = a10_resnet_step
    f = analyze_feed(spec, load_host("hdd-server"), step)
    assert f.bound and f.bottleneck == "storage"
    assert f.samples_per_s_supplied < f.samples_per_s_needed
    assert f.stall_s_per_step > step  # the GPU waits longer than it computes
    assert f.best_change is not None and "faster storage: sata-ssd" in f.best_change


def test_resnet50_on_a10_from_nvme_with_enough_cores_keeps_up(a10_resnet_step):
    spec, step = a10_resnet_step
    f = analyze_feed(spec, load_host("nvme-workstation"), step)
    assert not f.bound and f.bottleneck == "none"
    assert f.samples_per_s_supplied > f.samples_per_s_needed
    # what remains is the in-step host-to-device copy, a few per cent of the step
    assert f.stall_s_per_step == pytest.approx(f.copy_s_per_step, rel=0.05)


def test_two_loader_workers_on_storage_that_keeps_up_are_decode_bound(a10_resnet_step):
    spec, step = a10_resnet_step
    two = dataclasses.replace(spec, loader=dataclasses.replace(spec.loader, workers=2))
    for host in ("nvme-workstation", "sata-ssd-server"):
        f = analyze_feed(two, load_host(host), step)
        assert f.bound and f.bottleneck == "decode", host
        assert any(r.removes_stall and "workers" in r.change for r in f.remedies)


# --- page cache -----------------------------------------------------------------------

def _storage_bound(ram_gib: float, access: str = "random"):
    host = dataclasses.replace(load_host("hdd-server"), ram_bytes=int(ram_gib * GiB))
    ds = dataclasses.replace(IMAGENET, access=access)
    spec = dataclasses.replace(RESNET, batch_size=64, dataset=ds)
    return analyze_feed(spec, host, 0.05, remedies=False)


def test_a_dataset_that_fits_the_page_cache_has_a_slower_first_epoch():
    fits = _storage_bound(IMAGENET.stored_bytes / GiB + 32)
    assert fits.cache_fraction >= 1 and fits.page_cache_hit_rate == 1.0
    assert fits.first_epoch_s > 5 * fits.steady_epoch_s
    assert fits.first_samples_per_s_supplied < fits.samples_per_s_supplied / 5
    assert fits.first_stall_s_per_step > fits.stall_s_per_step


def test_a_dataset_larger_than_the_page_cache_does_not_get_faster():
    """Shuffled, a cache of a third of the dataset serves few of the next epoch's reads (LRU:
    about c^2/2); streamed in the same order each epoch it serves none."""
    third = _storage_bound(IMAGENET.stored_bytes / GiB / 3 + 16)
    assert third.cache_fraction == pytest.approx(1 / 3, rel=0.01)
    assert third.page_cache_hit_rate < 0.08
    assert third.steady_epoch_s > 0.9 * third.first_epoch_s
    streamed = _storage_bound(IMAGENET.stored_bytes / GiB * 0.9 + 16, "sequential")
    assert streamed.page_cache_hit_rate == 0.0
    assert streamed.steady_epoch_s == pytest.approx(streamed.first_epoch_s, rel=0.01)


def test_lru_hit_rate_grows_with_the_cache_and_stays_below_it():
    rates = [costs._lru_hit_rate(m, "random") for m in (100, 300, 500, 700, 900)]
    assert rates == sorted(rates)
    assert all(r < m / 1000 for r, m in zip(rates, (100, 300, 500, 700, 900), strict=True))


# --- invariants of the simulation --------------------------------------------------------

def _supplied(host, ds, loader, batch=64):
    out = simulate(Scenario(host, ds, loader, batch, 0.0, 0.0,
                            steps_for(loader.workers, loader.prefetch_factor)))
    return batch / out.period_s, out


def _stage_limits(host, ds, loader, batch=64) -> dict[str, float]:
    """Samples/s each stage could pass alone at best."""
    d = host.storage
    read_s = 1 / d.random_read_iops + ds.bytes_per_sample / (d.sequential_read_MBps * 1e6)
    batch_bytes = costs.batch_bytes_to_gpu(ds, loader, batch)
    return {"storage": d.devices / read_s,
            "decode": min(max(loader.workers, 1), host.cpu.cores)
            / costs.decode_cpu_s(ds, loader, host),
            "host link": host.pcie.copy_GBps(loader.pin_memory) * GB / batch_bytes * batch}


@pytest.mark.parametrize("host_name", ["hdd-server", "sata-ssd-server", "nvme-workstation"])
@pytest.mark.parametrize("workers", [1, 3, 16])
def test_supply_never_exceeds_the_slowest_stage(host_name, workers):
    host = load_host(host_name)
    loader = dataclasses.replace(RESNET.loader, workers=workers)
    supplied, _ = _supplied(host, IMAGENET, loader)
    assert supplied <= min(_stage_limits(host, IMAGENET, loader).values()) * 1.001


def test_no_stall_when_the_pipeline_is_faster_than_the_gpu():
    host = load_host("nvme-workstation")
    loader = dataclasses.replace(RESNET.loader, copy="overlapped")
    supplied, _ = _supplied(host, IMAGENET, loader)
    step = 2 * 64 / supplied  # a GPU that needs half of what the pipeline supplies
    out = simulate(Scenario(host, IMAGENET, loader, 64, step, 0.0, steps_for(16, 2)))
    assert out.stall_s_per_step == pytest.approx(0.0, abs=1e-9)
    assert out.period_s == pytest.approx(step, rel=1e-9)


@pytest.mark.parametrize("host_name", ["hdd-server", "nvme-workstation", "nfs-cluster"])
def test_more_workers_never_slow_it_down(host_name):
    host = load_host(host_name)
    rates = [_supplied(host, IMAGENET, dataclasses.replace(RESNET.loader, workers=w))[0]
             for w in (0, 1, 2, 4, 8, 16, 40, 80)]
    for a, b in zip(rates, rates[1:], strict=False):
        assert b >= a * 0.98, rates


def test_stage_use_names_the_saturated_stage():
    hdd, nvme = load_host("hdd-server"), load_host("nvme-workstation")
    _, out = _supplied(hdd, IMAGENET, RESNET.loader)
    assert out.utilisation["storage"] > 0.95 > out.utilisation["decode"]
    two = dataclasses.replace(RESNET.loader, workers=2)
    _, out = _supplied(nvme, IMAGENET, two)
    assert out.utilisation["decode"] > 0.9 > out.utilisation["storage"]


def test_the_simulation_is_deterministic():
    host = load_host("nfs-cluster")
    a = _supplied(host, IMAGENET, RESNET.loader)[1]
    b = _supplied(host, IMAGENET, RESNET.loader)[1]
    assert a.period_s == b.period_s and a.utilisation == b.utilisation


def test_disk_iops_rise_with_the_queue_up_to_the_rating():
    d = load_host("hdd-server").storage
    assert d.iops_at(1) == pytest.approx(1e6 / d.latency_us)
    assert d.iops_at(1000) == d.random_read_iops
    assert [d.iops_at(q) for q in range(1, 20)] == sorted(d.iops_at(q) for q in range(1, 20))


def test_gpu_decoding_moves_the_work_and_the_bytes():
    gpu = dataclasses.replace(RESNET.loader, decode="gpu")
    host = load_host("nvme-workstation")
    assert costs.decode_cpu_s(IMAGENET, gpu, host) < costs.decode_cpu_s(
        IMAGENET, RESNET.loader, host) / 50
    assert costs.batch_bytes_to_gpu(IMAGENET, gpu, 8) == 8 * IMAGENET.bytes_per_sample
    assert costs.gpu_decode_s(IMAGENET, gpu, 8) > 0 == costs.gpu_decode_s(
        IMAGENET, RESNET.loader, 8)


def test_pcie_rates_follow_the_generation():
    p = load_host("hdd-server").pcie
    assert p.raw_GBps == pytest.approx(8 * 128 / 130 * 16 / 8)  # 15.75 GB/s for 3.0 x16
    assert p.copy_GBps(True) > p.copy_GBps(False)


# --- hosts and datasets as data ----------------------------------------------------------

def test_shipped_hosts_load_with_sources():
    names = host_names()
    assert {"hdd-server", "sata-ssd-server", "nvme-workstation", "nfs-cluster"} <= set(names)
    for n in names:
        h = load_host(n)
        assert h.name == n and h.sources and h.page_cache_bytes > 0


def test_shipped_workloads_have_their_datasets():
    assert load_workload("resnet50").dataset.format == "jpeg"
    assert load_workload("cnn").dataset.name.startswith("MNIST")
    for lm in ("gpt2-small", "bert-base", "llama-7b"):
        assert load_workload(lm).dataset.format == "tokens"
    assert load_workload("transformer").dataset is None  # the seed's random inputs


def _host_doc(edit):
    doc = json.loads((REPO / "hosts/nvme-workstation.json").read_text())
    edit(doc)
    return doc


BAD_HOSTS = [
    ("missing cores", lambda d: d["cpu"].pop("cores"), "$.cpu", "'cores' is required"),
    ("zero cores", lambda d: d["cpu"].update(cores=0), "$.cpu.cores", ">= 1"),
    ("unknown disk kind", lambda d: d["storage"].update(kind="floppy"), "$.storage.kind",
     "expected one of"),
    ("reserve over RAM", lambda d: d["memory"].update(reserved_GiB=64),
     "$.memory.reserved_GiB", "below ram_GiB"),
    ("PCIe generation 7", lambda d: d["pcie"].update(generation=7), "$.pcie.generation",
     "expected one of"),
    ("infinite bandwidth", lambda d: d["storage"].update(sequential_read_MBps=1e999),
     "$.storage.sequential_read_MBps", "expected a finite number"),
]


@pytest.mark.parametrize("label, edit, path, words", BAD_HOSTS, ids=[b[0] for b in BAD_HOSTS])
def test_bad_host(capsys, write_json, label, edit, path, words):
    bad = write_json(_host_doc(edit), "nvme-workstation.json")
    code, out, err = run_cli(capsys, "hosts", "show", str(bad))
    assert code == 2 and out == "", label
    assert str(bad) in err and f"at {path}" in err and words in err, err


def test_a_host_needs_storage_or_a_network(capsys, write_json):
    bad = write_json(_host_doc(lambda d: d.pop("storage")), "h.json")
    code, _, err = run_cli(capsys, "hosts", "show", str(bad))
    assert code == 2 and str(bad) in err


def test_stripes_over_more_servers_than_there_are(write_json):
    doc = json.loads((REPO / "hosts/nfs-cluster.json").read_text())
    doc["network"]["stripe_count"] = 9
    with pytest.raises(InputError, match="stripe_count at most nodes"):
        load_host(write_json(doc, "nfs.json"))


BAD_DATASETS = [
    ("jpeg without its size", lambda d: d.pop("megapixels_per_sample"),
     "$.data.dataset.megapixels_per_sample", "needs"),
    ("megapixels of raw data", lambda d: d.update(format="raw"),
     "$.data.dataset.megapixels_per_sample", "applies to format jpeg"),
    ("no samples", lambda d: d.update(samples=0), "$.data.dataset.samples", "> 0"),
    ("unknown access", lambda d: d.update(access="zigzag"), "$.data.dataset.access",
     "expected one of"),
]


@pytest.mark.parametrize("label, edit, path, words", BAD_DATASETS,
                         ids=[b[0] for b in BAD_DATASETS])
def test_bad_dataset(capsys, write_json, label, edit, path, words):
    doc = json.loads((REPO / "workloads/resnet50.json").read_text())
    edit(doc["data"]["dataset"])
    bad = write_json(doc, "resnet50.json")
    code, _, err = run_cli(capsys, "run", str(bad), "--fidelity", "analytic")
    assert code == 2, label
    assert str(bad) in err and f"at {path}" in err and words in err, err


def test_loader_without_a_dataset_and_gpu_decoding_of_tokens(capsys, write_json):
    doc = json.loads((REPO / "workloads/transformer.json").read_text())
    doc["data"]["loader"] = {"workers": 4}
    code, _, err = run_cli(capsys, "run", str(write_json(doc, "t.json")))
    assert code == 2 and "at $.data.loader" in err and "has none" in err
    doc = json.loads((REPO / "workloads/gpt2-small.json").read_text())
    doc["data"]["loader"]["decode"] = "gpu"
    code, _, err = run_cli(capsys, "run", str(write_json(doc, "g.json")))
    assert code == 2 and "at $.data.loader.decode" in err and "decodes JPEG" in err


# --- the command line ----------------------------------------------------------------------

def test_run_with_a_host_adds_the_input_pipeline(capsys):
    code, out, _ = run_cli(capsys, "run", "cnn", "--fidelity", "analytic", "--host",
                           "hdd-server", "--json")
    assert code == 0
    doc = json.loads(out)["input_pipeline"]
    for key in ("bound", "bottleneck", "stall_s_per_step", "gpu_wait_share",
                "samples_per_s_needed", "samples_per_s_supplied", "first_epoch_s",
                "steady_epoch_s"):
        assert key in doc
    assert isinstance(doc["bound"], bool) and 0 <= doc["gpu_wait_share"] <= 1
    code, text, _ = run_cli(capsys, "run", "cnn", "--fidelity", "analytic", "--host",
                            "hdd-server")
    assert code == 0 and "Input pipeline" in text and "samples/s: GPU needs" in text


def test_run_without_a_host_is_unchanged(capsys):
    code, out, _ = run_cli(capsys, "run", "cnn", "--fidelity", "analytic", "--json")
    assert code == 0 and "input_pipeline" not in json.loads(out)
    code, text, _ = run_cli(capsys, "run", "cnn", "--fidelity", "analytic")
    assert "Input pipeline" not in text


def test_run_with_a_host_and_synthetic_inputs_is_an_error(capsys):
    code, _, err = run_cli(capsys, "run", "transformer", "--host", "hdd-server")
    assert code == 2 and "no dataset" in err and "at $.data.dataset" in err


def test_unknown_host(capsys):
    code, _, err = run_cli(capsys, "run", "cnn", "--host", "nas-of-dreams")
    assert code == 2 and "unknown host 'nas-of-dreams'" in err and "hdd-server" in err


def test_hosts_list_and_show(capsys):
    code, out, _ = run_cli(capsys, "hosts", "list")
    assert code == 0 and "nfs-cluster" in out and "page cache" in out
    code, out, _ = run_cli(capsys, "hosts", "list", "--json")
    assert {h["name"] for h in json.loads(out)} >= {"hdd-server", "nfs-cluster"}
    code, out, _ = run_cli(capsys, "hosts", "show", "nfs-cluster")
    assert code == 0 and "sources" in out and "25 Gbit/s" in out


def test_out_writes_the_pipeline_timeline(capsys, tmp_path):
    code, _, _ = run_cli(capsys, "run", "cnn", "--fidelity", "analytic", "--host",
                         "sata-ssd-server", "--out", str(tmp_path))
    assert code == 0
    assert (tmp_path / "cnn.input_pipeline.png").stat().st_size > 1000
    assert "Input pipeline" in (tmp_path / "cnn.html").read_text()


def test_sweep_over_hosts_and_a_host_parameter(capsys, tmp_path):
    out = tmp_path / "sw"
    code, text, _ = run_cli(capsys, "sweep", "cnn", "--hardware", "t4", "--host",
                            "hdd-server,nvme-workstation", "--vary", "loader.workers=1,4",
                            "--fidelity", "analytic", "--out", str(out), "--workers", "1")
    assert code == 0 and "stall/step" in text
    rows = [json.loads(line) for line in (out / "points.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["host"] for r in rows} == {"hdd-server", "nvme-workstation"}
    assert all("input_bound" in r and r["error"] is None for r in rows)
    code, _, err = run_cli(capsys, "sweep", "cnn", "--hardware", "t4", "--host",
                           "hdd-server,nvme-workstation", "--vary", "loader.workers=1,4",
                           "--fidelity", "analytic", "--out", str(out), "--workers", "1")
    assert code == 0 and "4 points reused" in err


def test_sweep_feed_parameters_need_a_host_and_valid_values(capsys, tmp_path):
    code, _, err = run_cli(capsys, "sweep", "cnn", "--vary", "host.cpu_cores=2,4",
                           "--out", str(tmp_path / "a"))
    assert code == 2 and "expected a host" in err
    code, _, err = run_cli(capsys, "sweep", "cnn", "--host", "hdd-server", "--vary",
                           "host.cpu_cores=0,4", "--out", str(tmp_path / "b"))
    assert code == 2 and "$.cpu.cores" in err and "host.cpu_cores=0" in err
    code, _, err = run_cli(capsys, "sweep", "cnn", "--host", "hdd-server", "--vary",
                           "dataset.bytes_per_sample=-1", "--out", str(tmp_path / "c"))
    assert code == 2 and "$.data.dataset.bytes_per_sample" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_bad_host_exits_2_without_traceback(write_json):
    bad = write_json({"format_version": 1}, "h.json")
    proc = subprocess.run([sys.executable, "-m", "simulator", "run", "cnn", "--host", str(bad)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stdout == ""


def test_the_simulation_holds_the_measured_loader():
    """benchmarks/input_fidelity.py against the loader measured on one machine
    (benchmarks/measured/loader/): samples/s within 15 %, waits within 15 % of the period."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import input_fidelity
    finally:
        sys.path.pop(0)
    rows = input_fidelity.check_measured_loader() + [input_fidelity.check_tensorpack()]
    assert len(rows) == 17
    assert all(ok for *_, ok in rows), [r for r in rows if not r[3]]


def test_a_sweep_file_names_its_hosts(capsys, tmp_path, write_json):
    sweep = write_json({"format_version": 1, "name": "feed", "hardware": "t4",
                        "workloads": ["cnn"], "fidelity": "analytic",
                        "host": ["hdd-server", "sata-ssd-server"],
                        "vary": {"host.cpu_cores": [2, 8]}}, "feed.json")
    out = tmp_path / "out"
    code, text, _ = run_cli(capsys, "sweep", str(sweep), "--out", str(out), "--workers", "1")
    assert code == 0 and "host.cpu_cores" in text
    doc = json.loads((out / "feed.json").read_text())
    assert doc["host"] == ["hdd-server", "sata-ssd-server"] and len(doc["points"]) == 4
    assert {p["param.host"] for p in doc["points"]} == {"hdd-server", "sata-ssd-server"}
    bad = write_json({"format_version": 1, "hardware": "t4", "workloads": ["cnn"],
                      "host": ["hdd-server", "no-such-host"]}, "bad.json")
    code, _, err = run_cli(capsys, "sweep", str(bad), "--out", str(tmp_path / "b"))
    assert code == 2 and "unknown host 'no-such-host'" in err and "$.host[1]" in err
