"""Step 2 of the data flow: the Assistant, on CPU, numpy only.

``model`` (g(psi | theta), eq. 5), ``schedule`` (T_k, lambda_k), ``acceptance`` (Algorithm 1)
and ``rules`` are pure; ``assistant`` ties them to the features. Where it runs (its own
process, or the Boss's) is ``transport``'s concern.
"""

from .assistant import Assistant, AssistantHParams  # noqa: F401
