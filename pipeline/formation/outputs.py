"""What each formation stage stores on its run (design §5): one model per stage output.

A stage's ``compute`` returns one of these; ``runner.run_stage`` stores its JSON-mode dump (the
stored shape: plain JSON, as records of every release hold it) and a later stage, ``finish``
or ``memoryctl runs`` reads it back through ``read`` (parsed when read, once per reader).
Writer and readers share the model, so a renamed field is an error on either side (an
undeclared keyword, an unknown attribute), never a silent 0 in an operator's totals.

Records of earlier releases read as they are: a field they lack takes its default (an empty
count map, no vectors, no version on an effect), and the one shape that changed meaning
(embed_facts before the content-only vectors) is mapped in a ``mode="before"`` validator.
A writer that names a field (or a counter) the model does not declare fails at once; a reader
ignores fields a newer release added, so old and new workers can share a store during a
rolling upgrade. Count maps dump as ``{}`` when nothing was counted, as they were stored before.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_serializer, model_validator

from pipeline import vectors
from pipeline.errors import PermanentError
from pipeline.formation.dedup import Decision
from pipeline.formation.facts import NewFact
from pipeline.formation.provenance import Provenance
from pipeline.formation.reflections import NewReflection
from pipeline.formation.scopes import ScopePlan
from schemas.documents import FormationRun, Stage, stage_kind


class StageMissing(PermanentError):
    """A stage needs the output of an earlier one that is not done: the chain is broken."""


class StageOutputInvalid(PermanentError):
    """A stored stage output does not read as its stage's model."""


class _Output(BaseModel):
    # forbid: a writer's misnamed field is an error, never stored and then read as its default;
    # ``parse`` reads stored records with extra="ignore" instead (a newer release's fields)
    model_config = ConfigDict(extra="forbid")


class Counts(_Output):
    """A map of counters, every counter declared."""

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        return handler(self) if self.model_fields_set else {}


class FactDrops(Counts):
    kept: int = 0
    over_limit: int = 0
    scope_not_allowed: int = 0   # user facts in a group chat or with user memory off, ...
    repeated: int = 0
    empty: int = 0
    expiry_invalid: int = 0      # facts kept without a deadline that did not parse
    category_unknown: int = 0    # category names outside the agent's list, dropped from their facts


class Screened(Counts):
    """What screening kept out of memory (design §11)."""

    secrets_dropped: int = 0
    contacts_rescoped: int = 0
    contacts_dropped: int = 0
    kinds: dict[str, int] = Field(default_factory=dict)   # secret and contact kinds seen


class ReflectionCounts(Counts):
    agent: int = 0
    user: int = 0
    session: int = 0
    over_limit: int = 0
    scope_not_allowed: int = 0
    repeats_fact: int = 0
    repeated: int = 0


class ActionCounts(Counts):
    added: int = 0
    updated: int = 0
    deleted: int = 0
    none: int = 0


class SameRunCounts(Counts):
    """Later near-duplicates of the same run: dropped, merged into an earlier fact, superseding it."""

    dropped: int = 0
    merged: int = 0
    superseded: int = 0


class PlanRecord(_Output):
    """The scopes a run may form, fixed by its first stage (later stages never re-read the toggles)."""

    agent_id: str
    session_id: str
    user_id: str | None = None
    group_chat: bool
    fact_scopes: list[str]
    reflection_scopes: list[str]

    def scope_plan(self) -> ScopePlan:
        return ScopePlan(agent_id=self.agent_id, session_id=self.session_id, user_id=self.user_id,
                         group_chat=self.group_chat, fact_scopes=tuple(self.fact_scopes),
                         reflection_scopes=tuple(self.reflection_scopes))


class ModelChoice(_Output):
    fast: str   # extract_facts, decide_facts
    tier: str   # extract_reflections, consolidation


class ExtractFactsOutput(_Output):
    plan: PlanRecord
    models: ModelChoice
    facts: list[NewFact] = Field(default_factory=list)
    dropped: FactDrops = Field(default_factory=FactDrops)
    screened: Screened = Field(default_factory=Screened)   # absent before screening existed
    message_ids: list[str] = Field(default_factory=list)
    skipped: str | None = None


