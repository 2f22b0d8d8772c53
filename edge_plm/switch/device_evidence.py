"""What each device's switch taught about its names: per-device word evidence from the labels
of several devices (``SwitchModel.learn_devices``; docs/method.md, "Owner names").

An example labelled per device (key, its words, {device: ON / OFF / NOOP}) that commands some
device counts each of its distinct words once *for* every device whose label is ON / OFF
(a_d(w)) and once *against* every device whose label is NOOP (b_d(w)). A word's evidence for
device d is

    e_d(w) = spec(w) * (a_d(w) - b_d(w)) / (a_d(w) + b_d(w) + PRIOR),
    spec(w) = SPECIFICITY / (SPECIFICITY + df(w)),

where df(w) is the number of labelled examples of the model (the starting model's and the
owner's) whose text holds w: a word that occurs in many commands ("turn", "the") names no
device, a word the owner says only for one device ("breeze") names it after one label.

An example that already addressed a device by its configured name or alias when it was heard
(``explained``) is explained for that device, and counts none of its words *for* it: in "hello
i want to turn off my wemo plug", "plug" names the plug, and "hello" and "want" do not become
its names (they did, from one label, before; docs/benchmarks-log.md, "Owner names explained away"). Its
words still count *against* the devices labelled NOOP. A device addressed by learned words
alone is not explained: its examples keep adding to those words' counts, which must keep up
with their growing df. All counts are plain sums over the live examples: ``remove`` takes an
example out exactly, and the same examples in the same order give the same evidence.

It also counts the *unnamed* commands: examples whose words named no device when they were
heard (``naming.Addressing.unnamed``), u in all and u_d labelled ON / OFF for device d. The
default device's share of the next unnamed command is read from them (``naming.address``):
after a few unnamed commands the owner's switches gave the default device, "turn it on" is
acted on again; after ones that were another device's, it stays asked about.
"""

from __future__ import annotations

from collections import Counter

PRIOR = 0.5  # pseudo-count of the evidence's denominator
SPECIFICITY = 20.0  # a word in this many labelled examples keeps half its evidence
NOOP = "NOOP"


class DeviceEvidence:
    """Per-device word counts of the examples labelled per device, and every labelled example's
    word document frequency."""

    def __init__(self) -> None:
        self.entries: dict[int, tuple[tuple[str, ...], dict[str, str]]] = {}
        self.explained: dict[int, frozenset[str]] = {}  # key -> devices whose names it said
        self.df: Counter[str] = Counter()
        self._for: Counter[tuple[str, str]] = Counter()
        self._against: Counter[tuple[str, str]] = Counter()
        self.unnamed_keys: set[int] = set()
        self._unnamed: Counter[str] = Counter()  # device -> unnamed commands labelled ON/OFF for it

    def __len__(self) -> int:
        return len(self.entries)

    # -- document frequency of every labelled example ---------------------------------------

    def add_text(self, words) -> None:
        self.df.update(set(words))

    def remove_text(self, words) -> None:
        self.df.subtract(set(words))
        for w in set(words):
            if self.df[w] <= 0:
                del self.df[w]

    # -- examples labelled per device --------------------------------------------------------

    def _count(self, words: tuple[str, ...], labels: dict[str, str], sign: int,
               explained: frozenset[str] = frozenset()) -> None:
        if all(v == NOOP for v in labels.values()):
            return  # not a command: says nothing about names
        for name, label in labels.items():
            if label != NOOP and name in explained:
                continue  # its name was heard: the other words are not what named it
            table = self._against if label == NOOP else self._for
            for w in set(words):
                table[(name, w)] += sign
                if table[(name, w)] == 0:
                    del table[(name, w)]

    def _count_unnamed(self, key: int, labels: dict[str, str], sign: int) -> None:
        if key not in self.unnamed_keys or all(v == NOOP for v in labels.values()):
            return
        self._unnamed[""] += sign  # "" counts the unnamed commands themselves
        for name, label in labels.items():
            if label != NOOP:
                self._unnamed[name] += sign

    def add(self, key: int, words, labels: dict[str, str], unnamed: bool = False,
            explained=()) -> None:
        """Example ``key`` with its words and every device's label; ``unnamed``: its words
        named no device when it was heard; ``explained``: the devices whose configured names
        it said (``Addressing.named``)."""
        if key in self.entries:
            raise ValueError(f"example {key} already has device labels")
        words = tuple(words)
        explained = frozenset(explained)
        unknown = explained - set(labels)
        if unknown:
            raise ValueError(f"example {key}: explained devices {sorted(unknown)} have no label")
        self.entries[key] = (words, dict(labels))
        if explained:
            self.explained[key] = explained
        if unnamed:
            self.unnamed_keys.add(key)
        self._count(words, labels, +1, explained)
        self._count_unnamed(key, labels, +1)

    def remove(self, key: int) -> bool:
        """Take example ``key`` out (exact); False when it had no device labels."""
        entry = self.entries.get(key)
        if entry is None:
            return False
        self._count(*entry, -1, self.explained.pop(key, frozenset()))
        self._count_unnamed(key, entry[1], -1)
        del self.entries[key]
        self.unnamed_keys.discard(key)
        return True

    def unnamed_commands(self, name: str) -> tuple[int, int]:
        """(u_d, u): the unnamed commands labelled ON / OFF for device ``name``, and all of them."""
        return self._unnamed.get(name, 0), self._unnamed.get("", 0)

    def forget(self, key: int, words) -> None:
        """A forgotten example of the model: its words and its device labels (if any) go."""
        self.remove_text(words)
        self.remove(key)

    def relabel(self, key: int, labels: dict[str, str]) -> None:
        words, _ = self.entries[key]
        unnamed, explained = key in self.unnamed_keys, self.explained.get(key, frozenset())
        self.remove(key)
        self.add(key, words, labels, unnamed, explained & set(labels))

    def evidence(self, name: str, word: str) -> float:
        a, b = self._for.get((name, word), 0), self._against.get((name, word), 0)
        if not a and not b:
            return 0.0
        return SPECIFICITY / (SPECIFICITY + self.df.get(word, 0)) * (a - b) / (a + b + PRIOR)

    # -- checkpoints -------------------------------------------------------------------------

    def to_json(self) -> list:
        """One row per example: [key, words, labels, unnamed, explained devices]."""
        return [[k, list(w), lab, k in self.unnamed_keys, sorted(self.explained.get(k, ()))]
                for k, (w, lab) in sorted(self.entries.items())]

    def load_json(self, rows: list) -> None:
        """Rows of ``to_json``; a row of three (a checkpoint written before the unnamed count)
        counts as named, a row of three or four (before ``explained``) as explained for no
        device, as it was counted then."""
        for row in rows:
            if len(row) not in (3, 4, 5):
                raise ValueError(f"a device-label row has 3 to 5 fields, got {len(row)}")
            key, words, labels = row[:3]
            if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
                raise ValueError(f"device labels of example {key} are not a name -> label map")
            unnamed = row[3] if len(row) >= 4 else False
            if not isinstance(unnamed, bool):
                raise ValueError(f"the unnamed flag of example {key} is not true / false")
            explained = row[4] if len(row) == 5 else []
            if not isinstance(explained, list) or not all(isinstance(n, str) for n in explained):
                raise ValueError(f"the explained devices of example {key} are not a list of names")
            self.add(int(key), [str(w) for w in words], {str(n): v for n, v in labels.items()}, unnamed,
                     explained)
