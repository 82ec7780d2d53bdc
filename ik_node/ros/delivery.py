# SPDX-License-Identifier: Apache-2.0

"""Messages a subscription never saw: gaps in the publishers' sequence numbers.

A keep-last subscription queue drops the oldest unread message when a new
one arrives into a full queue; best-effort transport may lose some on the
way. Neither is visible in the messages that do arrive, but every DDS
writer numbers what it publishes (``publication_sequence_number`` in the
message info, per ``publisher_gid``), so a jump in that number is a count of
messages from that publisher that were lost before the callback.
"""

import collections
from typing import Optional

# Publishers remembered at once (least recently heard from forgotten first):
# bounds the memory whatever number of publishers come and go.
MAX_PUBLISHERS = 64


class SequenceGaps:
    """Count messages missing between consecutive ones from the same publisher.

    Messages before the first one heard from a publisher are not counted: a
    subscription that joins late never was owed them.
    """

    def __init__(self, max_publishers: int = MAX_PUBLISHERS):
        """Start with no publisher known and nothing missing."""
        self.missing = 0
        self._last = collections.OrderedDict()
        self._max = max_publishers

    def note(self, info) -> int:
        """Record one message's info (rclpy MessageInfo); return how many are missing before it.

        Without a sequence number or publisher id (an RMW that does not
        provide them) nothing can be known: 0.
        """
        seq: Optional[int] = info.get('publication_sequence_number')
        gid = info.get('publisher_gid')
        if seq is None or not gid:
            return 0
        key = bytes(gid['data'])
        last = self._last.pop(key, None)
        self._last[key] = seq
        if len(self._last) > self._max:
            self._last.popitem(last=False)
        if last is None or seq <= last:   # first from it, or a reordered / restarted writer
            return 0
        gap = seq - last - 1
        self.missing += gap
        return gap
