def convert_layout(func, layout):
    raise NotImplementedError
