"""The fact and reflection stages of a formation run, each a plain function (run_id, deps).

Each returns a ``StageResult`` (None when the run is no longer active) and is idempotent:
see ``pipeline.formation.runner``; what each stores: ``pipeline.formation.outputs``. Models:
the fast model for extract_facts and decide_facts, the tier model for extract_reflections (and
consolidation), both chosen in the first stage and recorded on the run with the scopes it may
form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from pipeline import expiry
from pipeline import sources as provenance_sources
from pipeline.conversation import humans, render_conversation
from pipeline.errors import InvalidInput
from pipeline.formation import candidates, dedup, fact_effects
from pipeline.formation.outputs import (
    ActionCounts, DecideFactsOutput, EmbedFactsOutput, ExtractFactsOutput, ExtractReflectionsOutput, FactDrops,
    Earlier, ModelChoice, ReflectionCounts, SameRunCounts, Screened, read,
)
from pipeline.formation.facts import NewFact, filter_facts
from pipeline.formation.provenance import EXCERPT_TURNS, Provenance, provenances
from pipeline.formation.reflections import filter_reflections
from pipeline.formation.runner import Deps, StageResult, Usage, run_stage
from pipeline.formation.scopes import plan_scopes, plan_to_dict, restricted
from pipeline.formation.spend_gate import premium_model
from pipeline.formation.screening import (
    guard_for, screen_excerpt, screen_facts, screen_reflections, screen_write, session_user_ids,
)
from pipeline.llm.models import fast_model, tier_model
from pipeline.owner.categories import current as current_categories
from pipeline.owner.instructions import guidance
from pipeline.prompts.dedup import build_dedup_request
from pipeline.prompts.facts import build_facts_request
from pipeline.prompts.reflections import alias_ids, build_reflections_request, check_sources
from pipeline.store.ports.ingest import IngestStore
from pipeline.validity import expired
from pipeline.vectors import pack
from schemas.documents import FormationRun, Reflection, Stage, StoredMessage


def _names(messages) -> dict[str, str]:
    return {m.sender_id: m.sender_name for m in messages if m.sender_id and m.sender_name}


def _agent_name(agent, messages) -> str | None:
    return agent.name or next((m.agent_name for m in messages if m.agent_name), None)


def _run_messages(ingest: IngestStore, run: FormationRun) -> list[StoredMessage]:
    """The claimed range, each message naming the session's humans as the run was claimed
    (declared at session start included, design §11), so that the prompts see a group chat
    before its second human has spoken."""
    messages = ingest.get_messages(run.session_id, run.seq_from, run.seq_to)
    return [m if set(run.user_ids) <= set(m.session_users)
            else m.model_copy(update={"session_users": list(dict.fromkeys([*m.session_users, *run.user_ids]))})
            for m in messages]


def extract_facts(run_id: str, deps: Deps) -> StageResult | None:
    """Plan the run's scopes and models, then extract, filter and number its facts."""

    def compute(run: FormationRun, usage: Usage) -> ExtractFactsOutput:
        store, settings = deps.store, deps.settings
        messages = _run_messages(store.ingest, run)
        agent = store.ingest.get_agent_settings(run.agent_id)
        session = store.ingest.get_session(run.session_id)
        people = [*run.user_ids, *humans(messages)]
        plan = restricted(plan_scopes(agent, run.session_id, people, run.group_chat,
                                      store.access.user_memory_off(run.agent_id, people)), run.only_scopes)
        models = ModelChoice(fast=fast_model(settings),
                             tier=tier_model(settings, run.tier, bool(session and session.preview)))
        store.runs.update_run_fields(run_id, scopes_enabled=plan.enabled, models=models.model_dump())
        output = ExtractFactsOutput(plan=plan_to_dict(plan), models=models,
                                    message_ids=[m.message_id for m in messages])
        if not messages:
            output.skipped = "no messages in the claimed range"
            return output
        try:
            request = build_facts_request(
                render_conversation(messages, _names(messages)), messages,
                user_scope="user" in plan.fact_scopes, agent_scope="agent" in plan.fact_scopes,
                agent_name=_agent_name(agent, messages), user_names=_names(messages),
                model=models.fast, word_limit=settings.fact_word_limit,
                guidance=guidance(agent, "extraction", plan.fact_scopes), categories=current_categories(agent),
            )
        except InvalidInput as exc:  # no fact scope left (both toggles off, ...): no LLM call
            output.skipped = str(exc)
            return output
        answer = usage.complete(deps.llm, request).parsed
        allowed, screened = screen_facts(answer.facts, plan, guard_for(settings),
                                         session_user_ids(run, plan, messages))
        kept = filter_facts(allowed, plan, settings.fact_word_limit, current_categories(agent))
        output.facts = kept.kept
        output.dropped = FactDrops(**kept.counts())
        output.screened = Screened(**screened.counts())
        return output

    return run_stage(deps, run_id, Stage.EXTRACT_FACTS, compute)


