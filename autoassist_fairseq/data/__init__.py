"""Step 3 of the data flow: batches. ``batch_generator`` runs in the Assistant process and
turns windows of candidates into batches (``plan.WindowPlan``), pass after pass;
``batch_stream`` is the Boss's record of what it took from them; ``batch_iterator`` is
fairseq's epoch iterator over that stream; ``arrays`` turns its state's arrays into
tensors for fairseq checkpoints; ``schema`` checks and migrates that state at a load.
Where the windows come from (the Assistant process, or an in-process source) is
``transport``'s concern.
"""
