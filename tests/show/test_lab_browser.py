"""The installed demo in a real JupyterLab in a real browser: every notebook runs and reads.

zett-lab as a user gets it: the wheel built from this checkout, installed with its ``lab`` extra into a
fresh virtual environment outside the repository, ``zett-lab demo DIR`` run there, and ``zett-lab lab
DIR`` starting JupyterLab on it (127.0.0.1, free port, random token, no browser, news and update checks
off, settings/workspaces/runtime in a temporary directory; as root it adds ``--allow-root`` itself).
Debian's chromium, driven through Playwright at 1280 px, runs every notebook as a user would (Run All
Cells), and each notebook fails on an error output, a warning printed by a cell (a matplotlib layout
warning among them), a broken or collapsed image, an element wider than its output area, or a
JavaScript error. Notebooks 01 and 02 are also clicked: a timeline step, a slider, a heatmap cell.

The environment is built once per test run (shared by pytest-xdist workers through a lock);
``ZETT_LAB_INSTALLED_PYTHON`` names an existing one instead. Skipped where chromium or Playwright is
missing, except on CI (``CI=true``), where it fails. Screenshots go to ``test-output/lab_browser/``.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output" / "lab_browser"
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
#: What shows once a notebook's last interactive output is drawn.
READY = {
    "01-explore.ipynb": ".zl-explorer .zl-timeline img",
    "02-tune-thresholds.ipynb": ".zl-sweep-explorer .zl-heatmap img",
}

#: What anywidget's front end reports when a busy browser took over 2 s to load a model's code. Such a model drops
#: every later update from the kernel; zett_lab's clickable views never get one (each picture is a new view, see
#: zett_lab/show/widgets/clickable.py), so they draw all the same, and each test waits for what they draw.
SLOW_ANYWIDGET = "[anywidget] Failed to initialize model."

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check(command: list[str], log: Path, **options) -> None:
    with open(log, "ab") as handle:
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, timeout=1800, **options)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, command))} failed:\n{log.read_text(errors='replace')[-4000:]}")


def _install(shared: Path) -> Path:
    """A fresh virtual environment with the wheel of this checkout and its lab extra; its Python."""
    venv = shared / "venv"
    python = venv / "bin" / "python"
    if (shared / "installed").exists():
        return python
    log = shared / "install.log"
    _check([sys.executable, "-m", "build", "--wheel", "--outdir", str(shared / "dist"), str(ROOT)], log)
    wheel = next((shared / "dist").glob("zett_lab-*.whl"))
    _check([sys.executable, "-m", "venv", str(venv)], log)
    _check([str(python), "-m", "pip", "install", "--quiet", f"{wheel}[lab]"], log, cwd=shared)
    (shared / "installed").touch()
    return python


def _outside_environment() -> dict[str, str]:
    """This process's environment without what would point the installed zett-lab back at this checkout."""
    return {
        key: value
        for key, value in os.environ.items()
        if key != "PYTHONPATH" and not key.startswith(("ZETT_LAB_FIXTURES", "PYTHONWARNINGS"))
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of an environment where zett-lab[lab] is installed from a wheel, not from this checkout."""
    given = os.environ.get("ZETT_LAB_INSTALLED_PYTHON")
    if given:
        return Path(given)
    run = tmp_path_factory.getbasetemp()  # under pytest-xdist, each worker's base is inside the run's
    shared = (run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run) / "zett-lab-installed"  # one per run
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        python = _install(shared)
    where = subprocess.run(
        [str(python), "-c", "import zett_lab; print(zett_lab.__file__)"],
        capture_output=True,
        text=True,
        cwd=shared,
        env=_outside_environment(),
    )
    assert where.returncode == 0 and not where.stdout.startswith(str(ROOT)), where.stdout + where.stderr
    return python


@pytest.fixture(scope="module")
def lab(installed: Path, tmp_path_factory: pytest.TempPathFactory):
    """``zett-lab demo DIR`` and ``zett-lab lab DIR`` from the installed environment; yields (base_url, token, log)."""
    work = tmp_path_factory.mktemp("lab")
    zett_lab = installed.parent / "zett-lab"
    env = _outside_environment()
    demo = subprocess.run(
        [str(zett_lab), "demo", "study"], capture_output=True, text=True, cwd=work, timeout=120, env=env
    )
    assert demo.returncode == 0, demo.stderr
    assert sorted(p.name for p in (work / "study" / "notebooks").glob("*.ipynb")) == NOTEBOOKS
    settings = work / "settings"
    for extension, name, values in (
        ("apputils-extension", "notification", {"fetchNews": "false", "checkForUpdates": False}),
        ("notebook-extension", "tracker", {"autoStartDefaultKernel": True}),  # no "Select Kernel" dialog
    ):
        (settings / "@jupyterlab" / extension).mkdir(parents=True)
        (settings / "@jupyterlab" / extension / f"{name}.jupyterlab-settings").write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env.update(
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(work / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(work / "runtime"),
        JUPYTER_CONFIG_DIR=str(work / "config"),
        ZETT_LAB_OUT=str(work / "out"),
        ZETT_LAB_CACHE=str(work / "cache" / "summaries.sqlite"),
    )
    log = work / "jupyterlab.log"
    command = [
        str(zett_lab),
        "lab",
        "study",
        "--",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.token={token}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    with open(log, "wb") as handle:
        server = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=work)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)
        yield base, token, log
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


class Notebook:
    """One notebook open in JupyterLab at 1280 px, with every JavaScript error recorded (but ``SLOW_ANYWIDGET``)."""

    def __init__(self, browser, lab, name: str) -> None:
        self.base, self.token, self.log = lab
        self.browser = browser
        self.name = name
        self.file = self.log.parent / "study" / "notebooks" / name
        #: The notebook as ``zett-lab demo`` wrote it: written back before it is run again on a new kernel.
        self.as_written = self.file.read_bytes()
        self.errors: list[str] = []
        self.page = self._new_page()

    def _new_page(self):
        page = self.browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("pageerror", self._record)
        return page

    def _record(self, error: object) -> None:
        if str(error) != SLOW_ANYWIDGET:
            self.errors.append(str(error))

    def _api(self, method: str, path: str) -> object:
        """What the server's REST API answers (``GET``), or does (``DELETE``), for ``path`` under ``/api/``."""
        request = urllib.request.Request(f"{self.base}/api/{path}?token={self.token}", method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def _session(self) -> dict | None:
        """The server's session of this notebook (with its kernel), if it has one."""
        sessions = self._api("GET", "sessions")
        return next((s for s in sessions if s.get("path") == self.name), None)

    def _kernel_state(self) -> str | None:
        """The execution state of the notebook's kernel as the server last heard it (None: no kernel)."""
        kernel = (self._session() or {}).get("kernel") or {}
        return kernel.get("execution_state")

    def open(self) -> None:
        page = self.page
        # A workspace of its own: JupyterLab would otherwise reopen the notebooks an earlier test left open.
        workspace = self.name.removesuffix(".ipynb")
        page.goto(
            f"{self.base}/lab/workspaces/{workspace}/tree/{self.name}?token={self.token}", wait_until="domcontentloaded"
        )
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        _accept_kernel_dialog(page)
        _wait_idle(page, 60_000)
        current = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        if current.count():  # the file browser takes a quarter of a 1280 px window: close it, as a reader would
            current.first.click()

    def run(self, ready: str | None, timeout_ms: int = 600_000, attempts: int = 3) -> None:
        """Run All Cells; wait for ``ready`` (if any) and for every cell to finish.

        A run the kernel never received is run again, from the notebook as written, on a new kernel in a new page:
        under load, JupyterLab sometimes starts a kernel for a notebook as it opens and replaces it at once with a
        second one (its log: two "Kernel started" and the first one's "Kernel shutdown", within seconds), and the page
        then sends Run All to neither; its cells wait while the kernel sits idle (``DROPPED_AFTER_S``). A notebook
        that fails still fails (its error outputs are checked after this); one still running after ``timeout_ms``
        fails here, saying what the page and the server show.
        """
        for attempt in range(attempts):
            _run_all_cells(self.page)
            if self._ran(ready, timeout_ms):
                _wait_idle(self.page, 120_000)
                return
            if attempt == attempts - 1:
                pytest.fail(f"{self.name}: Run All Cells never reached the kernel, {attempts} times: {self._state()}")
            self._open_again()

    def _ran(self, ready: str | None, timeout_ms: int) -> bool:
        """Whether every code cell finished and ``ready`` shows; False when the run was dropped (cells wait while
        the kernel has been idle for ``DROPPED_AFTER_S``)."""
        deadline = time.monotonic() + timeout_ms / 1000
        idle_since = None
        while time.monotonic() < deadline:
            if self.page.evaluate(_ALL_CELLS_RAN):
                if not ready or self.page.locator(ready).first.is_visible():
                    return True
                idle_since = None
            elif self._kernel_state() in (None, "idle"):
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > DROPPED_AFTER_S:
                    return False
            else:
                idle_since = None
            time.sleep(1)
        pytest.fail(f"{self.name}: not finished after {timeout_ms / 1000:.0f} s: {self._state()}")

    def _open_again(self) -> None:
        """A new kernel and a new page on the notebook as written (its outputs of the dropped run gone)."""
        self.page.close()
        session = self._session()
        if session is not None:
            self._api("DELETE", f"sessions/{session['id']}")  # shuts its kernel down
        self.file.write_bytes(self.as_written)
        self.page = self._new_page()
        self.open()

    def _state(self) -> str:
        """What the page and the server say, for a failure: the code cells' prompts, the kernel's state and the
        kernels the server started and shut down."""
        prompts = self.page.evaluate(_prompts_where("prompts.map(p => p.textContent.trim() || '[ ]').join(' ')"))
        kernels = [
            line.strip()[:120]
            for line in self.log.read_text(errors="replace").splitlines()
            if "Kernel started" in line or "Kernel shutdown" in line or "Kernel restarted" in line
        ]
        return f"prompts {prompts}; kernel {self._kernel_state()}; server: {kernels}"

    def check(self) -> None:
        """No error output, no warning printed, no broken or collapsed image, nothing wider than its output area."""
        page = self.page
        page.wait_for_timeout(500)  # images decode
        assert not _error_outputs(page), f"{self.name}: {_error_outputs(page)}"
        assert not _warnings(page), f"{self.name} printed warnings: {_warnings(page)}"
        assert not _broken_images(page), f"{self.name}: broken or collapsed images {_broken_images(page)}"
        assert not _too_wide(page), f"{self.name}: wider than their output area: {_too_wide(page)}"

    def close(self) -> None:
        """A screenshot of where the notebook ended (also when the test failed), then the page's JavaScript errors."""
        OUTPUT.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(OUTPUT / f"{self.name.removesuffix('.ipynb')}.png"), full_page=False)
        (OUTPUT / "jupyterlab.log").write_text(self.log.read_text(errors="replace"))
        self.page.close()
        assert not self.errors, f"JavaScript errors on the page: {self.errors}"


@pytest.fixture
def notebook(browser, lab):
    """Open a notebook of the installed demo (closed, with a screenshot, after the test)."""
    opened: list[Notebook] = []

    def open_notebook(name: str) -> Notebook:
        opened.append(Notebook(browser, lab, name))
        opened[-1].open()
        return opened[-1]

    yield open_notebook
    for each in opened:
        each.close()


def test_explorer_step_click_and_slider(notebook):
    """01-explore: runs and reads; click a compaction step of the timeline, then move the max_tokens slider."""
    page_of = notebook("01-explore.ipynb")
    page_of.run(READY["01-explore.ipynb"])
    page_of.check()
    page = page_of.page
    explorer = page.locator(".zl-explorer").first
    explorer.scroll_into_view_if_needed()
    _click_a_compaction_step(page, explorer)

    image = explorer.locator(".zl-timeline img").first
    table = explorer.locator(".zl-steps-area").first
    before_src, before_table = image.get_attribute("src"), table.inner_html()
    assert "data-steps" in before_table
    handle = explorer.locator(".zl-max-tokens .noUi-handle").first
    handle.focus()
    for _ in range(8):
        page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "([src, selector]) => { const img = document.querySelector(selector); return img && "
        "img.getAttribute('src') !== src; }",
        arg=[before_src, ".zl-explorer .zl-timeline img"],
        timeout=60_000,
    )
    page.wait_for_function(
        "(old) => { const t = document.querySelector('.zl-explorer .zl-steps-area'); return t && t.innerHTML !== old; }",
        arg=before_table,
        timeout=60_000,
    )
    _wait_idle(page, 60_000)
    assert table.inner_html() != before_table
    explorer.screenshot(path=str(OUTPUT / "explorer.png"))


