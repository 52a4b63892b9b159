"""The process boundary between the Boss and its Assistant, in one place.

``process`` starts the Assistant process (one per Boss worker) and reads its pipes;
``worker`` is the loop that runs inside it; ``channel`` is one ordered direction of a
pipe; ``messages`` is what the pipes carry and how long anyone waits. ``client`` is the
Boss's handle on its source of windows: the process, or ``local_source``'s in-process
source (``--assistant-sync``, and the uniform fallback).
"""
