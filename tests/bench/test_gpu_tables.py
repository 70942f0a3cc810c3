"""The GPU tables in the docs are the ones benchmarks/gpu/tables.py makes from the committed JSON."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("gpu_tables", ROOT / "benchmarks" / "gpu" / "tables.py")
assert SPEC is not None and SPEC.loader is not None
tables = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(tables)


def test_every_marked_block_is_current():
    text = tables.tables()
    marked = [p for p in tables.TARGETS if tables.BEGIN in p.read_text()]
    assert len(marked) == 3, marked
    for path in marked:
        page = path.read_text()
        block = page[page.index(tables.BEGIN) + len(tables.BEGIN) : page.index(tables.END)]
        assert block.strip() == text.strip(), f"{path.name}: run python benchmarks/gpu/tables.py --write"


def test_tables_state_the_json_figures():
    latency = json.loads((ROOT / "benchmarks" / "results" / "gpu_latency_cuda.json").read_text())
    default = latency["variants"]["default"]
    text = tables.tables()
    assert f"{default['torchlime_over_floor']:.2f}x" in text and latency["device"] in text
    assert "Not yet measured" not in text  # every GPU result the tables read is committed
