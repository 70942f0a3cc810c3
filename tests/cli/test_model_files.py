"""ExportedProgram files (``.pt2``) are checked before ``torch.export.load``: a member that would be unpickled
must load with ``weights_only=True``, shape expressions and guards must be plain arithmetic, names plain
words; any other file is refused by name before anything in it runs. Every crafted file here holds code
that creates a marker file if it runs."""

from __future__ import annotations

import json
import pickle
import warnings
import zipfile
from pathlib import Path
from typing import Callable, Optional

import pytest
import torch

from torchlime.cli._common import CliError
from torchlime.cli._pt2 import check_exported

from tests.helpers import cli_fixtures as fx
from tests.helpers.cli_fixtures import run as cli


class Opens:
    """Unpickling this object opens (creates) the file at ``path``: what a pickle can do on load."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (self.path, "w")


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    """A legitimate ExportedProgram: weights, sample inputs and a dynamic batch (a shape expression)."""
    path = tmp_path_factory.mktemp("pt2") / "net.pt2"
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    batch = torch.export.Dim("batch", min=1, max=1024)
    torch.export.save(torch.export.export(net, (torch.rand(2, 4),), dynamic_shapes=({0: batch},)), str(path))
    return path


def _rewrite(src: Path, dst: Path, change: Callable[[str, bytes], bytes], extra: Optional[dict] = None) -> Path:
    """``src`` copied to ``dst`` with every member's bytes passed through ``change(tail, data)``, plus ``extra``."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        root = z.namelist()[0].split("/", 1)[0]
        for name in z.namelist():
            out.writestr(name, change(name.split("/", 1)[1], z.read(name)))
        for tail, data in (extra or {}).items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a duplicate name
                out.writestr(f"{root}/{tail}", data)
    return dst


def _json(edit: Callable[[dict], None]) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        doc = json.loads(data)
        edit(doc)
        return json.dumps(doc).encode()

    return change


def _replace_expressions(doc: dict, code: str) -> None:
    text = json.dumps(doc)
    first = text.index('"expr_str": "') + len('"expr_str": "')
    doc.clear()
    doc.update(json.loads(text[:first] + code.replace("'", "\\u0027") + text[text.index('"', first) :]))


def _opaque_constant(doc: dict) -> None:
    doc["config"]["evil"] = {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True, "tensor_meta": None}


def _pickled_weight(doc: dict) -> None:
    next(m for m in doc["config"].values() if m["path_name"] == "weight_0")["use_pickle"] = True


def _renamed(marker: Path, data: bytes) -> bytes:
    """The first layer's weight renamed so that the module's generated code opens the marker."""
    name = json.dumps(f'0")and open("{marker}","w")and getattr(self,"0.weight')
    return data.replace(b'"0.weight"', name.encode())


def _opens(marker: Path, data: bytes) -> bytes:
    return pickle.dumps(Opens(marker), protocol=0)


def _expression(marker: Path, data: bytes) -> bytes:
    return _json(lambda d: _replace_expressions(d, f"Symbol('s0') if open('{marker}','w') else 0"))(data)


def _guard(marker: Path, data: bytes) -> bytes:
    return _json(lambda d: d.update(guards_code=[f"open('{marker}','w') is None"]))(data)


def _spec_key(marker: Path, data: bytes) -> bytes:
    """A keyword of the inputs' spec that the generated forward would write as code, in quotes."""

    def edit(doc: dict) -> None:
        signature = doc["graph_module"]["module_call_graph"][0]["signature"]
        spec = json.loads(signature["in_spec"])
        spec[1]["children_spec"][1]["context"] = json.dumps([f"x':open('{marker}','w'),'z"])
        signature["in_spec"] = json.dumps(spec)

    return _json(edit)(data)


def _argument(marker: Path, data: bytes) -> bytes:
    """A parameter of the generated forward whose annotation opens the marker."""
    names = json.dumps({"forward_arg_names": [f"input:open('{marker}','w')"]})[1:-1]
    return data.replace(b'"forward_arg_names": ["input"]', names.encode())


