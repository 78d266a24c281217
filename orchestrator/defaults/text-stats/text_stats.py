"""text-stats: characters, words, lines, sentences and the most frequent words.

Script protocol: inputs JSON from SKILL_INPUTS (else stdin), outputs JSON to SKILL_OUTPUT
(else the last stdout line). Pure: exit 0, or 1 on malformed input.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

WORD = re.compile(r"[\w'’-]+")
SENTENCE_END = re.compile(r"[.!?]+")


def main() -> int:
    path = os.environ.get("SKILL_INPUTS")
    inputs = json.loads(Path(path).read_text(encoding="utf-8")) if path else json.load(sys.stdin)
    text = inputs.get("text")
    if not isinstance(text, str):
        print("text-stats: text must be a string", file=sys.stderr)
        return 1
    top = int(inputs.get("top", 10))
    words = [w.lower() for w in WORD.findall(text) if any(c.isalnum() for c in w)]
    pieces = [p for p in SENTENCE_END.split(text) if p.strip()]
    ranked = sorted(Counter(words).items(), key=lambda kv: (-kv[1], kv[0]))[:max(top, 0)]
    outputs = {"chars": len(text), "words": len(words), "lines": len(text.splitlines()),
               "sentences": len(pieces),
               "top_words": [{"word": w, "count": n} for w, n in ranked]}
    target = os.environ.get("SKILL_OUTPUT")
    if target:
        Path(target).write_text(json.dumps(outputs, ensure_ascii=False), encoding="utf-8")
    else:
        print(json.dumps(outputs, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
