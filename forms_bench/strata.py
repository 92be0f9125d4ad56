"""The task builders of the form benchmark's five strata, and of tasks answered in the goal.

One builder per stratum (conditional policy, derived values, conjunctive selection, relational
joins, ordered repair; ``answer="rule"``) and :func:`_direct` for a task whose answer is stated
in the goal or copied from one named record (the lower difficulty levels); :func:`build` picks
one. Each draws from the task's :class:`~forms_bench.assembly._Ctx` in a fixed order, so a task
depends only on its seed; :mod:`forms_bench.generate` names and seeds the tasks.
"""

from __future__ import annotations

from decimal import Decimal

from forms_bench.assembly import CHOOSE, _assemble, _Ctx, _n_rows, _random_record, _record_table, money
from forms_bench.difficulty import TOP_LEVEL, Difficulty, level_knobs
from forms_bench.schema import Task

NATIVE = level_knobs(TOP_LEVEL)
"""The benchmark's own knobs (the top level): the stratum's reasoning, its random row counts, extras."""


def _conditional_policy(ctx: _Ctx, task_id: str, knobs: Difficulty = NATIVE) -> Task:
    d, rng = ctx.domain, ctx.rng
    cat_col, cats = d.category
    tier_col, tiers = d.tier
    dec_label, (opt_a, opt_b, opt_c) = d.decision
    rows = [_random_record(ctx) for _ in range(_n_rows(ctx, knobs, 3, 5))]
    subject = rng.choice(rows)
    special = rng.sample(list(cats), 2)
    lo, hi = d.amount_range
    threshold = Decimal(rng.randrange(lo + (hi - lo) // 4, hi - (hi - lo) // 4, 50))
    qty_threshold = rng.randint(d.quantity_range[0] + 1, d.quantity_range[1] - 1)
    top_tier = tiers[-1]
    rules = [
        f"If the {cat_col.lower()} is {special[0]} or {special[1]}, set {dec_label} to {opt_c}.",
        f"Otherwise, if the {d.amount.split(' (')[0].lower()} is above {threshold} USD, "
        f"set {dec_label} to {opt_b}.",
        f"Otherwise, set {dec_label} to {opt_a}.",
        f"Tick \"{d.flag}\" only when the {tier_col.lower()} is {top_tier} or the "
        f"{d.quantity.split(' (')[0].lower()} is more than {qty_threshold}; otherwise leave it clear.",
    ]
    if subject[cat_col] in special:
        decision = opt_c
        why = f"{subject[cat_col]} is listed"
    elif Decimal(subject[d.amount]) > threshold:
        decision = opt_b
        why = f"amount {subject[d.amount]} > {threshold}"
    else:
        decision = opt_a
        why = f"amount {subject[d.amount]} <= {threshold}"
    flag = subject[tier_col] == top_tier or int(subject[d.quantity]) > qty_threshold
    kind = rng.choice(["select", "radio"])
    options = [opt_a, opt_b, opt_c]
    # the page never starts at the answer: a select shows another option, a radio group none
    initial = rng.choice([o for o in options if o != decision]) if kind == "select" else ""
    work = [
        {"key": "decision", "label": dec_label, "kind": kind, "options": options, "initial": initial},
        {"key": "flag", "label": d.flag, "kind": "checkbox", "initial": rng.random() < 0.4},
    ]
    cols = ["ID", "Name", cat_col, tier_col, d.amount, d.quantity]
    goal = (f"Apply the handling rules to {d.record} {subject['ID']}: set {dec_label} and "
            f"\"{d.flag}\" as the rules require, then press \"{d.final[1]}\".")
    intro = f"Open {d.record}s awaiting a handling decision. Work only on the {d.record} named in your task."
    return _assemble(ctx, "conditional_policy", task_id, goal, intro,
                     [_record_table(ctx, f"Open {d.record}s", rows, cols)], rules, work,
                     {"decision": decision, "flag": flag}, [],
                     f"{why} -> {decision}; flag={flag}", extras=knobs.extras)


def _derived_values(ctx: _Ctx, task_id: str, knobs: Difficulty = NATIVE) -> Task:
    d, rng = ctx.domain, ctx.rng
    tier_col, tiers = d.tier
    rates = sorted(rng.sample(range(55, 96, 5), len(tiers)))
    deductions = [Decimal(rng.randrange(20, max(25, d.amount_range[0]), 5)) for _ in tiers]
    rows = [_random_record(ctx) for _ in range(_n_rows(ctx, knobs, 3, 5))]
    subject = rng.choice(rows)
    # make rounding matter: the unrounded result has a non-zero third decimal
    while True:
        t = tiers.index(subject[tier_col])
        base = Decimal(subject[d.amount]) - deductions[t]
        exact = base * Decimal(rates[t]) / 100
        if base > 0 and exact != exact.quantize(Decimal("0.01")):
            break
        subject[d.amount] = money(ctx.amount())
    result = money(exact)
    amount_name = d.amount.split(" (")[0].lower()
    rules = [
        f"{d.result.split(' (')[0]} = ({amount_name} minus the {d.deduction.split(' (')[0].lower()} "
        f"for the {d.record}'s {tier_col.lower()}) multiplied by the {d.rate.split(' (')[0].lower()} "
        f"for that {tier_col.lower()}.",
        "Round money amounts to the nearest cent, halves rounding up, and write them with two "
        "decimals and no currency sign (for example 1234.50).",
        f"Also record the {d.deduction.split(' (')[0].lower()} that was applied.",
    ]
    rate_table = {"caption": f"{tier_col} terms", "columns": [tier_col, d.rate, d.deduction],
                  "rows": [[tr, str(r), money(dd)] for tr, r, dd in zip(tiers, rates, deductions)]}
    cols = ["ID", "Name", tier_col, d.amount, d.quantity]
    work = [
        {"key": "result", "label": d.result, "kind": "text", "initial": ""},
        {"key": "deduction", "label": d.deduction.replace(" (USD)", " applied (USD)"), "kind": "text",
         "initial": ""},
    ]
    goal = (f"Compute the {d.result.split(' (')[0].lower()} for {d.record} {subject['ID']} as the rules "
            f"state, enter it with the deduction applied, then press \"{d.final[1]}\".")
    intro = f"Settlement worksheet for {d.record}s. Use the {tier_col.lower()} terms table."
    return _assemble(ctx, "derived_values", task_id, goal, intro,
                     [_record_table(ctx, f"{d.record.capitalize()}s", rows, cols), rate_table],
                     rules, work, {"result": result, "deduction": money(deductions[t])}, [],
                     f"({subject[d.amount]} - {money(deductions[t])}) * {rates[t]}% = {exact} -> {result}",
                     extras=knobs.extras)


def _conjunctive_selection(ctx: _Ctx, task_id: str, knobs: Difficulty = NATIVE) -> Task:
    d, rng = ctx.domain, ctx.rng
    cat_col, cats = d.category
    tier_col, tiers = d.tier
    status_col, statuses = "Status", ("Active", "On hold", "Closed")
    want_cat = rng.choice(cats)
    want_tier_min = rng.choice(tiers[1:])
    lo, hi = d.amount_range
    cap = Decimal(rng.randrange(lo + (hi - lo) // 3, hi - (hi - lo) // 4, 100))
    ok_tiers = tiers[tiers.index(want_tier_min):]
    bad_tiers = tiers[: tiers.index(want_tier_min)]

    def amount_under() -> str:
        return money(Decimal(rng.randint(lo * 100, int(cap) * 100)) / 100)

    def amount_over() -> str:
        return money(Decimal(rng.randint(int(cap) * 100 + 1, hi * 100)) / 100)

    def row(cat: str, tier: str, amt: str, status: str) -> dict:
        return {"ID": ctx.record_id(), cat_col: cat, tier_col: tier, d.amount: amt, status_col: status}

    good = row(want_cat, rng.choice(ok_tiers), amount_under(), "Active")
    other_cats = [c for c in cats if c != want_cat]
    near = [  # each fails exactly one condition
        row(rng.choice(other_cats), rng.choice(ok_tiers), amount_under(), "Active"),
        row(want_cat, rng.choice(bad_tiers), amount_under(), "Active"),
        row(want_cat, rng.choice(ok_tiers), amount_over(), "Active"),
        row(want_cat, rng.choice(ok_tiers), amount_under(), rng.choice(statuses[1:])),
    ]
    if knobs.rows is None:
        extra = rng.randint(0, 2)
    else:  # the knob counts every row: the answer, up to four near misses, then unrelated rows
        n = max(2, knobs.rows)
        near = rng.sample(near, min(4, n - 1))
        extra = max(0, n - 5)
    rows = near + [good] + [row(rng.choice(other_cats), rng.choice(tiers), amount_over(),
                                 rng.choice(statuses)) for _ in range(extra)]
    rng.shuffle(rows)
    amount_name = d.amount.split(" (")[0].lower()
    rules = [
        f"Choose the one {d.record} whose {cat_col.lower()} is {want_cat}, whose {tier_col.lower()} "
        f"is {want_tier_min} or higher (order: {', '.join(tiers)}), whose {amount_name} is at most "
        f"{cap} USD, and whose status is Active.",
        f"Copy the chosen {d.record}'s {amount_name} into the form exactly as listed.",
    ]
    cols = ["ID", cat_col, tier_col, d.amount, status_col]
    ids = [r["ID"] for r in rows]
    work = [
        {"key": "selected", "label": f"Selected {d.record}", "kind": "select",
         "options": [CHOOSE] + ids, "initial": CHOOSE},
        {"key": "selected_amount", "label": d.amount, "kind": "text", "initial": ""},
    ]
    goal = (f"Find the single {d.record} that meets every condition in the rules, select it, copy its "
            f"{amount_name}, then press \"{d.final[1]}\".")
    intro = f"Candidate {d.record}s for this review cycle."
    return _assemble(ctx, "conjunctive_selection", task_id, goal, intro,
                     [_record_table(ctx, f"Candidate {d.record}s", rows, cols)], rules, work,
                     {"selected": good["ID"], "selected_amount": good[d.amount]}, [],
                     f"{good['ID']} is the only row meeting all four conditions", extras=knobs.extras)


def _relational_joins(ctx: _Ctx, task_id: str, knobs: Difficulty = NATIVE) -> Task:
    d, rng = ctx.domain, ctx.rng
    unit_names = rng.sample(ctx.units, 4)
    units = []
    for name in unit_names:
        units.append({d.join_key: f"{name} {d.join_key.lower()}" if d.join_key != "Supplier"
                      else f"{name} Supply Co.",
                      d.join_person: ctx.person(),
                      d.join_code: (f"Net {rng.choice([15, 30, 45, 60])}" if d.join_code == "Payment terms"
                                    else ctx.code(d.join_code[:2].upper()))})
    rows = []
    for _ in range(_n_rows(ctx, knobs, 3, 5)):
        r = _random_record(ctx)
        r[d.join_key] = rng.choice(units)[d.join_key]
        rows.append(r)
    subject = rng.choice(rows)
    unit = next(u for u in units if u[d.join_key] == subject[d.join_key])
    rules = [
        f"The {d.approver_label.lower()} for a {d.record} is the {d.join_person.lower()} of the "
        f"{d.record}'s {d.join_key.lower()} in the {d.join_table} table.",
        f"The {d.code_label.lower()} is the one listed for that {d.join_key.lower()}.",
    ]
    cols = ["ID", "Name", d.join_key, d.amount]
    work = [
        {"key": "approver", "label": d.approver_label, "kind": "text", "initial": ""},
        {"key": "unit_code", "label": d.code_label, "kind": "text", "initial": ""},
    ]
    goal = (f"For {d.record} {subject['ID']}, look up its {d.join_key.lower()} and fill in the "
            f"{d.approver_label.lower()} and {d.code_label.lower()}, then press \"{d.final[1]}\".")
    intro = f"Routing sheet: each {d.record} belongs to a {d.join_key.lower()}."
    tables = [_record_table(ctx, f"{d.record.capitalize()}s", rows, cols),
              {"caption": d.join_table, "columns": [d.join_key, d.join_person, d.join_code],
               "rows": [[u[d.join_key], u[d.join_person], u[d.join_code]] for u in units]}]
    return _assemble(ctx, "relational_joins", task_id, goal, intro, tables, rules, work,
                     {"approver": unit[d.join_person], "unit_code": unit[d.join_code]}, [],
                     f"{subject['ID']} -> {subject[d.join_key]} -> {unit[d.join_person]}, {unit[d.join_code]}",
                     extras=knobs.extras)


def _ordered_repair(ctx: _Ctx, task_id: str, knobs: Difficulty = NATIVE) -> Task:
    d, rng = ctx.domain, ctx.rng
    cat_col, cats = d.category
    subject = _random_record(ctx)
    others = [_random_record(ctx) for _ in range(rng.randint(1, 3) if knobs.rows is None
                                                 else max(0, knobs.rows - 1))]
    rows = others + [subject]
    rng.shuffle(rows)
    wrong_cat = rng.choice([c for c in cats if c != subject[cat_col]])
    wrong_amount = money(Decimal(subject[d.amount]) + Decimal(rng.choice([-1, 1]) * rng.randint(1, 90)))
    if Decimal(wrong_amount) <= 0:
        wrong_amount = money(Decimal(subject[d.amount]) + Decimal(37))
    wrong_qty = str(int(subject[d.quantity]) + rng.randint(1, 9))
    fields = [
        {"key": "category", "label": cat_col, "kind": "select", "options": list(cats), "initial": wrong_cat},
        {"key": "amount", "label": d.amount, "kind": "text", "initial": wrong_amount},
        {"key": "quantity", "label": d.quantity, "kind": "text", "initial": wrong_qty},
    ]
    targets = {"category": subject[cat_col], "amount": subject[d.amount], "quantity": subject[d.quantity]}
    order = ["category", "amount", "quantity"]
    rng.shuffle(order)
    label = {f["key"]: f["label"] for f in fields}
    rules = [
        f"The form below was copied from an outdated version of {d.record} {subject['ID']}; "
        f"the Records table is correct.",
        f"The audit trail requires corrections in this order: first {label[order[0]]}, then "
        f"{label[order[1]]}, then {label[order[2]]}. Change nothing else.",
    ]
    cols = ["ID", "Name", cat_col, d.amount, d.quantity]
    goal = (f"Repair the form for {d.record} {subject['ID']} so it matches the Records table, fixing "
            f"fields in the order the rules give, then press \"{d.final[1]}\".")
    intro = f"Data-quality queue: correct the copied {d.record} before it is filed."
    return _assemble(ctx, "ordered_repair", task_id, goal, intro,
                     [_record_table(ctx, f"{d.record.capitalize()}s", rows, cols)], rules, fields,
                     targets, order, f"fix {' -> '.join(order)}", extras=knobs.extras)


def _direct(ctx: _Ctx, stratum: str, task_id: str, knobs: Difficulty) -> Task:
    """A task whose answer is stated in the goal (``answer="goal"``) or copied from one named
    record's row (``answer="lookup"``), in any stratum.

    The work fields are ``knobs.targets`` of the record's columns (name, category, tier,
    amount, quantity; text boxes, a drop-down list and a radio group), in page order. In the
    ordered-repair stratum the fields start with wrong values and the goal gives the order in
    which they must be corrected (``spec.order``); elsewhere they start empty or unchosen.
    """
    d, rng = ctx.domain, ctx.rng
    cat_col, cats = d.category
    tier_col, tiers = d.tier
    n_rows = knobs.rows or 0
    if knobs.answer == "lookup":
        n_rows = max(1, n_rows)
    rows = [_random_record(ctx) for _ in range(n_rows)]
    subject = rng.choice(rows) if rows and knobs.answer == "lookup" else _random_record(ctx)
    repair = stratum == "ordered_repair"
    slots = [  # (key, label, kind, options, value)
        ("name", "Name", "text", [], subject["Name"]),
        ("category", cat_col, "select", [CHOOSE, *cats], subject[cat_col]),
        ("tier", tier_col, "radio", list(tiers), subject[tier_col]),
        ("amount", d.amount, "text", [], subject[d.amount]),
        ("quantity", d.quantity, "text", [], subject[d.quantity]),
    ]
    chosen = sorted(rng.sample(range(len(slots)), knobs.targets))
    work, targets = [], {}
    for i in chosen:
        key, label, kind, options, value = slots[i]
        if repair:  # a wrong value to correct
            if kind == "text":
                initial = ctx.person() if key == "name" else (
                    money(Decimal(value) + 11) if key == "amount" else str(int(value) + rng.randint(1, 9)))
            else:
                initial = rng.choice([o for o in options if o not in (value, CHOOSE)])
        else:
            initial = CHOOSE if kind == "select" else ""
        if kind == "select" and repair:
            options = options[1:]
        work.append({"key": key, "label": label, "kind": kind, "options": options, "initial": initial})
        targets[key] = value
    order = list(targets)
    if repair:
        rng.shuffle(order)
    labels = {f["key"]: f["label"] for f in work}

    def quoted(key: str) -> str:
        return f"\"{labels[key]}\""

    final = f"then press \"{d.final[1]}\"."
    if knobs.answer == "goal":
        parts = [f"{quoted(k)} to {targets[k]}" for k in order]
        if repair:
            goal = "Correct the form in this order: set " + ", then ".join(parts) + ", " + final
        else:
            goal = "Set " + " and ".join(parts) + ", " + final
        intro = f"Fill in the {d.form_name.lower()} as your task states."
        rationale = "values stated in the goal"
    else:
        names = " and ".join(quoted(k) for k in order)
        how = " (in that order)" if repair and len(order) > 1 else ""
        goal = (f"Copy the {names} of {d.record} {subject['ID']} from the table into the form{how}, " + final)
        intro = f"Look up the {d.record} named in your task in the table."
        rationale = f"copied from the row of {subject['ID']}"
    cols = ["ID", "Name", cat_col, tier_col, d.amount, d.quantity]
    tables = [_record_table(ctx, f"{d.record.capitalize()}s", rows, cols)] if rows else []
    return _assemble(ctx, stratum, task_id, goal, intro, tables, [], work, targets, order if repair else [],
                     rationale, extras=knobs.extras)


def build(ctx: _Ctx, stratum: str, task_id: str, knobs: Difficulty) -> Task:
    """One task of ``stratum`` at difficulty ``knobs`` (the stratum's builder for
    ``answer="rule"``, :func:`_direct` otherwise)."""
    if knobs.answer == "rule":
        return _BUILDERS[stratum](ctx, task_id, knobs)
    return _direct(ctx, stratum, task_id, knobs)


_BUILDERS = {
    "conditional_policy": _conditional_policy,
    "derived_values": _derived_values,
    "conjunctive_selection": _conjunctive_selection,
    "relational_joins": _relational_joins,
    "ordered_repair": _ordered_repair,
}
