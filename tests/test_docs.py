"""The README and docs/ stay true: their links resolve, the commands and options they show
exist in the parser (and every one the parser has is documented), the file formats name every
key of the schemas, their Python examples run, and they cite nothing outside the repository."""

import json
import os
import re
import shlex
import subprocess

import pytest
from conftest import REPO

from simulator.cli import build_parser

DOCS = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path) -> set[str]:
    return {_slug(m) for m in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)}


def test_readme_is_short():
    assert len((REPO / "README.md").read_text().splitlines()) <= 200


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_point_to_files_and_headings_that_exist(doc):
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        assert dest.exists(), f"{doc.name}: link to missing {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{doc.name}: no heading for #{anchor} in {path}"


def _command_lines() -> list[tuple[str, str]]:
    """Every `python -m simulator ...` the docs show as code: inline, or a line of a code
    block (indented, or fenced); usage patterns (NAME, [OPTION], ...) are left out."""
    out = []
    for doc in DOCS:
        text = doc.read_text().replace("\\\n", " ")
        found = re.findall(r"`python -m simulator ([^`]*)`", text)
        found += re.findall(r"^(?: {4}|\$ ).*?python -m simulator ([^&|\n]*)$", text,
                            flags=re.M)
        for line in found:
            if "[" in line or "..." in line or re.search(r"\b[A-Z]{3,}\b", line):
                continue
            out.append((doc.name, line.strip()))
    return out


@pytest.mark.parametrize("where, line", _command_lines())
def test_documented_commands_parse(where, line):
    try:
        build_parser().parse_args(shlex.split(line))
    except SystemExit as exc:
        if exc.code:
            pytest.fail(f"{where}: 'python -m simulator {line}' does not parse")


def _parser_options() -> dict[str, set[str]]:
    """Each subcommand (and sub-action) with its option strings."""
    parser = build_parser()
    found: dict[str, set[str]] = {}

    def walk(p, name):
        for action in p._actions:
            if action.option_strings:
                found.setdefault(name, set()).update(
                    o for o in action.option_strings if o.startswith("--") and o != "--help")
            if action.__class__.__name__ == "_SubParsersAction":
                for sub, subparser in action.choices.items():
                    walk(subparser, f"{name} {sub}".strip())
    walk(parser, "")
    return found


def test_every_command_and_option_is_documented():
    text = (REPO / "docs/commands.md").read_text()
    for command, options in _parser_options().items():
        for word in command.split():
            assert f"`{word}" in text or f" {word} " in text, f"command {word} undocumented"
        for option in options:
            assert option in text, f"{command or 'python -m simulator'} {option} undocumented"


def test_every_documented_option_exists():
    known = set().union(*_parser_options().values()) | {"--help"}
    text = (REPO / "docs/commands.md").read_text() + (REPO / "README.md").read_text()
    for option in set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", text)):
        assert option in known, f"{option} is documented but no command has it"


def _schema_keys(node, out: set[str]) -> set[str]:
    if isinstance(node, dict):
        for key, value in node.get("properties", {}).items():
            out.add(key)
            _schema_keys(value, out)
        for key in ("items", "additionalProperties", "then", "if", "else"):
            if isinstance(node.get(key), dict):
                _schema_keys(node[key], out)
        for value in node.get("$defs", {}).values():
            _schema_keys(value, out)
        for key in ("oneOf", "anyOf", "allOf"):
            for value in node.get(key, []):
                _schema_keys(value, out)
    return out


@pytest.mark.parametrize("schema", ["hardware", "host", "workload", "sweep", "trace"])
def test_formats_name_every_schema_key(schema):
    doc = (REPO / "docs/formats.md").read_text()
    path = REPO / "simulator/config/schemas" / f"{schema}.schema.json"
    keys = _schema_keys(json.loads(path.read_text()), set())
    missing = sorted(k for k in keys
                     if not re.search(r"(?<![\w])" + re.escape(k) + r"(?![\w])", doc))
    assert not missing, f"docs/formats.md does not name {schema} keys {missing}"


def _python_blocks() -> list[tuple[str, int, str]]:
    out = []
    for doc in DOCS:
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)):
            out.append((doc.name, i, block))
    return out


@pytest.mark.parametrize("where, index, code", _python_blocks(),
                         ids=[f"{w}-{i}" for w, i, _ in _python_blocks()])
def test_python_examples_run(where, index, code, capsys):
    here = os.getcwd()
    os.chdir(REPO)  # (their paths are the repository's, as a notebook beside it has them)
    try:
        exec(compile(code, f"{where} example {index}", "exec"), {})
    finally:
        os.chdir(here)


def test_nothing_cites_a_path_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    pattern = re.compile(r"\.\./shared\b|shared[/\\](reference|seeds)\b")
    bad = [f for f in files if f.endswith((".md", ".py", ".json", ".toml"))
           and f != "tests/test_docs.py" and pattern.search((REPO / f).read_text())]
    assert not bad, f"cite public sources, not paths outside the repository: {bad}"


def test_the_python_api_the_readme_shows():
    import simulator

    for name in simulator.__all__:
        obj = getattr(simulator, name)
        assert obj.__doc__, f"simulator.{name} has no docstring"
    from simulator import analyze, load_hardware, load_host, load_workload

    assert load_hardware("t4").name == "t4" and load_host("hdd-server").name == "hdd-server"
    assert analyze(load_workload("cnn"), "t4", fidelity="analytic").fits


# the run excerpts the docs show: (document, the sentence naming its command); the block after
_EXCERPTS = (
    ("README.md", "An excerpt of `run resnet50 --hardware a10 --host sata-ssd-server`:"),
    ("commands.md", "An excerpt of `run workloads/transformer.json` (the T4, the default):"))
_FIGURE = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


@pytest.mark.parametrize("doc, lead", _EXCERPTS, ids=[d for d, _ in _EXCERPTS])
def test_the_run_excerpts_show_what_run_prints(doc, lead, capsys):
    """Every figure of a documented `run` excerpt is in what that command prints at HEAD: a
    change of model or output that moves one leaves the docs stale, and this says which."""
    from simulator.cli import main

    path = next(p for p in DOCS if p.name == doc)
    text = path.read_text()
    assert lead in text, f"{doc}: no excerpt introduced by {lead!r}"
    block = re.search(r"```\n(.*?)```", text[text.index(lead):], re.S).group(1)
    command = re.search(r"`run ([^`]*)`", lead).group(1)
    here = os.getcwd()
    os.chdir(REPO)
    try:
        assert main(["run", *shlex.split(command)]) == 0
    finally:
        os.chdir(here)
    printed = set(_FIGURE.findall(capsys.readouterr().out))
    stale = [f for f in _FIGURE.findall(block) if f not in printed]
    assert not stale, f"{doc}: `run {command}` no longer prints {stale}"
