"""The pair checks: is a pair noise, from its text alone (a side in the wrong language or
script, unrelated sides, differing numbers)?

``settings`` declares each check once (its registry entry, its bars and options), ``flags``
reads the checks' scores and flags from their columns, ``columns`` fits and scores every
check of every pair, and one module holds each check. The Boss's path (the feature file's
reader) imports ``settings`` and ``flags`` alone: numpy and the standard library, none of
the fitting code's scikit-learn.
"""
