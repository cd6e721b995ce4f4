"""In a Jupyter kernel, ``progress=True`` shows tqdm's ipywidgets bar, run to its total with a rate and an ETA.

The cells run in a real kernel (nbclient, as in ``test_notebooks.py``); every widget message the
kernel sends is recorded, as a front end would receive it, and the bar is read from those
messages: its ``FloatProgress`` value and maximum, and the text to its right
(``done/total [elapsed<left, rate]``). A text bar on stderr instead of a widget (ipywidgets
missing in the kernel, or the console bar picked) fails the test.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
CELL_TIMEOUT_S = 300  # a hang guard, not a speed test
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: tqdm's right-hand text: done/total [elapsed<time left, rate]; the time left is "?" before a rate exists.
RIGHT_TEXT = (
    r"(?P<done>\d+)/(?P<total>\d+) \[\d\d:\d\d<(?P<left>\d\d:\d\d|\?), +(?P<rate>[\d.]+|\?)(?P<unit>\w+/s|s/\w+)\]"
)

LOAD_CELL = """
import zett_lab
shown = zett_lab.load_all({folder!r}, progress=True)
quiet = zett_lab.load_all({folder!r}, progress=False)
assert shown == quiet and len(shown) == {count}
print("same conversations")
"""

SWEEP_CELL = """
import pandas as pd
from zett_lab.study import clear_worker_state, sweep

chosen = [c for c in zett_lab.load_all({fixtures!r}) if c.id in ("auth-refresh-token", "ci-flaky-kafka")]
grid = dict(max_tokens=[2_000], keep_recent_tokens=[500], executor="serial", cache=False)
clear_worker_state()
shown = sweep(chosen, progress=True, **grid)
clear_worker_state()  # the quiet run replays too, rather than reading what the first one remembered
quiet = sweep(chosen, progress=False, **grid)
assert shown.results["error"].isna().all()
timing = ["seconds", "worker"]
pd.testing.assert_frame_equal(shown.results.drop(columns=timing), quiet.results.drop(columns=timing))
print("same results")
"""


class RecordingClient(NotebookClient):
    """An nbclient that keeps every widget state message in the order the kernel sent it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.widget_messages: list[tuple[str, dict[str, Any]]] = []

    def handle_comm_msg(self, outs: list[Any], msg: dict[str, Any], cell_index: int) -> None:
        data = msg["content"].get("data", {})
        if "state" in data:
            self.widget_messages.append((msg["content"]["comm_id"], dict(data["state"])))
        super().handle_comm_msg(outs, msg, cell_index)

    def history(self, model_id: str) -> list[dict[str, Any]]:
        """Every state a widget went through: its first state, then each update merged into it."""
        states: list[dict[str, Any]] = []
        for comm_id, update in self.widget_messages:
            if comm_id == model_id:
                states.append({**(states[-1] if states else {}), **update})
        return states


def _child(reference: str) -> str:
    """The model id inside an ``IPY_MODEL_<id>`` reference."""
    assert reference.startswith("IPY_MODEL_"), reference
    return reference.removeprefix("IPY_MODEL_")


def _shown_text(value: str) -> str:
    """A widget's HTML text as a reader sees it (tqdm escapes HTML and pads with figure spaces)."""
    return html.unescape(value).replace("\u2007", " ").strip()


def _the_bar(client: RecordingClient, cell: Any, label: str) -> tuple[str, list[dict], list[dict], list[dict]]:
    """The one tqdm widget a cell displayed: its text when displayed, the histories of its label, bar and right text."""
    errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
    assert not errors, errors
    stderr = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr")
    assert f"{label}:" not in stderr, f"a text bar on stderr instead of a widget:\n{stderr}"
    views = [o for o in cell.outputs if o.output_type == "display_data" and WIDGET_VIEW in o.data]
    assert len(views) == 1, f"expected one progress widget, got the outputs {cell.outputs}"
    fallback = views[0].data["text/plain"]  # what a front end without widgets shows
    assert re.fullmatch(rf"{label}: +\d+%\|.*\| {RIGHT_TEXT}", fallback), fallback
    box = client.history(views[0].data[WIDGET_VIEW]["model_id"])
    assert box and box[-1]["_model_name"] == "HBoxModel", box
    left, bar, right = (client.history(_child(ref)) for ref in box[-1]["children"])
    assert bar[-1]["_model_name"] == "FloatProgressModel", bar[-1]
    return fallback, left, bar, right


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory: pytest.TempPathFactory, fixture_conversations: list) -> dict[str, Any]:
    """Both cells run once in one fresh kernel: several files loaded, then a small sweep."""
    folder = tmp_path_factory.mktemp("recordings")
    for conversation in fixture_conversations[:4]:
        conversation.save(folder / f"{conversation.id}.json")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(LOAD_CELL.format(folder=str(folder), count=4)),
        nbformat.v4.new_code_cell(SWEEP_CELL.format(fixtures=str(ROOT / "fixtures"))),
    ]
    client = RecordingClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
    return {"client": client, "load": notebook.cells[0], "sweep": notebook.cells[1]}


def test_loading_several_files_shows_a_widget_bar_that_reaches_its_total(kernel_run):
    client, cell = kernel_run["client"], kernel_run["load"]
    _, left, bar, right = _the_bar(client, cell, "load")
    assert (bar[-1]["value"], bar[-1]["max"], bar[-1]["bar_style"]) == (4, 4, "success")
    assert _shown_text(left[-1]["value"]) == "load: 100%"
    final = re.fullmatch(RIGHT_TEXT, _shown_text(right[-1]["value"]))
    assert final, right[-1]["value"]
    assert (final["done"], final["total"], final["left"]) == ("4", "4", "00:00")
    assert final["unit"] in ("file/s", "s/file") and final["rate"] != "?"
    assert "same conversations" in "".join(o.get("text", "") for o in cell.outputs)


def test_a_sweep_shows_a_widget_bar_with_the_time_left_while_it_runs(kernel_run):
    client, cell = kernel_run["client"], kernel_run["sweep"]
    fallback, left, bar, right = _the_bar(client, cell, "sweep")
    total = 2  # 2 conversations x 1 max_tokens x 1 keep_recent_tokens: one step per conversation
    assert (bar[-1]["value"], bar[-1]["max"], bar[-1]["bar_style"]) == (total, total, "success")
    assert _shown_text(left[-1]["value"]) == "sweep: 100%"
    texts = [re.fullmatch(RIGHT_TEXT, _shown_text(state["value"])) for state in right if state.get("value")]
    assert all(texts), [state.get("value") for state in right]
    assert [int(t["done"]) for t in texts] == sorted(int(t["done"]) for t in texts)  # it only moves forward
    # on the page from the start, before any cell finished (the text/plain is the bar when it was displayed)
    assert fallback.endswith(f" 0/{total} [00:00<?, ?cell/s]"), fallback
    running = [t for t in texts if 0 < int(t["done"]) < total]
    assert running and all(t["left"] != "?" and t["rate"] != "?" for t in running), texts  # an ETA while it runs
    assert (texts[-1]["done"], texts[-1]["total"], texts[-1]["left"]) == (str(total), str(total), "00:00")
    assert "same results" in "".join(o.get("text", "") for o in cell.outputs)
