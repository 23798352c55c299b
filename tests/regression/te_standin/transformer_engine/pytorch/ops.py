"""Stand-in: names of TE's fusible ops (placeholders; never run in the tests)."""


class FusibleOperation:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("transformer_engine stand-in: fusible ops are not emulated")


class Sequential(FusibleOperation):
    pass


BasicLinear = Bias = AllReduce = ReduceScatter = LayerNorm = RMSNorm = Sequential
GELU = GEGLU = ReLU = ReGLU = SiLU = SwiGLU = Sequential