WEIGHTS, CONSTANTS = "data/weights/model_weights_config.json", "data/constants/model_constants_config.json"
#: what each crafted file changes (member tail -> new content from the marker's path and the old bytes) and
#: the member its refusal names
CASES: dict[str, tuple[dict[str, Callable[[Path, bytes], bytes]], str]] = {
    "sample inputs": ({"data/sample_inputs/model.pt": _opens}, "data/sample_inputs/model.pt"),
    "pickled weight": ({WEIGHTS: lambda m, b: _json(_pickled_weight)(b), "data/weights/weight_0": _opens}, "weight_0"),
    "opaque constant": ({CONSTANTS: lambda m, b: _json(_opaque_constant)(b)}, "data/constants/opaque_obj_0"),
    "parameter name": ({WEIGHTS: _renamed, "models/model.json": _renamed}, "model_weights_config.json"),
    "shape expression": ({"models/model.json": _expression}, "models/model.json holds a shape expression"),
    "guard": ({"models/model.json": _guard}, "models/model.json holds a guard"),
    "spec key": ({"models/model.json": _spec_key}, "models/model.json holds a name with characters"),
    "forward argument": ({"models/model.json": _argument}, "(forward_arg_names)"),
}


def _crafted(program: Path, tmp_path: Path, case: str) -> tuple[Path, Path]:
    """The crafted file of ``case`` and the marker its content would create."""
    changes, _ = CASES[case]
    marker = tmp_path / "ran"
    extra = {"data/constants/opaque_obj_0": pickle.dumps(Opens(marker))} if case == "opaque constant" else {}
    change = lambda t, b: changes[t](marker, b) if t in changes else b  # noqa: E731
    return _rewrite(program, tmp_path / "evil.pt2", change, extra), marker


@pytest.mark.parametrize("case", list(CASES))
def test_a_pt2_that_would_run_code_is_refused_by_name_before_loading(program, tmp_path, case):
    evil, marker = _crafted(program, tmp_path, case)
    with pytest.raises(CliError, match=r"MODEL \S*evil.pt2 is refused: its member \S+ holds ") as refused:
        check_exported(evil)
    assert CASES[case][1] in str(refused.value) and str(refused.value).endswith("loading it could run code")
    assert not marker.exists()


def test_the_command_line_refuses_such_a_file_and_runs_nothing(program, tmp_path, capsys):
    marker = tmp_path / "ran"
    evil = _rewrite(
        program,
        tmp_path / "evil.pt2",
        lambda t, b: pickle.dumps(Opens(marker), protocol=2) if t == "data/sample_inputs/model.pt" else b,
    )
    code, out, err = cli(capsys, "explain", evil, fx.png(tmp_path / "a.png"), "--out", tmp_path / "o")
    assert code == 2 and out == "" and not marker.exists() and not (tmp_path / "o").exists()
    assert f"MODEL {evil} is refused: its member net/data/sample_inputs/model.pt holds a pickle that" in err
    assert "torch.load(weights_only=True) refuses (Unsupported global: GLOBAL io.open" in err


def test_a_pt2_with_two_members_of_one_name_is_refused(program, tmp_path):
    twice = _rewrite(program, tmp_path / "twice.pt2", lambda t, b: b, {"models/model.json": b"{}"})
    with pytest.raises(CliError, match="two of its members share a name"):
        check_exported(twice)


def test_a_legitimate_pt2_passes_and_loads(program):
    check_exported(program)
    net = torch.export.load(str(program)).module()
    assert net(torch.rand(5, 4)).shape == (5, 2)


@pytest.mark.parametrize("command", ["explain", "explain-dataset", "bench"])
def test_the_help_says_which_model_files_run_code(capsys, command):
    code, out, _ = cli(capsys, command, "--help")
    text = " ".join(out.split())
    assert code == 0 and "TorchScript files and module:factory run code: use only ones you trust" in text
    assert "refused if it holds a pickle that is not weights-only" in text