def _provenances(ingest: IngestStore, run: FormationRun, facts: list[NewFact]) -> list[Provenance]:
    """Each new fact's source message in the claimed range, its excerpt and date."""
    claimed = ingest.get_messages(run.session_id, run.seq_from, run.seq_to)
    if not claimed:
        return []
    before = ingest.get_messages(run.session_id, max(1, run.seq_from - EXCERPT_TURNS), run.seq_from - 1) \
        if run.seq_from > 1 else []
    names = _names([*before, *claimed])
    return provenances([f.text for f in facts], claimed, before, names)


def embed_facts(run_id: str, deps: Deps) -> StageResult | None:
    """One batched embedding call for all new facts: each fact's retrieval text (its content
    joined to its source excerpt and date, stored with the fact for search; excerpt lines
    carrying a secret are blanked first, ``screening.screen_excerpt``) and its bare
    content (what dedup compares with the candidates' contents, see
    ``pipeline.formation.candidates``)."""

    def compute(run: FormationRun, usage: Usage) -> EmbedFactsOutput:
        facts = read(run, Stage.EXTRACT_FACTS).facts
        if not facts:
            return EmbedFactsOutput(model=deps.embedder.model)
        guard = guard_for(deps.settings)
        screened = [screen_excerpt(p, guard) for p in _provenances(deps.store.ingest, run, facts)]
        sources = [p for p, _ in screened]
        texts = [p.text(f.text, deps.embedder) for f, p in zip(facts, sources)] if sources else [f.text for f in facts]
        result = usage.embed(deps.embedder, [*texts, *(f.text for f in facts)], "facts")
        n = len(facts)
        return EmbedFactsOutput(model=result.model, dim=result.dim, vectors=pack(result.vectors[:n]),
                                dedup_vectors=pack(result.vectors[n:]), sources=sources,
                                input_tokens=result.input_tokens,
                                excerpt_lines_blanked=sum(blanked for _, blanked in screened))

    return run_stage(deps, run_id, Stage.EMBED_FACTS, compute)


