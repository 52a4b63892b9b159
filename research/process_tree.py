"""A process's children and descendants, read from /proc (Linux): what the fault replay and
the tests look at to find processes left behind."""


def children(pid):
    """Direct child processes of *pid* (none once it has ended)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def descendants(pid):
    """Every process below *pid*, children first."""
    found, todo = [], children(pid)
    while todo:
        found.append(todo.pop(0))
        todo.extend(children(found[-1]))
    return found
