"""Random and adversarial action strings for fuzz tests."""

import random


def fuzz_strings(n, seed=0):
    rng = random.Random(seed)
    pieces = ["fill(", "click(", "select_option(", "check(", ")", "(", "'", '"', "\\", "\n", "\r",
              "'12'", "12", ",", "=", "bid", "value", "__import__('os')", "exec(", "eval(", "lambda: 0",
              "é", "✓", "\u202e", "\x00", "\t", "[", "]", "{", "}", "#", "'''", '"""', "*", "**", " "]
    for i in range(n):
        k = rng.randint(0, 12)
        s = "".join(rng.choice(pieces) for _ in range(k))
        if i % 97 == 0:
            s = "x" * 10_000 + s
        if i % 89 == 0:
            s = "fill('12', '" + "a" * 10_000 + "')"
        if i % 83 == 0:
            s = "".join(chr(rng.randint(0, 0x2FFFF)) for _ in range(rng.randint(1, 50)))
        yield s
