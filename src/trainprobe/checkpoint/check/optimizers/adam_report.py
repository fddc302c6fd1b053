"""What ``check`` says of the Adam pairs :func:`.adam.adam_pair` checked: the Adam relations
(``adam-bound``, ``exp-avg-zero``, ``exp-avg-sq-nonnegative``), the family when it is not certain, and the
moments against their step counters (:mod:`.adam_history`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainprobe.checkpoint.check.optimizers.adam import AdamPlan
from trainprobe.checkpoint.check.optimizers.adam_history import PairHistory, moments_evidence
from trainprobe.checkpoint.check.state import MAX_NAMES
from trainprobe.checkpoint.evidence import Evidence


@dataclass
class AdamTally:
    checked: int = 0
    elements: int = 0
    negative_v: list[str] = field(default_factory=list)
    m_without_v: list[str] = field(default_factory=list)
    outside: list[tuple[float, str, int]] = field(default_factory=list)
    worst: float = 0.0
    skipped: list[str] = field(default_factory=list)


def report_adam(plan: AdamPlan, ev: list[Evidence]) -> None:
    """The Adam relations of the plan's pairs, then their moments against their counters."""
    _report_relations(plan, ev)
    if plan.uncertain:
        ev.append(
            Evidence(
                "moments-vs-counter",
                "skip",
                f"{plan.label}: {len(plan.uncertain)} state entr(ies) of an optimizer family not known for "
                "certain: their moments are not held against their counters",
            )
        )
    done = [future.result() for future in plan.results]
    histories = [
        PairHistory(param, counter, pair.zero, pair.one_step, ratio)
        for (param, counter, ratio), pair in zip(plan.counters, done, strict=True)
    ]
    ev.extend(moments_evidence(plan.label, histories, plan.skipped))


def _report_relations(plan: AdamPlan, ev: list[Evidence]) -> None:
    label, bounds = plan.label, plan.bounds
    if plan.uncertain:
        ev.append(_unknown_family(label, plan.uncertain))
    tally = AdamTally(skipped=plan.skipped)
    for future in plan.results:
        pair = future.result()
        tally.checked += 1
        tally.elements += pair.elements
        tally.worst = max(tally.worst, pair.worst)
        if pair.negative:
            tally.negative_v.append(pair.name)
        if pair.m_without_v:
            tally.m_without_v.append(pair.name)
        if pair.outside:
            tally.outside.append((pair.worst, pair.name, pair.outside))
    if not tally.checked:
        if tally.skipped:
            ev.append(Evidence("adam-bound", "skip", f"{label}: Adam state not checked: {tally.skipped[0]}"))
        return
    where = f"{label}: {tally.checked} Adam state pairs, {tally.elements:,} elements"
    if tally.negative_v:
        ev.append(
            Evidence(
                "exp-avg-sq-nonnegative",
                "fail",
                f"{label}: exp_avg_sq < 0 in {len(tally.negative_v)} tensor(s), e.g. {tally.negative_v[0]} — "
                "a squared-gradient average cannot be negative",
                indicates="corrupt",
                tensors=tally.negative_v[:MAX_NAMES],
            )
        )
    else:
        ev.append(Evidence("exp-avg-sq-nonnegative", "pass", f"{where}: exp_avg_sq >= 0 everywhere"))
    if tally.m_without_v:
        ev.append(
            Evidence(
                "exp-avg-zero",
                "fail",
                f"{label}: exp_avg != 0 where exp_avg_sq == 0 in {len(tally.m_without_v)} tensor(s), e.g. "
                f"{tally.m_without_v[0]} — the first moment has seen a gradient the second has not",
                indicates="torn",
                tensors=tally.m_without_v[:MAX_NAMES],
            )
        )
    else:
        ev.append(Evidence("exp-avg-zero", "pass", f"{where}: exp_avg == 0 wherever exp_avg_sq == 0"))
    bound_text = "/".join(f"{b:.3g}" for b in sorted(bounds)) or "none"
    if tally.outside:
        tally.outside.sort(reverse=True)
        ratio, name, count = tally.outside[0]
        ev.append(
            Evidence(
                "adam-bound",
                "fail",
                f"{label}: |exp_avg| exceeds the Adam bound ({bound_text}·sqrt(exp_avg_sq)) in "
                f"{len(tally.outside)} tensor(s); worst {name}: {ratio:.3g}× the bound, {count:,} element(s) "
                "outside — m and v come from different steps",
                indicates="torn",
                tensors=[n for _r, n, _c in tally.outside[:MAX_NAMES]],
                values={"worst_ratio_to_bound": ratio, "bound": sorted(bounds)},
            )
        )
    else:
        ev.append(
            Evidence(
                "adam-bound",
                "pass",
                f"{where}: |exp_avg| <= {bound_text}·sqrt(exp_avg_sq) everywhere "
                f"(largest ratio to the bound {tally.worst:.3f})",
                values={"decisive": True, "worst_ratio_to_bound": tally.worst, "bound": sorted(bounds)},
            )
        )


def _unknown_family(label: str, uncertain: list[tuple[str, list[str]]]) -> Evidence:
    keys = sorted({k for _name, doubt in uncertain for k in doubt})
    return Evidence(
        "optimizer-family",
        "skip",
        f"{label}: unknown family: {len(uncertain)} state entr(ies) keep exp_avg/exp_avg_sq, but their "
        f"param_groups hold keys no known Adam sets ({', '.join(keys[:6])}): the first moment may not be "
        "Adam's (ADOPT and LaProp average g/sqrt(v)), so the Adam relations (|m|/sqrt(v) bound, m == 0 where "
        "v == 0, v >= 0) are not checked",
        values={"family": "unknown", "doubt_keys": keys},
    )
