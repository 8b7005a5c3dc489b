# expect: static "does not parse"
import triton
def vector_add(x, y)
    return x + y
