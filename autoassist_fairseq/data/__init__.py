"""Step 3 of the data flow: batches. ``batch_generator`` runs in the Assistant process and
turns windows of candidates into batches (``plan.WindowPlan``), pass after pass, cut as
fairseq cuts them (``fairseq_batcher``); ``batch_stream`` is the Boss's record of what it
took from them; ``collate`` collates the batches of an epoch; ``arrays`` turns the
iterator's state's arrays into tensors for fairseq checkpoints; ``schema`` checks and
migrates that state at a load. Where the windows come from (the Assistant process, or an
in-process source) is ``transport``'s concern, and fairseq's epoch iterator over the stream
(``tasks.batch_iterator``) joins the two: nothing here imports ``transport``.
"""
