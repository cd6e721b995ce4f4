"""The long session's anchor index: built, kept beside the summary cache, and read back, in CPU seconds.

What a warm report's worker pays for the index (:mod:`zett_lab.study.kept_indexes`) against building it, in the
same process: building it (arrays and needle automaton included), keeping it (pickle, checksum, rename), and
reading it (checksum, unpickle, checks, adopted as the index of the conversation's messages).
``python bench/kept_index.py [--turns N]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=250)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from long_session import long_conversation

    from zett_lab.measure.message_index import ConversationIndex, held_index, index_of
    from zett_lab.study.grid import fingerprint
    from zett_lab.study.kept import code_digest, conversation_key
    from zett_lab.study.kept_indexes import KeptIndexes, pickled

    conversation = long_conversation(args.turns)
    began = time.process_time()
    built = ConversationIndex(list(conversation.messages), conversation.harness_context).built()
    build = time.process_time() - began
    with tempfile.TemporaryDirectory() as folder:
        kept = KeptIndexes(Path(folder) / "anchor-indexes", code_digest())
        key = conversation_key(conversation, fingerprint(conversation))
        began = time.process_time()
        kept.write(key, pickled(built))
        keep = time.process_time() - began
        size = kept.file(key).stat().st_size
        del built
        began = time.process_time()
        index_of(conversation.messages, conversation.harness_context, kept.read(conversation, key))
        read = time.process_time() - began
        assert held_index(conversation.messages, conversation.harness_context) is not None
    print(f"conversation: {len(conversation.messages):,} messages")
    print(f"anchor index built: {build:.2f} s CPU")
    print(f"kept: {keep:.2f} s CPU, {size / 1e6:,.1f} MB")
    print(f"read back and adopted: {read:.2f} s CPU ({build / read:.1f}x less than building it)")


if __name__ == "__main__":
    main()
