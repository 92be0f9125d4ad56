"""Random and adversarial action strings for the fuzz tests of both worlds."""

import random

WEB_PIECES = ("fill(", "click(", "select_option(", "check(", "'12'", "12", "bid", "value")
LEDGER_PIECES = ("get_charge(", "refund_charge(", "final_answer(", "decide(", "list_charges(", "charge_id=",
                 "amount=", "'CH-1'", "49.99", "'$49.99'", "1e309", "-0", "None", "True", "...", "b'x'",
                 "__import__('os').system('echo hi')")
COMMON_PIECES = (")", "(", "'", '"', "\\", "\n", "\r", ",", "=", "__import__('os')", "exec(", "eval(",
                 "lambda: 0", "é", "✓", "\u202e", "\x00", "\t", "[", "]", "{", "}", "#", "'''", '"""', "*",
                 "**", " ")
NON_STRINGS = (None, 42, b"get_charge(charge_id='x')", ["final_answer('x')"], 3.5, object())


def fuzz_strings(n, seed=0, pieces=WEB_PIECES, long_call="fill('12', '{}')", nested="fill(",
                 non_strings=False):
    """``n`` fuzz actions: random joins of call fragments, 10 kB strings, a 10 kB argument in
    ``long_call``, random Unicode, 400-deep nested ``nested`` calls; then, with
    ``non_strings``, six values that are not strings at all."""
    rng = random.Random(seed)
    vocab = list(pieces) + list(COMMON_PIECES)
    for i in range(n):
        s = "".join(rng.choice(vocab) for _ in range(rng.randint(0, 14)))
        if i % 97 == 0:
            s = "x" * 10_000 + s
        if i % 89 == 0:
            s = long_call.format("a" * 10_000)
        if i % 83 == 0:
            s = "".join(chr(rng.randint(1, 0x2FFFF)) for _ in range(rng.randint(1, 60)))
        if i % 79 == 0:
            s = nested * 400 + ")" * 400
        yield s
    if non_strings:
        yield from NON_STRINGS