def _click_a_compaction_step(page, explorer) -> None:
    """Click the timeline where the step table says a compaction was applied: one labelled table of that step's
    decision and the compaction's facts, then its summary and what it lost."""
    step = explorer.locator(".zl-steps tr.zl-applied td").first.inner_text().replace(",", "")
    region = explorer.locator(f".zl-timeline .zl-region[data-key='step:{step}']")
    assert region.count() == 1
    region.click()
    shown = explorer.locator(f".zl-step-area table[data-step='{step}']")
    shown.wait_for(timeout=60_000)
    panel = explorer.locator(".zl-step-area").first
    text = panel.inner_text()
    assert "a compaction was applied" in text and "Summary" in text and "What was lost" in text
    assert panel.locator("table.zl-step caption").inner_text().startswith(f"Step {step}:")
    assert panel.locator("table.zl-compaction").count() == 0, "the step's facts are one table, not two"
    assert explorer.locator(".zl-timeline .zl-region.zl-selected").get_attribute("data-key") == f"step:{step}"
    OUTPUT.mkdir(parents=True, exist_ok=True)
    explorer.screenshot(path=str(OUTPUT / "explorer-step.png"))


def test_sweep_explorer_cell_click(notebook):
    """02-tune-thresholds: runs and reads; the metric picker lists labels; a heatmap cell click shows its timeline."""
    page_of = notebook("02-tune-thresholds.ipynb")
    page_of.run(READY["02-tune-thresholds.ipynb"])
    page_of.check()
    page = page_of.page
    sweep = page.locator(".zl-sweep-explorer").first
    sweep.scroll_into_view_if_needed()
    picker = sweep.locator(".widget-dropdown", has_text="metric").locator("select")
    labels = picker.evaluate("select => [...select.options].map(o => o.text.replaceAll('\\u00a0', ' '))")
    assert "Steps over budget" in labels and not {"replayed", "shared_steps", "model_calls", "seconds"} & set(labels)
    assert sweep.locator(".zl-heatmap .zl-region.zl-selected").get_attribute("data-key") == "16000:2000"
    before = sweep.locator(".zl-cell-summary").first.inner_html()
    sweep.locator(".zl-heatmap .zl-region[data-key='32000:4000']").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.zl-sweep-explorer')]"
        ".some(e => e.textContent.includes('max_tokens=32,000 · keep_recent_tokens=4,000'))",
        timeout=60_000,
    )
    _wait_idle(page, 60_000)
    assert sweep.locator(".zl-heatmap .zl-region.zl-selected").get_attribute("data-key") == "32000:4000"
    assert sweep.locator(".zl-cell-summary").first.inner_html() != before
    dropdown = sweep.locator(".widget-dropdown", has_text="cell: max_tokens").locator("select")
    assert dropdown.evaluate("select => select.options[select.selectedIndex].text") == "32,000"  # follows the click
    sweep.screenshot(path=str(OUTPUT / "sweep-explorer.png"))