#: base64 float32 rows (``pipeline.vectors.pack``), or JSON lists in records stored before
Packed = Union[str, list[list[float]]]


class EmbedFactsOutput(_Output):
    model: str
    dim: int = 0
    vectors: Packed = ""           # each new fact's retrieval text (content, excerpt, date)
    dedup_vectors: Packed = ""     # each new fact's bare content, what dedup compares
    # excerpt lines carrying a secret are blanked before they are stored or embedded
    # (``screening.screen_excerpt``): the record keeps no secret said in the conversation
    sources: list[Provenance] = Field(default_factory=list)
    input_tokens: int = 0
    excerpt_lines_blanked: int = 0

    @model_validator(mode="before")
    @classmethod
    def _content_alone(cls, data: Any) -> Any:
        """A record stored before the content-only vectors embedded the content alone: its
        vectors are the content vectors too."""
        if isinstance(data, dict) and "dedup_vectors" not in data:
            return {**data, "dedup_vectors": data.get("vectors", "")}
        return data

    def fact_vectors(self) -> list[list[float]]:
        return vectors.unpack(self.vectors, self.dim)

    def content_vectors(self) -> list[list[float]]:
        return vectors.unpack(self.dedup_vectors, self.dim)


class Insert(_Output):
    """A new fact, its id deterministic on the run (``<run id>:<index>``)."""

    op: Literal["insert"]
    fact_id: str
    index: int
    text: str
    scope: str
    scope_key: str
    hash: str


class Update(_Output):
    """The stored fact takes a merged text, if still at ``version`` (None: a record stored
    before versions were checked, applied whatever the version)."""

    op: Literal["update"]
    fact_id: str
    index: int
    text: str
    hash: str
    scope_key: str
    version: int | None = None


class Retire(_Output):
    """The contradicted stored fact is retired, if still at ``version`` (as for ``Update``)."""

    op: Literal["retire"]
    fact_id: str
    index: int
    version: int | None = None


Effect = Annotated[Union[Insert, Update, Retire], Field(discriminator="op")]


class DecideFactsOutput(_Output):
    decisions: list[Decision] = Field(default_factory=list)
    effects: list[Effect] = Field(default_factory=list)
    update_vectors: dict[str, Union[str, list[float]]] = Field(default_factory=dict)  # new fact index -> vector
    embedding_model: str
    counts: ActionCounts = Field(default_factory=ActionCounts)
    update_over_limit: int = 0
    same_run: SameRunCounts = Field(default_factory=SameRunCounts)
    update_secrets: int = 0
    update_contacts: int = 0   # merged agent-scope texts carrying contact data, added as said instead
    llm_items: int = 0
    # new fact index -> [[candidate id, content-vs-content score], ...], kept before any effect
    candidates: dict[str, list[tuple[str, float]]] = Field(default_factory=dict)
    candidate_input_tokens: int = 0

    def merged_vector(self, index: int) -> list[float] | None:
        """The vector of new fact ``index``'s merged text (an UPDATE's), if it has one."""
        return vectors.unpack_one(self.update_vectors.get(str(index)))

    def formed_texts(self) -> list[str]:
        """Texts of the facts this run formed (added, or merged by an UPDATE)."""
        return [e.text for e in self.effects if isinstance(e, (Insert, Update))]


class ExtractReflectionsOutput(_Output):
    reflections: list[NewReflection] = Field(default_factory=list)
    counts: ReflectionCounts = Field(default_factory=ReflectionCounts)
    screened: Screened = Field(default_factory=Screened)
    skipped: str | None = None


class ConsolidateOutput(_Output):
    due: list[str] = Field(default_factory=list)   # scope keys, in merge order; scope i is consolidate_scope:i
    session_end: bool = False
    model: str
    unabsorbed: dict[str, int] = Field(default_factory=dict)


