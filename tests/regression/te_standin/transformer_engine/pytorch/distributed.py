"""Stand-in: an RNG tracker with TE's method names (never forked in the tests)."""

import contextlib


class CudaRNGStatesTracker:
    def __init__(self):
        self.reset()

    def reset(self):
        self.states_ = {}

    def get_states(self):
        return dict(self.states_)

    def set_states(self, states):
        self.states_ = dict(states)

    def add(self, name, seed):
        self.states_[name] = seed

    @contextlib.contextmanager
    def fork(self, name="model-parallel-rng"):
        yield


@contextlib.contextmanager
def activation_recompute_forward(activation_recompute=False, recompute_phase=False):
    yield


def get_all_rng_states():
    return {}
