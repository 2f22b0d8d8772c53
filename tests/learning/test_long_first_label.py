"""Issue 47, item 9: one long first sentence (100 words, under the transcript cap) as the first
label of a new device from an empty model is learned, and the device starts afterwards."""

from __future__ import annotations

import json

from _data_util import cli, js

WORDS = ("please could you be so kind as to turn on the lamp in the living room because it is "
         "getting dark and I cannot see a thing while reading my book about the history of the "
         "ancient world and its many civilisations that rose and fell").split()


def test_a_hundred_word_first_label_is_learned_and_the_device_starts(tmp_path):
    text = " ".join((WORDS * 4)[:100])
    assert len(text) < 500
    cfg = tmp_path / "c.toml"
    cfg.write_text('[model]\nstart = "empty"\n')
    session = tmp_path / "s.jsonl"
    session.write_text(json.dumps({"text": text, "label": "ON"}) + "\n"
                       + json.dumps({"text": "lamp off", "label": "OFF"}) + "\n")
    db = tmp_path / "state" / "x.db"
    r = cli("replay", session, "--db", db, "--config", cfg, "--json")
    assert r.exit_code == 0 and "error" not in r.stderr, r.stderr
    assert js(r)["labels"] == 2
    assert js(cli("status", "--db", db, "--config", cfg, "--json"))["model"]["unlearned_labels"] == 0
    again = cli("model", "rebuild", "--db", db, "--config", cfg)  # loads and re-learns it
    assert again.exit_code == 0, again.stderr
    assert cli("label", "1", "on", "--db", db, "--config", cfg).exit_code == 0
