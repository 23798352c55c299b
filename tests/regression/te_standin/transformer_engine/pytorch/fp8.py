"""Stand-in: FP8 state is always off."""

import contextlib


class FP8GlobalStateManager:
    @staticmethod
    def is_fp8_enabled():
        return False

    @staticmethod
    def get_fp8_recipe():
        return None

    @staticmethod
    def is_first_fp8_module():
        return False


@contextlib.contextmanager
def fp8_autocast(*args, **kwargs):
    yield


@contextlib.contextmanager
def fp8_model_init(*args, **kwargs):
    """Imported by Megatron at 3346fa8a2 (FP8 parameters); FP8 is always off here."""
    yield