def decide_facts(run_id: str, deps: Deps) -> StageResult | None:
    """Dedup: exact hashes; a shortlist per fact through the search port (content vector
    and BM25 on the content), scored content against content after one batched embedding
    of the shortlisted contents (``pipeline.formation.candidates``); one batched LLM call
    (``pipeline.formation.dedup``); effects."""

    earlier = Earlier()

    def compute(run: FormationRun, usage: Usage) -> DecideFactsOutput:
        settings = deps.settings
        extracted, embedded = earlier(run, Stage.EXTRACT_FACTS), earlier(run, Stage.EMBED_FACTS)
        facts = extracted.facts
        now = deps.clock.now()
        exact = _exact_matches(deps.store, run, facts, now)
        asked = _Asked()
        if settings.facts_dedup:
            vectors = dict(zip((f.index for f in facts), embedded.content_vectors()))
            asked = _ask_dedup(deps, run, usage, [f for f in facts if f.index not in exact], vectors, embedded,
                               extracted.models.fast, now)
        resolved = dedup.resolve(facts, exact, asked.batch, asked.decided, settings.fact_word_limit,
                                 dedup_enabled=settings.facts_dedup, same_run=asked.same_run)
        update_secrets, update_contacts = _guard_updates(
            run.run_id, resolved, guard_for(settings), {f.index: f.scope for f in facts},
            session_user_ids(run, extracted.plan.scope_plan(), []))
        update_vectors = _update_vectors(deps, usage, facts, embedded, resolved)
        return DecideFactsOutput(
            decisions=resolved.decisions,
            effects=dedup.plan_effects(run.run_id, facts, resolved.decisions, asked.seen),
            update_vectors=update_vectors,
            embedding_model=embedded.model,
            counts=ActionCounts(**dedup.action_counts(resolved.decisions)),
            update_over_limit=resolved.update_over_limit,
            same_run=SameRunCounts(**resolved.same_run),
            update_secrets=update_secrets,
            update_contacts=update_contacts,
            llm_items=len(asked.batch.indexes),
            # content-vs-content scores of the kept candidates, stored before any effect
            candidates={str(i): [(fid, round(score, 6)) for fid, score in pairs]
                        for i, pairs in asked.scored.items() if pairs},
            candidate_input_tokens=asked.candidate_tokens,
        )

    def apply(run: FormationRun, output: DecideFactsOutput) -> None:
        _apply_fact_effects(deps, run, output, earlier)

    return run_stage(deps, run_id, Stage.DECIDE_FACTS, compute, apply)


def _exact_matches(store: expiry.ExpiryStore, run: FormationRun, facts, now) -> dict[int, str]:
    """New fact index -> the live stored fact with the same hash in its scope."""
    exact = {}
    for f in facts:
        found = store.facts.find_fact_by_hash(run.agent_id, f.scope_key, f.hash)
        if found is not None and expired(found, now):
            expiry.stamp(store, [found], now)  # an expired fact holds its text no longer
            found = None
        if found is not None:
            exact[f.index] = found.fact_id
    return exact


@dataclass
class _Asked:
    """What the LLM was asked about the facts without an exact match, and what it decided
    (empty when dedup is off)."""

    batch: dedup.DedupBatch = field(default_factory=dedup.DedupBatch)
    decided: dict = field(default_factory=dict)
    scored: dict = field(default_factory=dict)
    candidate_tokens: int = 0
    same_run: dict = field(default_factory=dict)
    seen: dict = field(default_factory=dict)  # stored fact id -> the version each decision is about


def _ask_dedup(deps: Deps, run: FormationRun, usage: Usage, open_facts, vectors, embedded, model: str,
               now) -> _Asked:
    """Shortlist, score and batch the stored and same-run candidates of ``open_facts`` (the new
    facts without an exact match); one batched LLM call decides."""
    settings = deps.settings
    limit = candidates.SHORTLIST_FACTOR * settings.dedup_max_candidates
    shortlists = candidates.shortlist(deps.search, run.agent_id, open_facts, vectors, embedded.model, limit=limit)
    shortlists = candidates.with_recent(shortlists, open_facts, _recent_fact_ids(deps, run, open_facts,
                                                                                 embedded.model, limit))
    ids = sorted({fid for found in shortlists.values() for fid in found})
    shortlisted = [x for x in (deps.store.facts.get_facts(ids) if ids else [])
                   if x.retired_at is None and not expired(x, now) and x.embedding_model == embedded.model]
    live = {x.fact_id: x.content for x in shortlisted}
    asked = _Asked(seen={x.fact_id: x.version for x in shortlisted})
    candidate_vectors = {}
    if live:  # one batched call for every shortlisted content of the stage
        result = usage.embed(deps.embedder, list(live.values()), "candidates")
        asked.candidate_tokens = result.input_tokens
        candidate_vectors = dict(zip(live, result.vectors))
    asked.scored = candidates.merge_candidates(
        candidates.score_candidates(open_facts, shortlists, vectors, candidate_vectors,
                                    min_score=settings.dedup_min_score, limit=settings.dedup_max_candidates),
        candidates.same_run_candidates(run.run_id, open_facts, vectors, min_score=settings.dedup_min_score),
        limit=settings.dedup_max_candidates,
    )
    asked.same_run = {candidates.new_fact_id(run.run_id, f.index): f.index for f in open_facts}
    texts = {f.index: f.text for f in open_facts}
    contents = {**live, **{fid: texts[index] for fid, index in asked.same_run.items()}}
    asked.batch = dedup.build_batch(open_facts, candidates.candidates_from(asked.scored, contents))
    if asked.batch:
        request = build_dedup_request(asked.batch.texts, asked.batch.candidates, model=model,
                                      word_limit=settings.fact_word_limit)
        asked.decided = dedup.validate(usage.complete(deps.llm, request).parsed, asked.batch)
    return asked


