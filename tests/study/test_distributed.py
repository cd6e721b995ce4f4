"""Sweeps on a dask.distributed cluster whose workers share no filesystem with the driver.

Each worker of a ``LocalCluster`` gets its own summary-cache location (as a machine of a real
cluster would have); the driver's cache must end up with every summary the sweep made, and a
worker killed mid-sweep must cost only the cells it had not finished.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from zett_lab.replay import replay
from zett_lab.study import clear_worker_state, sweep
from zett_lab.summarizers import SummaryCache

distributed = pytest.importorskip("distributed")

GRID = {"max_tokens": [3_000, 6_000, 20_000], "keep_recent_tokens": [800, 2_500], "summarizers": ["anchors:0.1"]}


class OwnCache(distributed.WorkerPlugin):
    """Gives every worker a summary cache of its own, under ``root`` (no location shared with the driver)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def setup(self, worker: distributed.Worker) -> None:
        folder = Path(self.root) / f"worker-{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["ZETT_LAB_CACHE"] = str(folder / "summaries.sqlite")


def cluster():
    return distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None)


def test_new_summaries_travel_back_to_the_drivers_cache(fixture_conversations, tmp_path):
    conversations = [c for c in fixture_conversations if c.id in ("billing-rounding", "search-p95-regression")]
    driver = SummaryCache(tmp_path / "driver" / "summaries.sqlite")
    clear_worker_state()
    with cluster() as local, distributed.Client(local) as client:
        client.register_plugin(OwnCache(str(tmp_path / "workers")))
        result = sweep(conversations, **GRID, executor=client.get_executor(), cache=driver, progress=False)
        locations = client.run(lambda: os.environ["ZETT_LAB_CACHE"])
    assert result.results["error"].isna().all()
    assert len(set(locations.values())) == 2 and str(driver.path) not in locations.values()
    made = int(result.results["model_calls"].sum())
    assert made > 0 and result.config["summaries_merged"] == len(driver) > 0
    # Every summary the sweep used is now in the driver's cache: replaying any cell here calls no model.
    by_id = {c.id: c for c in conversations}
    for row in result.results[result.results["replayed"].eq(True)].itertuples(index=False):
        trace = replay(
            by_id[row.conversation_id],
            max_tokens=int(row.max_tokens),
            keep_recent_tokens=int(row.keep_recent_tokens),
            summarizer="anchors:0.1",
            cache=driver,
        )
        if len(trace.compactions):
            assert trace.compactions["cache_hit"].eq(True).all(), tuple(row)[:4]


def test_a_lost_worker_costs_only_its_unfinished_cells(fixture_conversations, tmp_path):
    conversations = [c for c in fixture_conversations if c.id != "swe-httpq-4821"]
    clear_worker_state()
    killed: list[str] = []
    with cluster() as local, distributed.Client(local) as client:
        client.register_plugin(OwnCache(str(tmp_path / "workers")))
        addresses = {
            f"{host}:{pid}": address
            for address, (host, pid) in client.run(lambda: (__import__("socket").gethostname(), os.getpid())).items()
        }

        def kill_the_first_finisher(event) -> None:
            if not killed and event.worker in addresses:
                killed.append(event.worker)
                # The worker dies while answering: that is the point.
                with contextlib.suppress(Exception):
                    client.run(os._exit, 1, workers=[addresses[event.worker]])

        result = sweep(
            conversations,
            **GRID,
            executor=client.get_executor(),
            cache=tmp_path / "driver.sqlite",
            progress=kill_the_first_finisher,
        )
    assert killed, "a unit finished on a worker that could be killed"
    results = result.results
    assert results["error"].isna().all() and len(results) == len(conversations) * 3 * 2
    by_worker = results[results["replayed"].eq(True)].groupby("worker")["conversation_id"].nunique()
    # The killed worker's finished cells are kept as it sent them (never computed again) ...
    assert by_worker.get(killed[0], 0) >= 1
    # ... and every other cell was answered by a worker that stayed alive (or the one the nanny started).
    assert set(by_worker.index) - {killed[0]}


# --- reports on a cluster ---------------------------------------------------------------------------------

REPORT_GRID = {"max_tokens": [3_000, 6_000], "keep_recent_tokens": [800]}
REPORT_SUMMARIZERS = ["anchors", "mask"]
REPORT_IDS = ("billing-rounding", "search-p95-regression")


def _report_conversations(fixture_conversations):
    return [c for c in fixture_conversations if c.id in REPORT_IDS]


