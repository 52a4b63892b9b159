import numpy as np
import pytest

from autoassist_fairseq.assistant.acceptance import accept_probability, draw_accepted
from autoassist_fairseq.assistant.schedule import AssistantSchedule


def test_accept_probability_formula_and_floor():
    g = np.linspace(0, 1, 11)
    for lam in (0.0, 0.3, 0.9):
        p = accept_probability(g, lam)
        np.testing.assert_allclose(p, (1 - lam) + lam * g)
        assert p.min() >= 1 - lam - 1e-12


def test_schedule_caps_lambda_at_lambda_max():
    s = AssistantSchedule(threshold_decay=0.5, accuracy_decay=0.5, lambda_max=0.6, warmup=0)
    for _ in range(50):  # perfect, balanced predictions
        s.observe(np.array([0.9, 0.1, 0.9, 0.1]), np.array([1.0, 0.0, 1.0, 0.0]))
    assert s.lam == pytest.approx(0.6)
    g = np.zeros(10000)  # the Assistant calls every pair easy
    p = accept_probability(g, s.lam)
    assert p.min() == pytest.approx(0.4)
    rate = draw_accepted(p, np.random.default_rng(0)).mean()
    assert rate == pytest.approx(0.4, abs=0.02)


def test_warmup_keeps_lambda_at_zero():
    s = AssistantSchedule(0.5, 0.5, 0.9, warmup=10)
    for _ in range(10):
        s.observe(np.array([0.9, 0.1]), np.array([1.0, 0.0]))
    assert s.lam == 0.0
    s.observe(np.array([0.9, 0.1]), np.array([1.0, 0.0]))
    assert s.lam > 0.5
