"""A zett-agent database's probes sidecar is part of the output: replaced with it, never left to describe another."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zett_lab
from tests.helpers import coding_conversation
from zett_lab.errors import OutputError
from zett_lab.load.conversation import probes_sidecar_path
from zett_lab.load.zett import write_sqlite
from zett_lab.show import cli


def conversation(with_probe: bool, cid: str = "c1") -> zett_lab.Conversation:
    plain = coding_conversation(turns=2, cid=cid)
    if not with_probe:
        return plain
    probe = zett_lab.Probe(question=f"q {cid}?", answer="module_0", type="recall", message_index=1)
    return dataclasses.replace(plain, probes=[probe])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(probes=st.lists(st.booleans(), min_size=2, max_size=4))
def test_the_probes_read_back_are_those_of_the_last_import(tmp_path: Path, probes: list[bool]) -> None:
    db = tmp_path / "k3.sqlite"
    for number, with_probe in enumerate(probes):
        write_sqlite([conversation(with_probe, cid=f"c{number}")], db, overwrite=True)
        assert probes_sidecar_path(db).exists() == with_probe
        loaded = zett_lab.load(db)
        assert loaded.id == f"c{number}"
        assert [p.question for p in loaded.probes] == ([f"q c{number}?"] if with_probe else [])
    for leftover in (db, probes_sidecar_path(db)):
        leftover.unlink(missing_ok=True)


def test_an_existing_sidecar_is_refused_without_overwrite_even_when_nothing_goes_in_it(tmp_path: Path) -> None:
    sidecar = tmp_path / "k3.probes.json"
    sidecar.write_text("{}\n")
    with pytest.raises(OutputError, match="k3.probes.json: already exists"):
        write_sqlite([conversation(False)], tmp_path / "k3.sqlite")
    assert sorted(os.listdir(tmp_path)) == ["k3.probes.json"] and sidecar.read_text() == "{}\n"


def test_a_failed_import_leaves_the_old_database_and_the_old_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = write_sqlite([conversation(True)], tmp_path / "k3.sqlite")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    from zett_agent.storage import SQLiteSessionStorage

    async def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SQLiteSessionStorage, "append", refuse)
    for with_probe in (True, False):
        with pytest.raises(OutputError, match="k3.sqlite: could not be written: No space left on device"):
            write_sqlite([conversation(with_probe, cid="new")], db, overwrite=True)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_import_force_replaces_or_removes_the_sidecar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with_probe, without = tmp_path / "probed.json", tmp_path / "plain.json"
    conversation(True).save(with_probe)
    conversation(False, cid="plain").save(without)
    db, sidecar = tmp_path / "k3.sqlite", tmp_path / "k3.probes.json"
    assert cli.main(["import", str(with_probe), "-o", str(db), "--no-progress"]) == cli.EXIT_OK
    assert f"probes and native compactions: {sidecar}" in capsys.readouterr().out
    assert cli.main(["import", str(without), "-o", str(db), "--force", "--no-progress"]) == cli.EXIT_OK
    assert "probes and native compactions" not in capsys.readouterr().out
    assert not sidecar.exists()
    loaded = zett_lab.load(db)
    assert (loaded.id, loaded.probes) == ("plain", [])
