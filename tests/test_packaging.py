"""The shipped data resolves from an installed wheel as from the checkout."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    wheel_dir, target = tmp / "dist", tmp / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(wheel_dir), str(REPO)], capture_output=True, text=True)
    if build.returncode:
        pytest.fail(f"building the wheel failed:\n{build.stderr}")
    wheel = next(wheel_dir.glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    return target, tmp


def test_installed_package_finds_hardware_and_workloads(installed):
    target, cwd = installed
    env = {**os.environ, "PYTHONPATH": str(target)}
    proc = subprocess.run([sys.executable, "-m", "simulator", "run", "workloads/transformer.json",
                           "--hardware", "t4", "--json"], cwd=cwd, env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert str(target) in doc["hardware"]["path"]
    assert str(target) in doc["workload"]["path"]
    listing = subprocess.run([sys.executable, "-m", "simulator", "hardware", "list"], cwd=cwd,
                             env=env, capture_output=True, text=True, check=True)
    assert "rx-7900-xtx" in listing.stdout and "h100-sxm" in listing.stdout
    hosts = subprocess.run([sys.executable, "-m", "simulator", "hosts", "show", "hdd-server",
                            "--json"], cwd=cwd, env=env, capture_output=True, text=True)
    assert hosts.returncode == 0, hosts.stderr
    assert str(target) in json.loads(hosts.stdout)["path"]


def test_installed_package_outside_the_checkout_reads_nested_paths(installed, tmp_path):
    """A path of several parts (a missing workload, a shipped validation card named by its
    repo path) from outside the checkout: a clear error and the shipped file, where Python
    3.10 and 3.11 raised a TypeError from importlib.resources' MultiplexedPath."""
    target, _ = installed
    env = {**os.environ, "PYTHONPATH": str(target)}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "simulator", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True)

    missing = run("run", "nosuch/w.json")
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.strip() == "error: nosuch/w.json: file not found"
    trace = tmp_path / "t.trace"
    trace.write_text("0x0 READ 0\n0x40 WRITE 3\n")
    dram = run("dram", str(trace), "--hardware", "hardware/validation/ramulator2-gddr6-8ch.json",
               "--json")
    assert dram.returncode == 0, dram.stderr
    assert json.loads(dram.stdout)["requests"] == 2


def test_every_package_is_listed_for_the_wheel(repo):
    """pyproject names its packages one by one (the data folders are mapped in): a new
    subpackage left off the list would be missing from the installed wheel."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {str(p.parent.relative_to(repo)).replace("/", ".")
             for p in (repo / "simulator").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


def test_the_installed_package_runs_the_main_command_outside_the_checkout(tmp_path):
    """What CI installed (`pip install '.[test]'`, not editable) runs the README's main command
    and refuses bad input cleanly from a folder outside the checkout, on this Python (the
    oldest pyproject claims is the one CI has)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([sys.executable, "-c", "import simulator; print(simulator.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    # a virtual environment may live inside the checkout (.venv/): only the checkout's own
    # sources count as an editable install
    if where.returncode or Path(where.stdout.strip()).resolve().is_relative_to(
            REPO / "simulator"):
        pytest.skip("the package is not installed, or installed editable from this checkout "
                    "(CI installs it from the checkout, not editable)")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "simulator", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True)

    main = run("run", "workloads/transformer.json", "--json")
    assert main.returncode == 0, main.stderr
    doc = json.loads(main.stdout)
    assert not Path(doc["workload"]["path"]).resolve().is_relative_to(REPO / "workloads")
    assert doc["step_time_s"] > 0
    bad = run("run", "workloads/nosuch.json")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "workloads/nosuch.json: file not found" in bad.stderr
