"""The spoken sessions (benchmarks/spoken_sessions.py) and the ear benchmark (bench_ear.py): the
committed sessions are what the builder makes, deterministically; no session line is a line the
ear's or the starting model's data has; commands are about 40 % and households change the
light's state; and a small spoken session replays through bench_ear's function with counts that
add up."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import spoken_sessions as ss  # noqa: E402

from edge_plm.switch.tokenizer import normalize  # noqa: E402

TRAIN = REPO / "models" / "data" / "switch-dev-train.jsonl"  # the same lines as ../shared/data's


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def test_rows() -> list[dict]:
    # switch-dev-test's lines, in order (benchmarks/data keeps them with their transcripts)
    return [{"text": r["clean_text"], "label": r["label"]}
            for r in read(REPO / "benchmarks" / "data" / "switch-dev-test.asr.jsonl")]


@pytest.fixture(scope="module")
def forbidden() -> set[str]:
    return ss.forbidden_texts(TRAIN)


@pytest.fixture(scope="module")
def committed() -> dict[str, list[dict]]:
    return {p.stem: read(p) for p in sorted(ss.OUT.glob("*.jsonl"))}


def test_the_committed_sessions_are_what_the_builder_makes_with_the_same_seed(test_rows, forbidden, committed):
    built = ss.build(test_rows, forbidden)
    assert built == ss.build(test_rows, forbidden)
    assert built == committed
    assert ss.build(test_rows, forbidden, seed=ss.SEED + 1) != built


def test_no_session_uses_a_line_of_the_models_data(committed, forbidden):
    assert len(forbidden) > 1000
    for name, rows in committed.items():
        used = [r["text"] for r in rows if normalize(r["text"]) in forbidden]
        assert not used, f"{name}: {used[:3]}"


def test_sessions_voices_and_labels(committed, test_rows):
    single = {n: {r["voice"] for r in rows} for n, rows in committed.items()
              if n.startswith("household-") and "-mixed-" not in n}
    assert all(len(v) == 1 for v in single.values())
    kinds = Counter(next(iter(v)).split(":")[0] for v in single.values())
    assert kinds["flite"] >= 4 and kinds["espeak"] >= 4
    mixed = {n: {r["voice"].split(":")[0] for r in rows} for n, rows in committed.items()
             if "-mixed" in n or n.startswith("crowd")}
    assert {"flite"} in mixed.values() and {"espeak"} in mixed.values() and {"flite", "espeak"} in mixed.values()
    test_labels = {r["text"]: r["label"] for r in test_rows}
    for name, rows in committed.items():
        assert len(rows) == ss.LINES
        share = sum(r["label"] != "NOOP" for r in rows) / len(rows)
        assert 0.35 <= share <= 0.45, (name, share)
        if name.startswith("crowd"):  # each line as written, with its own label
            assert all(test_labels.get(r["text"]) == r["label"] for r in rows), name
            continue
        commands = [r for r in rows if r["label"] != "NOOP"]
        # a household changes the light's state: ON, OFF, ON, ... with its own few phrasings
        assert [r["label"] for r in commands] == ["ON", "OFF"] * (len(commands) // 2) + ["ON"] * (len(commands) % 2)
        for label in ("ON", "OFF"):
            said = {r["text"] for r in commands if r["label"] == label}
            assert len(said) == 3 and sum(t in test_labels for t in said) >= 1, (name, said)
        chatter = {r["text"] for r in rows if r["label"] == "NOOP"}
        assert 4 <= len(chatter) <= 8 and chatter & set(test_labels) and chatter - set(test_labels)


def test_a_small_spoken_session_replays_with_counts_that_add_up(tmp_path):
    import bench_ear

    from edge_plm.config.settings import Settings

    rows = [{"text": "what time is it", "label": "NOOP", "voice": "flite:slt"},
            {"text": "turn on the light", "label": "ON", "voice": "flite:slt"},
            {"text": "tell me a joke", "label": "NOOP", "voice": "espeak:en-us:160"},
            {"text": "turn off the light", "label": "OFF", "voice": "espeak:en-us:160"}]
    session = tmp_path / "tiny.jsonl"
    session.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = ss.replay_file(session, tmp_path / "wavs")
    replayed = read(path)
    assert [r["label"] for r in replayed] == [r["label"] for r in rows]
    assert all((path.parent / r["audio"]).is_file() for r in replayed)
    s = bench_ear.replay_spoken(path, Settings(), "switch-en")
    assert (s["lines"], s["commands"], s["non_commands"]) == (4, 2, 2)
    # one device: each command was acted on right, acted on wrong, asked about, or missed
    assert s["commands_acted_right"] + s["commands_acted_wrong"] + s["asked_commands"] + s["missed"] == 2
    assert s["acted_wrong"] <= s["acted"] and s["asked_non_commands"] <= 2
    assert [h["commands"] for h in s["halves"]] == [1, 1]
    assert s["audio_s"] == pytest.approx(sum(bench_ear.wav_seconds(path.parent / r["audio"]) for r in replayed), abs=0.01)
    assert 0 < s["cpu_per_audio_s"] < 5
    assert s["asr_decode_ms"]["median"] > 0


@pytest.mark.parametrize("argv, says", [
    (["--starts", "scratch"], "--starts"),
    (["--only", "no-such-session"], "no session"),
    (["--sessions", "0"], "--sessions"),
    (["--set", "model.no_such_key=1"], "no setting"),
])
def test_bench_ear_refuses_bad_arguments_in_one_line(argv, says, capsys):
    import bench_ear

    with pytest.raises(SystemExit) as exc:
        bench_ear.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and "Traceback" not in "".join(err)


def test_the_builder_refuses_a_data_folder_without_the_test_lines(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        ss.main(["--data", str(tmp_path)])
    assert exc.value.code == 2 and "switch-dev-test.jsonl: no such file" in capsys.readouterr().err
