"""Step 3 of the data flow: batches. ``batch_generator`` runs in the Assistant process and
turns windows of candidates into batches; ``batch_iterator`` is fairseq's epoch iterator
over them on the Boss side; ``messages`` is what the queues carry."""