@pytest.mark.parametrize("name", [n for n in NOTEBOOKS if n not in READY])
def test_notebook_runs_and_reads(notebook, name):
    """03, 04, 05: every cell runs, and every figure, legend and table reads inside its output area."""
    page_of = notebook(name)
    page_of.run(None)
    page_of.check()
    if name == "03-compare-summary-models.ipynb":
        views = page_of.page.locator(".zl-comparison")
        assert views.count() == 2
        production = views.nth(1)
        assert production.locator("img").first.evaluate("img => img.naturalWidth") > 300, "production_view draws"
        assert "Production summaries" in production.inner_text()


def _accept_kernel_dialog(page) -> None:
    """Accept a "Select Kernel" dialog if JupyterLab shows one anyway (the notebook names python3)."""
    try:
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle'], .jp-Dialog", timeout=60_000)
    except Exception:  # noqa: BLE001 - no dialog to accept
        return
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    if dialog.count():
        dialog.first.click()


def _prompts_where(condition: str) -> str:
    """A page function testing the code cells' prompts (``prompts``: their elements; ``[n]`` when a cell has run,
    ``[*]`` while it waits or runs) with the JavaScript ``condition``."""
    return (
        "() => { const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]; "
        f"return {condition}; }}"
    )


def _run_all_cells(page, attempts: int = 6) -> None:
    """Run > Run All Cells, as a user would (retried while JupyterLab is still settling: the command starts
    disabled)."""
    started = _prompts_where("prompts.some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))")
    for attempt in range(attempts):
        page.locator(".jp-Notebook .jp-Cell").first.click()
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        item = page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel", has_text="Run All Cells").first
        try:
            item.click(timeout=10_000)
            page.wait_for_function(started, timeout=30_000)  # patient: the machine may be busy with other tests
            return
        except Exception:  # retried; re-raised on the last attempt
            page.keyboard.press("Escape")
            if attempt == attempts - 1:
                raise
            time.sleep(1)


