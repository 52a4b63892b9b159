"""Step 2 of the data flow: the Assistant, on CPU, numpy only.

``model`` (g(psi | theta), eq. 5), ``schedule`` (T_k, lambda_k), ``sampler`` (Algorithm 1)
are pure; ``assistant`` ties them to the features; ``process`` runs one per worker, with
its loop in ``_worker``.
"""

from .assistant import Assistant, AssistantHParams  # noqa: F401