def _update_vectors(deps: Deps, usage: Usage, facts, embedded, resolved: dedup.Resolved) -> dict[str, str]:
    """The merged texts' vectors, embedded as the new facts were (with their source line)."""
    updates = [d for d in resolved.decisions if d.text is not None]
    if not updates:
        return {}
    sources = dict(zip((f.index for f in facts), embedded.sources))
    texts = [sources[d.index].text(d.text or "", deps.embedder) if d.index in sources else d.text or ""
             for d in updates]
    result = usage.embed(deps.embedder, texts, "updates")
    return {str(d.index): pack([v]) for d, v in zip(updates, result.vectors)}


def _recent_fact_ids(deps: Deps, run: FormationRun, facts, model: str, limit: int) -> dict[str, list[str]]:
    """Per scope key of ``facts``, its facts formed within ``dedup_recent_window_s``, read from
    the store: a search index may not show them yet (Atlas is eventually consistent)."""
    window = deps.settings.dedup_recent_window_s
    if window <= 0:
        return {}
    since = deps.clock.now() - timedelta(seconds=window)
    return {key: deps.store.facts.recent_fact_ids(run.agent_id, key, model, since, limit)
            for key in dict.fromkeys(f.scope_key for f in facts)}


def _guard_updates(run_id: str, resolved: dedup.Resolved, guard, scopes: dict[int, str],
                   people: list[str]) -> tuple[int, int]:
    """A merged text that ``screening.screen_write`` would not keep in its fact's scope (a
    secret; in agent scope, contact data, which cannot move: the stored fact stays where it
    is) is not stored: the new facts it merged (screened already) are ADDed as they were said
    instead, as for an UPDATE over the word limit. Returns how many merged texts were dropped
    for a secret and for contact data."""
    secrets = contacts = 0
    for i, d in enumerate(resolved.decisions):
        if d.text is None:
            continue
        verdict = screen_write(d.text, scopes.get(d.index, "agent"), guard=guard, people=people)
        if verdict.outcome == "kept":
            continue
        secret = guard.kind(d.text) is not None
        secrets, contacts = secrets + secret, contacts + (not secret)
        reason = "update_secret" if secret else "update_contact"
        resolved.decisions[i] = dedup.Decision(d.index, "ADD", reason)
        if d.action == "ADD":  # merged a later fact of the run: that one is added again too
            merged_into = candidates.new_fact_id(run_id, d.index)
            for j, later in enumerate(resolved.decisions):
                if later.reason == "merged_into_same_run" and later.existing_id == merged_into:
                    resolved.decisions[j] = dedup.Decision(later.index, "ADD", reason)
                    resolved.same_run["merged"] -= 1
    return secrets, contacts


def _apply_fact_effects(deps: Deps, run: FormationRun, output: DecideFactsOutput, earlier: Earlier) -> None:
    extracted, embedded = earlier(run, Stage.EXTRACT_FACTS), earlier(run, Stage.EMBED_FACTS)
    fact_effects.apply(
        deps.store, run, output, now=deps.clock.now(), plan=extracted.plan.scope_plan(),
        new_facts=extracted.facts, vectors=embedded.fact_vectors(), sources=embedded.sources,
        message_ids=extracted.message_ids, guard=guard_for(deps.settings),
        metadata_keys=deps.store.ingest.get_agent_settings(run.agent_id).metadata_keys,
    )


