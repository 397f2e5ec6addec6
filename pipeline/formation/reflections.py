"""Which extracted reflections a run keeps (design §5.4). Pure.

Hierarchy agent -> user -> session: a lower level keeps only what no level above holds. A
reflection is dropped (and counted) when its level is not enabled for the run, when it is over
the word limit (never cut), when it repeats a fact formed by this run, or when it repeats a
reflection of a higher level or of its own level. Ids are ``<run_id>:<scope>:<i>`` so a rerun
inserts nothing twice. Each kept reflection carries the ids of the messages it cites
(``source_message_ids``, from the answer's aliases); an output stored before citations has
none, and its reflections rest on the run's range as they did then.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from pipeline.formation.scopes import REFLECTION_ORDER, ScopePlan
from pipeline.prompts.reflections import ReflectionsAnswer
from pipeline.text import normalize, word_count


@dataclass(frozen=True)
class NewReflection:
    reflection_id: str
    scope: str
    scope_key: str
    text: str
    source_message_ids: tuple[str, ...] = ()   # the messages it cites; () in outputs stored before

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> NewReflection:
        return cls(data["reflection_id"], data["scope"], data["scope_key"], data["text"],
                   tuple(data.get("source_message_ids") or ()))


@dataclass
class ReflectionFilter:
    kept: list[NewReflection] = field(default_factory=list)
    over_limit: int = 0
    scope_not_allowed: int = 0
    repeats_fact: int = 0
    repeated: int = 0

    def counts(self) -> dict[str, int]:
        per_scope = {s: sum(1 for r in self.kept if r.scope == s) for s in REFLECTION_ORDER}
        return {
            **per_scope, "over_limit": self.over_limit, "scope_not_allowed": self.scope_not_allowed,
            "repeats_fact": self.repeats_fact, "repeated": self.repeated,
        }


def reflection_id(run_id: str, scope: str, index: int) -> str:
    return f"{run_id}:{scope}:{index}"


def filter_reflections(
    run_id: str, answer: ReflectionsAnswer, plan: ScopePlan, word_limit: int, new_facts: Iterable[str],
    message_ids: Sequence[str] = (),
) -> ReflectionFilter:
    """The reflections kept; ``message_ids`` maps the answer's aliases to message ids
    (``pipeline.prompts.reflections.alias_ids``, checked by ``check_sources``)."""
    result = ReflectionFilter()
    facts = {normalize(f) for f in new_facts}
    held: set[str] = set()   # normalized texts of every level above and this one so far
    for scope in REFLECTION_ORDER:
        items = getattr(answer, scope)
        if scope not in plan.reflection_scopes:
            result.scope_not_allowed += sum(1 for item in items if item.text.strip())
            continue
        index = 0
        for item in items:
            text = " ".join(item.text.split())
            if not text:
                continue
            norm = normalize(text)
            if word_count(text) > word_limit:
                result.over_limit += 1
            elif norm in facts or any(f and f in norm and len(f) >= len(norm) * 0.8 for f in facts):
                result.repeats_fact += 1
            elif norm in held:
                result.repeated += 1
            else:
                held.add(norm)
                cited = tuple(dict.fromkeys(message_ids[a] for a in item.sources if 0 <= a < len(message_ids)))
                result.kept.append(NewReflection(reflection_id(run_id, scope, index), scope, plan.key(scope), text, cited))
                index += 1
    return result
