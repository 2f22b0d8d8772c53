"""What `forget` leaves on disk and in the log: deleted transcripts are not readable in the
database file or its write-ahead log, and transcripts reach the log only when asked for."""

import logging
from dataclasses import replace

from edge_plm.replay import run_session
from edge_plm.settings import Settings
from edge_plm.store import ReplayStore
from kit import make_replay, session

SECRET = "xylofrump"


def _bytes_of(db) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_deleted_transcripts_leave_neither_the_file_nor_the_wal(tmp_path):
    db = tmp_path / "edge-plm.db"
    with ReplayStore(db) as store:
        keep = store.add_interaction(transcript="turn on the light", asr_backend="text")
        gone = [store.add_interaction(transcript=f"my bank pin is {SECRET} {i}", asr_backend="text")
                for i in range(20)]
        assert SECRET.encode() in _bytes_of(db)
        store.delete_interactions(gone)
        assert SECRET.encode() not in _bytes_of(db)  # still open: main file and -wal both clean
        assert store.get(keep).transcript == "turn on the light"
    assert SECRET.encode() not in _bytes_of(db)


def test_transcripts_reach_the_log_only_when_asked_for(tmp_path, caplog):
    for wanted in (False, True):
        s = Settings()
        s = replace(s, paths=replace(s.paths, log_transcripts=wanted))
        r = make_replay(tmp_path / f"db-{wanted}.db", settings=s)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="edge_plm.controller"):
            try:
                run_session(session([(f"{SECRET} turn on the light", "ON")]), r.controller, r.clock,
                            endpointer=r.endpointer)
            finally:
                r.close()
        info = " ".join(rec.getMessage() for rec in caplog.records if rec.levelno >= logging.INFO)
        assert (SECRET in info) is wanted
