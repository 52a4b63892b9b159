"""Put on PYTHONPATH by the GPU check's ``--cpp-traces``: each Python process of a run asks
torch to print the C++ stack of its threads on a fatal signal (SIGABRT, SIGSEGV), so that an
abort at interpreter exit ("terminate called without an active exception") names the object
it came from. Python's own view of the threads comes from PYTHONFAULTHANDLER, set beside it."""

try:
    import torch

    torch._C._set_print_stack_traces_on_fatal_signal(True)
except (ImportError, AttributeError):  # no torch, or a torch without the switch
    pass