def _local_report(conversations, tmp_path):
    from zett_lab import Report

    clear_worker_state()
    return Report.build(
        conversations,
        REPORT_SUMMARIZERS,
        REPORT_GRID,
        cache=SummaryCache(tmp_path / "local" / "summaries.sqlite"),
        executor="serial",
        date="2025-01-31",
    )


def test_a_report_built_on_a_cluster_is_the_local_reports_page(fixture_conversations, tmp_path):
    from zett_lab import Report

    conversations = _report_conversations(fixture_conversations)
    local = _local_report(conversations, tmp_path)
    clear_worker_state()  # nothing proven here answers a cell: the cluster replays and measures every one
    with cluster() as local_cluster, distributed.Client(local_cluster) as client:
        client.register_plugin(OwnCache(str(tmp_path / "workers")))
        workers = {
            f"{host}:{pid}"
            for host, pid in client.run(lambda: (__import__("socket").gethostname(), os.getpid())).values()
        }
        remote = Report.build(
            conversations,
            REPORT_SUMMARIZERS,
            REPORT_GRID,
            cache=SummaryCache(tmp_path / "driver" / "summaries.sqlite"),
            executor=client.get_executor(),
            date="2025-01-31",
        )
    ran = remote.sweep.results
    assert ran["error"].isna().all() and ran["replayed"].eq(True).any()
    assert set(ran.loc[ran["replayed"].eq(True), "worker"]) <= workers  # every replay ran on the cluster
    assert remote.sweep.config["summaries_merged"] > 0
    assert remote.to_html() == local.to_html()
    assert remote.to_json() == local.to_json()


def test_a_report_measures_the_replays_it_shows_on_the_cluster_it_is_given(fixture_conversations, tmp_path):
    """Traces given directly were measured by no sweep: the report measures those it shows in full on the cluster."""
    from zett_lab import Report

    conversations = _report_conversations(fixture_conversations)
    traces = [
        replay(c, max_tokens=m, keep_recent_tokens=k, summarizer=s, cache=False)
        for c in conversations
        for s in REPORT_SUMMARIZERS
        for m in REPORT_GRID["max_tokens"]
        for k in REPORT_GRID["keep_recent_tokens"]
    ]
    here = Report(traces=traces, executor="serial", date="2025-01-31")
    with cluster() as local_cluster, distributed.Client(local_cluster) as client:
        with distributed.get_task_stream(client) as stream:
            there = Report(traces=traces, executor=client.get_executor(), date="2025-01-31")
        tasks = [task["key"] for task in stream.data]
    assert any("measure_shown_on_worker" in str(key) for key in tasks), tasks
    assert there.to_html() == here.to_html()


def test_the_command_line_reports_on_a_scheduler_it_is_given(fixture_conversations, tmp_path, capsys, monkeypatch):
    from zett_lab.show import cli
    from zett_lab.show.commands import common as command_common

    folder = tmp_path / "sessions"
    folder.mkdir()
    for conversation in _report_conversations(fixture_conversations):
        conversation.save(folder / f"{conversation.id}.json")
    grid = ["--max-tokens", "3000,6000", "--keep-recent-tokens", "800", "--summarizer", *REPORT_SUMMARIZERS]
    common = [str(folder), "--date", "2025-01-31", "--no-progress", *grid]
    monkeypatch.setenv("ZETT_LAB_CACHE", str(tmp_path / "driver" / "summaries.sqlite"))
    clear_worker_state()
    assert cli.main(["report", *common, "-o", str(tmp_path / "local.html")]) == 0
    clear_worker_state()
    with cluster() as local_cluster, distributed.Client(local_cluster) as client:
        client.register_plugin(OwnCache(str(tmp_path / "workers")))
        address = local_cluster.scheduler_address
        assert cli.main(["report", *common, "-o", str(tmp_path / "cluster.html"), "--scheduler", address]) == 0
    assert (tmp_path / "cluster.html").read_bytes() == (tmp_path / "local.html").read_bytes()
    capsys.readouterr()
    # No scheduler at the address: one line naming it, exit 2, no report.
    monkeypatch.setattr(command_common, "SCHEDULER_TIMEOUT", 2)
    assert cli.main(["report", *common, "-o", str(tmp_path / "none.html"), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--scheduler tcp://127.0.0.1:9" in error[0] and "no dask scheduler answered" in error[0]
    assert not (tmp_path / "none.html").exists()