#: How long a notebook's kernel may sit idle while cells still wait before the run counts as dropped (between two
#: cells of a running notebook it is idle for milliseconds).
DROPPED_AFTER_S = 30
#: Whether every code cell has finished (its prompt shows its execution count; no ``[*]`` or blank prompt left).
_ALL_CELLS_RAN = _prompts_where("prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent))")


def _wait_idle(page, timeout_ms: int) -> None:
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout_ms)


def _error_outputs(page) -> list[str]:
    return page.eval_on_selector_all(
        ".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']",
        "els => els.map(e => e.textContent.slice(0, 500))",
    )


def _warnings(page) -> list[str]:
    """Text a cell printed on stderr that is a warning (matplotlib's "constrained_layout not applied" is one)."""
    return page.eval_on_selector_all(
        ".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']",
        "els => els.map(e => e.textContent).filter(t => /warn/i.test(t)).map(t => t.slice(0, 500))",
    )


def _broken_images(page) -> list[str]:
    """Images in outputs that did not load, or were drawn narrower than a readable figure (200 px)."""
    return page.eval_on_selector_all(
        ".jp-OutputArea-output img",
        """imgs => imgs.filter(img => img.offsetParent !== null)
            .filter(img => !img.complete || img.naturalWidth === 0 || img.getBoundingClientRect().width < 200)
            .map(img => `${img.alt || img.className} ${img.naturalWidth}x${img.naturalHeight}`)""",
    )


def _too_wide(page) -> list[str]:
    """Elements reaching past the right edge of their output area (a cut legend, a table that scrolls sideways)."""
    return page.eval_on_selector_all(
        ".jp-OutputArea-output",
        """areas => areas.flatMap(area => {
            const right = area.getBoundingClientRect().right + 1;
            const cell = area.closest('.jp-Cell');
            const where = cell ? `cell ${[...cell.parentElement.children].indexOf(cell) + 1}` : 'an output';
            return [...area.querySelectorAll('*')]
                .filter(e => e.offsetParent !== null && e.getBoundingClientRect().right > right)
                .slice(0, 3)
                .map(e => `${where}: ${e.tagName}.${e.className} ${Math.round(e.getBoundingClientRect().right - right)} px`);
        })""",
    )