class Merged(_Output):
    status: Literal["merged"]
    scope_key: str
    version: int
    absorbed: int
    words: int
    attempts: int
    over_limit_answers: list[int] = Field(default_factory=list)
    lost_section_answers: list[list[str]] = Field(default_factory=list)
    outdated_sections: list[str] = Field(default_factory=list)
    screened: Screened = Field(default_factory=Screened)   # lines the blob's screen removed


class AlreadyMerged(_Output):
    """A rerun: this holder's merge is already saved."""

    status: Literal["already_merged"]
    scope_key: str
    version: int
    absorbed: int


class NothingToMerge(_Output):
    status: Literal["nothing_to_merge"]
    scope_key: str
    version: int
    absorbed: int = 0


class NotDue(_Output):
    """No longer due under the lease (another consolidation merged the key meanwhile)."""

    status: Literal["not_due"]
    scope_key: str
    version: int
    absorbed: int = 0
    unabsorbed: int
    threshold: int


class Skipped(_Output):
    """Given up for this run (its lease stayed busy): the buffer stays for the next one."""

    status: Literal["skipped"]
    reason: str


ScopeOutcome = Annotated[Union[Merged, AlreadyMerged, NothingToMerge, NotDue, Skipped], Field(discriminator="status")]
SCOPE_OUTCOME: TypeAdapter = TypeAdapter(ScopeOutcome)


class FinishOutput(_Output):
    totals: dict[str, Any]          # ``finish.run_totals``, also kept as the run's ``totals``
    changed: list[str] = Field(default_factory=list)   # scope keys whose version stamps moved


#: the output model of each stage of a run
MODELS: dict[Stage, Any] = {
    Stage.EXTRACT_FACTS: ExtractFactsOutput,
    Stage.EMBED_FACTS: EmbedFactsOutput,
    Stage.DECIDE_FACTS: DecideFactsOutput,
    Stage.EXTRACT_REFLECTIONS: ExtractReflectionsOutput,
    Stage.CONSOLIDATE: ConsolidateOutput,
    Stage.CONSOLIDATE_SCOPE: SCOPE_OUTCOME,
    Stage.FINISH: FinishOutput,
}


def parse(stage: str, output: dict[str, Any]) -> Any:
    """A stored output of ``stage`` (a record name: ``consolidate_scope:<i>`` included) as its
    model. Raises ``StageOutputInvalid`` (what, and why) when it does not read."""
    model = MODELS.get(stage) or MODELS[stage_kind(stage)]
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(output, extra="ignore")
        return model.model_validate(output, extra="ignore")
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(output)'}: {e['msg']}" for e in exc.errors())
        raise StageOutputInvalid(f"the stored output of stage {stage} does not read: {problems}") from None


def dump(output: BaseModel) -> dict[str, Any]:
    """The stored shape of a stage output: plain JSON."""
    return output.model_dump(mode="json")


def read(run: FormationRun, stage: str) -> Any:
    """The stored output of an earlier stage, parsed; a missing one is a broken chain, not 'nothing'."""
    record = run.stages.get(stage)
    if record is None or record.status != "done" or record.output is None:
        raise StageMissing(f"run {run.run_id}: stage {stage} has no stored output (status "
                           f"{record.status if record else 'missing'})")
    return parse(stage, record.output)


class Earlier:
    """Earlier outputs of one run as one stage reads them: each parsed at most once, however
    often the stage's compute and apply (or ``finish``'s totals) read it."""

    def __init__(self) -> None:
        self._done: dict[str, Any] = {}
        self._stored: dict[str, Any] = {}

    def __call__(self, run: FormationRun, stage: str) -> Any:
        """As ``read``."""
        if stage not in self._done:
            self._done[stage] = read(run, stage)
        return self._done[stage]

    def stored(self, run: FormationRun, stage: str) -> Any | None:
        """As ``read_stored``."""
        if stage not in self._stored:
            self._stored[stage] = read_stored(run, stage)
        return self._stored[stage]


def read_stored(run: FormationRun, stage: str) -> Any | None:
    """The stored output of ``stage``, None when it has none (for readers of a run in any
    state: ``finish`` totals, ``memoryctl runs``)."""
    record = run.stages.get(stage)
    if record is None or record.output is None:
        return None
    return parse(stage, record.output)
