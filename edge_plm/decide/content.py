"""The junk rule: transcripts with too little content are never acted on nor learned as commands
(docs/policy.md, "Too little content").

Garbled speech often comes out of the recogniser as one short function word ("the", "a", "oh");
if the person then flips the switch, an ON/OFF label on "the" would make the device act on every
"the" it hears. A transcript has too little content when its words outside ``FILLER`` hold
fewer than ``min_letters`` letters (so "the", "uh huh", "on", "it is" are junk; "lamp", "lights
on", "turn it off" are not), or when the recogniser's confidence is below ``min_asr_confidence``
(off by default: pocketsphinx's utterance posterior falls with the length of the utterance, so
one threshold does not fit short and long commands; docs/policy.md).
"""

from __future__ import annotations

from edge_plm.switch.tokenizer import normalize

FILLER = frozenset("""a an the and or but so of to in at by for it its is be i me my you we he she
they this that there here uh um er erm ah oh ow eh hm hmm mm mhm huh yeah yes no ok okay well
just like""".split())


def too_little_content(text: str, asr_confidence: float | None = None, min_letters: int = 4,
                       min_asr_confidence: float = 0.0) -> str | None:
    """Why ``text`` has too little content to be a command, or None when it has enough."""
    words = normalize(text).split()
    letters = sum(sum(ch.isalpha() for ch in w) for w in words if w not in FILLER)
    if letters < min_letters:
        return f"too little content ({letters} letters outside filler words, need {min_letters})"
    if asr_confidence is not None and asr_confidence < min_asr_confidence:
        return f"ASR confidence {asr_confidence:.2f} below {min_asr_confidence:.2f}"
    return None
