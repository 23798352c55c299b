"""Stand-in recipes: constructible placeholders (the tests never run FP8)."""

import enum


class Format(enum.Enum):
    E4M3 = "E4M3"
    E5M2 = "E5M2"
    HYBRID = "HYBRID"


class Recipe:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class DelayedScaling(Recipe):
    pass


class Float8CurrentScaling(Recipe):
    pass


class Float8BlockScaling(Recipe):
    pass


class MXFP8BlockScaling(Recipe):
    pass


class NVFP4BlockScaling(Recipe):
    pass