def extract_reflections(run_id: str, deps: Deps) -> StageResult | None:
    """Hierarchical reflections, aware of the blobs, the buffers and this run's facts."""

    earlier = Earlier()

    def compute(run: FormationRun, usage: Usage) -> ExtractReflectionsOutput:
        store, settings = deps.store, deps.settings
        extracted = earlier(run, Stage.EXTRACT_FACTS)
        plan = extracted.plan.scope_plan()
        messages = _run_messages(store.ingest, run)
        if not messages:
            return ExtractReflectionsOutput(skipped="no messages in the claimed range")
        if not plan.reflection_scopes:
            return ExtractReflectionsOutput(skipped="every scope of this run is paused")
        blobs, buffers = {}, {}
        for scope, key in plan.reflection_keys.items():
            blob = store.blobs.get_blob(run.agent_id, key)
            blobs[scope] = blob.consolidated_content if blob else ""
            buffers[scope] = [r.content for r in store.reflections.unabsorbed_reflections(run.agent_id, key)]
        new_facts = [f.text for f in extracted.facts] + read(run, Stage.DECIDE_FACTS).formed_texts()
        agent = store.ingest.get_agent_settings(run.agent_id)
        request = build_reflections_request(
            messages, scopes=list(plan.reflection_scopes), blobs=blobs, unabsorbed=buffers,
            new_facts=list(dict.fromkeys(new_facts)),
            model=premium_model(deps, run, Stage.EXTRACT_REFLECTIONS, usage.spend, extracted.models.tier,
                                extracted.models.fast),
            word_limit=settings.reflection_word_limit, user_names=_names(messages),
            agent_name=_agent_name(agent, messages),
            guidance=guidance(agent, "extraction", plan.reflection_scopes),
            session="session" in plan.reflection_scopes,
        )
        aliases = alias_ids(messages)
        answer = usage.complete(deps.llm, request).parsed
        check_sources(answer, aliases)
        answer, screened = screen_reflections(answer, plan, guard_for(settings),
                                              session_user_ids(run, plan, messages))
        kept = filter_reflections(run.run_id, answer, plan, settings.reflection_word_limit, new_facts, aliases)
        return ExtractReflectionsOutput(reflections=kept.kept, counts=ReflectionCounts(**kept.counts()),
                                        screened=Screened(**screened.counts()))

    def apply(run: FormationRun, output: ExtractReflectionsOutput) -> None:
        plan = earlier(run, Stage.EXTRACT_FACTS).plan.scope_plan()
        now = deps.clock.now()
        items = output.reflections
        messages = deps.store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to) if items else []
        reflections = [_reflection(r, run, plan, messages, now) for r in items]
        deps.store.reflections.insert_reflections(reflections)

    return run_stage(deps, run_id, Stage.EXTRACT_REFLECTIONS, compute, apply)


def _reflection(r, run: FormationRun, plan, messages: list[StoredMessage], now) -> Reflection:
    """The stored reflection of a kept one, with its sources: the messages it cites and their
    senders; an output stored before citations rests on the run's human messages of its scope
    (its user's, or everyone's)."""
    if r.source_message_ids:
        ids, users = list(r.source_message_ids), provenance_sources.message_sources(r.source_message_ids, messages)
    else:
        ids, users = provenance_sources.range_sources(messages, plan.user_id if r.scope == "user" else None)
    return Reflection(
        reflection_id=r.reflection_id, agent_id=run.agent_id, scope=r.scope,
        user_id=plan.user_id if r.scope == "user" else None,
        session_id=run.session_id if r.scope == "session" else None,
        scope_key=r.scope_key, content=r.text, source_session_id=run.session_id,
        source_message_ids=ids, source_user_ids=users, source_run_id=run.run_id, formed_at=now,
    )
