"""One task-run: GEAK's generate → judge → reflect / optimize loop over immutable attempts.

    first attempt ──► judge ──► passed? ── yes ──► optimizer (history in ascending order) ──► judge ...
                        │
                        no ──► reflector (code + real error) ──► generator fix ──► judge ...
                                   after max_debug_attempts failed fixes in one line:
                                   the debugging trap: a fresh approach (or the optimizer, once
                                   a correct kernel exists)

When candidates are not timed (the CPU interpreter, --no-perf) the optimizer is never asked: a
run stops at its first verified kernel, since no answer's gain could be measured. A given
starting kernel (optimize) that fails ends the run before any call unless fix_start is set. A
verdict the judge could not decide (stage judge_error: a broken reference, a problem too large for
this machine, a lost worker) ends the run too: no answer of the model can change it, so neither the
reflector nor the fixer is asked.

Each iteration is one candidate. The memory is re-read from the store at the start, so a killed
run resumes where it stopped; every prompt is a pure function of the stored attempts, so the
resumed run's calls are the same requests and the response cache answers them for free. A call
that the service failed (calls.py) stores no attempt and stops the task-run unended, so the
resumed run asks it again: an outage never costs an iteration.
"""

from __future__ import annotations

import time
import traceback
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from ..judge.common.verdict import judge_error_verdict
from ..store import RunStore
from ..tasks import Task
from . import generator, optimizer, reflector
from .answers import CodeAnswer
from .archive import DEFAULT_MIGRATE_EVERY
from .brief import TaskBrief
from .budget import Budget
from .calls import CallParams, ModelUnavailable, Outage, Reply
from .judging import JudgeTurns, RecordedJudge, submit_recorded
from .memory import LLM_ERROR, NO_CODE, Attempt, Mode, TaskMemory, undecided
from .prompts import PromptLibrary
from .protocols import LLM, Judge

if TYPE_CHECKING:
    from .retrieval import Example

# why a task-run stopped, unended, when the service failed a call (the session's outage)
MODEL_UNAVAILABLE = "the model is unavailable"
# why a task-run returned, unended, under --search evolve: its epoch is done (session.py)
EPOCH_DONE = "epoch done"
# the roles of the LLM calls (a fix's reflector call is "reflect"): part of each call's sample index
ROLE_NUMBER = {"generate": 1, "fresh": 2, "reflect": 3, "fix": 4, "optimize": 5, "crossover": 6}


@dataclass(frozen=True)
class AgentSettings:
    iterations: int = 10           # candidates per run (a given starting kernel is not counted)
    runs: int = 1
    max_debug_attempts: int = 5    # failed fixes in one line before the debugging trap fires
    temperature: float = 1.0
    seed: int = 0                  # base seed; run r samples with seed + r
    max_tokens: int | None = None  # per LLM call (None: the LLM layer's setting)
    history: int = optimizer.DEFAULT_HISTORY
    one_shot: bool = True
    knowledge: bool = True
    reflection: bool = True
    optimizer: bool = True
    tune: bool = False             # the LLM-free tuning pass on each run's best kernel
    tune_variants: int = 12
    fix_start: bool = False        # optimize: a failing starting kernel is fixed (else the run stops at once)
    search: str = "independent"    # independent (GEAK's runs) | evolve (one archive per task: agent/archive.py)
    migrate_every: int = DEFAULT_MIGRATE_EVERY  # evolve: iterations per epoch; islands exchange their best at each boundary

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.runs < 1:
            raise ValueError("--iterations and --runs must be at least 1")
        if self.search not in ("independent", "evolve"):
            raise ValueError(f"--search must be independent or evolve, not {self.search!r}")
        if self.migrate_every < 1:
            raise ValueError("migrate_every must be at least 1")
        if self.max_debug_attempts < 1:
            raise ValueError("max_debug_attempts must be at least 1")


@dataclass(frozen=True)
class Plan:
    mode: Mode                     # generate | fresh | fix | optimize
    line: int
    parent: int | None


@dataclass
class RunContext:
    """Everything a task-run needs; shared by all task-runs of a session."""

    llm: LLM
    judge: Judge
    store: RunStore
    prompts: PromptLibrary
    settings: AgentSettings
    budget: Budget
    backend_name: str = "NVIDIA"
    knowledge: str = ""
    retrieve: Callable[[str, Task], Example | None] | None = None   # (query, task) -> the 1-shot example
    on_event: Callable[[str, dict], None] = lambda kind, data: None
    stopping: Callable[[], bool] = lambda: False
    # the session's judging turns: a candidate judged again after its judging killed the run is
    # judged alone (agent/judging.py)
    turns: JudgeTurns = field(default_factory=JudgeTurns)
    # why candidates are not timed ("": they are): no gain can be measured, so a run stops at
    # its first verified kernel instead of paying for optimizer answers
    untimed: str = ""
    # the session's first service failure: no task-run starts a call after it
    outage: Outage = field(default_factory=Outage)


def plan_next(memory: TaskMemory, settings: AgentSettings, timed: bool = True) -> Plan | None:
    """What the next attempt is, from the attempts so far; None: the run is done. Untimed
    (`timed` False), a correct kernel ends the run: the optimizer's gain could not be measured."""
    last = memory.last
    if last is None:
        return Plan(Mode.GENERATE, 0, None)
    if undecided(last):
        return None  # the machine's or the judge's limit, not the candidate's: nothing to fix
    if last.mode == Mode.GIVEN and not last.passed and not settings.fix_start:
        return None  # the user's kernel is broken: fixing it is paid for only when asked
    best = memory.best()
    if last.passed:
        if not settings.optimizer or not timed:
            return None  # correct, and nothing more to do without the optimizer or timing
        assert best is not None  # the last attempt passed: a correct kernel exists
        return Plan(Mode.OPTIMIZE, last.line + 1, best.index)
    if memory.failed_fixes() >= settings.max_debug_attempts:
        # the debugging trap: abandon this line
        if best is not None and settings.optimizer and timed:
            return Plan(Mode.OPTIMIZE, last.line + 1, best.index)
        return Plan(Mode.FRESH, last.line + 1, None)
    with_code = [a for a in memory.line_attempts() if a.code is not None]
    if not with_code:  # nothing in this line to fix yet: write it again (a crossover: the archive draws again)
        mode = Mode.OPTIMIZE if last.mode == Mode.CROSSOVER else last.mode
        return Plan(mode if mode in (Mode.GENERATE, Mode.FRESH, Mode.OPTIMIZE) else Mode.FRESH, last.line,
                    last.parent if mode == Mode.OPTIMIZE else None)
    return Plan(Mode.FIX, last.line, with_code[-1].index)


class TaskRun:
    def __init__(self, task: Task, brief: TaskBrief, run: int, ctx: RunContext,
                 start_code: str | None = None) -> None:
        self.task, self.brief, self.run, self.ctx = task, brief, run, ctx
        self.start_code = start_code
        self.tags = {"task": task.name, "run": str(run)}

    # -- the loop -----------------------------------------------------------------------------
    def execute(self, until: int | None = None) -> str:
        """Run to the end; returns why it ended (also stored). `until` (--search evolve's epochs):
        stop, unended, once the run has that many iterations and fewer than --iterations."""
        store, settings = self.ctx.store, self.ctx.settings
        self.ctx.budget.start_task(self.task.name)
        memory = self.judge_given()
        reason = "all iterations done"
        while self._llm_attempts(memory) < settings.iterations:
            if until is not None and self._llm_attempts(memory) >= until:
                return EPOCH_DONE  # not stored: the next epoch continues this task-run
            if self.ctx.stopping():
                return "interrupted"  # not stored: a resumed run continues this task-run
            if self.ctx.outage.reason is not None:
                return MODEL_UNAVAILABLE  # not stored either: resumed once the model answers
            plan = plan_next(memory, settings, timed=not self.ctx.untimed)
            if plan is None:
                reason = self._done_reason(memory)
                break
            spent = self.ctx.budget.exhausted(self.task.name)
            if spent:
                reason = spent
                break
            try:
                attempt = self._attempt(memory, plan)
            except ModelUnavailable as exc:
                self.ctx.outage.report(str(exc))
                self.ctx.on_event("model_unavailable", {"task": self.task.name, "run": self.run,
                                                        "reason": str(exc)})
                return MODEL_UNAVAILABLE
            memory = self._record(memory, attempt)
        left = self.ctx.budget.seconds_left(self.task.name)
        if settings.tune and memory.best() is not None and not any(a.mode == Mode.TUNE for a in memory.attempts) \
                and (left is None or left > 0):
            memory = self._tune(memory, left)
        best = memory.best()
        store.end_task_run(self.task.name, self.run, reason, best.index if best else None)
        self.ctx.on_event("ended", {"task": self.task.name, "run": self.run, "reason": reason})
        return reason

    def judge_given(self) -> TaskMemory:
        """The task-run's memory, with the user's starting kernel (optimize) judged first when it
        is not yet: before the session asks the model anything (its ping included)."""
        memory = TaskMemory.of(self.ctx.store.attempts(self.task.name, self.run))
        if self.start_code is not None and not len(memory):
            memory = self._record(memory, self._judged(Attempt(
                self.task.name, self.run, 0, Mode.GIVEN, 0, None, self.start_code, strategy="the user's kernel",
                created=time.time())))
        return memory

    def needs_model(self) -> bool:
        """Whether the task-run's next step is a call to the model (a failing starting kernel
        without fix_start, or a verified one that nothing can time, needs none)."""
        memory = TaskMemory.of(self.ctx.store.attempts(self.task.name, self.run))
        return (self._llm_attempts(memory) < self.ctx.settings.iterations
                and plan_next(memory, self.ctx.settings, timed=not self.ctx.untimed) is not None)

    def _tune(self, memory: TaskMemory, seconds_left: float | None) -> TaskMemory:
        """The tuning pass (no LLM) on the best verified kernel; its variant, when one beats it,
        is an attempt of its own. Resumable: the task-run ends only after it."""
        from .tuning import TuneBudget, tune

        self.ctx.on_event("tuning", {"task": self.task.name, "run": self.run})
        budget = TuneBudget(max_variants=self.ctx.settings.tune_variants)
        if seconds_left is not None:
            budget = replace(budget, max_seconds=min(budget.max_seconds, seconds_left))
        judge = RecordedJudge(self.ctx.judge, self.ctx.store, self.ctx.turns, self.run, len(memory))
        result = tune(self.task, memory.best(), judge, budget, next_index=len(memory), run=self.run)
        self.ctx.on_event("tuned", {"task": self.task.name, "run": self.run, "result": result})
        return self._record(memory, result.attempt) if result.attempt is not None else memory

    def _done_reason(self, memory: TaskMemory) -> str:
        """Why plan_next ended the run (stored, and shown in results and the summary)."""
        last = memory.last
        assert last is not None  # plan_next ends a run only after an attempt
        if undecided(last):
            return f"the judge could not decide ({last.kind}): no further model call"
        if last.mode == Mode.GIVEN and not last.passed:
            return f"your kernel failed ({last.kind}): nothing was asked of the model (--fix-start has it fixed)"
        if not self.ctx.settings.optimizer:
            return "correct (optimizer off)"
        return f"verified; speed not measured ({self.ctx.untimed}): stopped at the first verified kernel"

    @staticmethod
    def _llm_attempts(memory: TaskMemory) -> int:
        return sum(1 for a in memory.attempts if a.mode.by_llm)

    def _record(self, memory: TaskMemory, attempt: Attempt) -> TaskMemory:
        self.ctx.store.add_attempt(attempt)
        self.ctx.on_event("attempt", {"attempt": attempt})
        return memory.add(attempt)

    # -- one attempt --------------------------------------------------------------------------
    def _base(self, query: str) -> dict[str, Any]:
        example = None
        if self.ctx.settings.one_shot and self.ctx.retrieve is not None and query:
            example = self.ctx.retrieve(query, self.task)
        return {"task": self.brief.as_context(), "backend_name": self.ctx.backend_name,
                "knowledge": self.ctx.knowledge if self.ctx.settings.knowledge else "", "example": example}

    def _params(self, index: int, role: str) -> CallParams:
        s = self.ctx.settings
        # distinct per run, attempt and role: two identical prompts (the model repeating a broken
        # kernel) must not replay one cached answer forever, and a resumed run asks the same
        return CallParams(temperature=s.temperature, max_tokens=s.max_tokens, seed=s.seed + self.run,
                          sample_index=self.run * 1_000_000 + index * 10 + ROLE_NUMBER[role])

    def _on_call(self, index: int) -> Callable[[Reply], None]:
        def record(reply: Reply) -> None:
            self.ctx.store.add_call(self.task.name, self.run, index, reply)
            self.ctx.on_event("call", {"task": self.task.name, "run": self.run, "reply": reply})
        return record

    def _asking(self, role: str) -> None:
        """A call is about to be sent: the progress line says what the run waits for."""
        self.ctx.on_event("asking", {"task": self.task.name, "run": self.run, "role": role})

    @staticmethod
    def _answered(reply: Reply) -> Reply:
        """The reply, unless the service failed it: then the attempt is not the model's."""
        if reply.unavailable:
            raise ModelUnavailable(reply.error)
        return reply

    def _attempt(self, memory: TaskMemory, plan: Plan) -> Attempt:
        index = len(memory)
        entry = self.brief.entry_names[0]
        attempts = memory.attempts
        parent = attempts[plan.parent] if plan.parent is not None else None
        reflection, origin = "", ""
        tokens, cost = 0, 0.0
        on_call = self._on_call(index)
        if plan.mode in (Mode.GENERATE, Mode.FRESH):
            query = self.start_code or self.brief.reference_code or self.brief.instruction
            if attempts and attempts[-1].code:
                query = attempts[-1].code
            base = self._base(query)
            messages = generator.first_messages(self.ctx.prompts, base, self.start_code,
                                                memory.abandoned_strategies() if plan.mode == Mode.FRESH else ())
        elif plan.mode == Mode.FIX:
            assert parent is not None  # a fix names the attempt it fixes
            base = self._base(parent.code or "")
            if self.ctx.settings.reflection:
                self._asking("reflect")
                reply, reflection = reflector.reflect(self.ctx.llm, self.ctx.prompts, base, parent,
                                                      self._params(index, "reflect"), self.tags, on_call,
                                                      attempts)
                tokens, cost = self._answered(reply).tokens, reply.cost_usd
            earlier = [f"{a.kind}: {a.reason[:120]}" for a in memory.line_attempts()[:-1] if not a.passed][-3:]
            messages = generator.fix_messages(self.ctx.prompts, base, parent, reflection, earlier, attempts)
        elif self.ctx.settings.search == "evolve":  # optimize from the task's archive
            plan, origin, messages = self._evolve_plan(memory, plan)
        else:  # optimize
            assert parent is not None  # an optimization names the kernel it starts from
            base = self._base(parent.code or "")
            messages = optimizer.messages(self.ctx.prompts, base, memory.correct(), attempts,
                                          self.ctx.settings.history)
        role = plan.mode.value  # the call's role: a plain string in the calls table
        self._asking(role)
        reply, answer = generator.write(self.ctx.llm, role, messages, entry, self._params(index, role),
                                        self.tags, on_call)
        self._answered(reply)
        attempt = Attempt(self.task.name, self.run, index, plan.mode, plan.line, plan.parent, answer.code,
                          strategy=answer.strategy, reflection=reflection, answer=reply.text,
                          tokens=tokens + reply.tokens, cost_usd=cost + reply.cost_usd, created=time.time(),
                          origin=origin)
        if answer.code is None:
            return self._unjudged(attempt, reply, answer)
        return self._judged(attempt)

    def _evolve_plan(self, memory: TaskMemory, plan: Plan) -> tuple[Plan, str, list[dict]]:
        """--search evolve: parent, inspirations and mode drawn from the task's archive as this
        island sees it in its current epoch (agent/archive.py). The archive is rebuilt from the
        store and the draw is seeded per attempt, so a resumed run asks the same."""
        from .archive import Archive, choose, epoch_of_next, rng_for

        every = self.ctx.settings.migrate_every
        view = Archive.of(self.ctx.store.attempts(self.task.name), every).view(
            self.run, epoch_of_next(memory.attempts, every))
        choice = choose(view, rng_for(self.ctx.settings.seed, self.task.name, self.run, len(memory)))
        assert choice is not None  # an optimization is planned only once this run has a verified kernel
        own = choice.parent.index if choice.parent.run == self.run else None
        messages = optimizer.evolve_messages(self.ctx.prompts, self._base(choice.parent.code), choice,
                                             memory.attempts)
        return replace(plan, mode=choice.mode, parent=own), choice.origin(), messages

    @staticmethod
    def _unjudged(attempt: Attempt, reply: Reply, answer: CodeAnswer) -> Attempt:
        kind = LLM_ERROR if not reply.ok else NO_CODE
        why = f"the LLM call failed: {reply.error}" if not reply.ok else f"the answer held no usable code: {answer.failure}"
        return replace(attempt, kind=kind, reason=why[:500], feedback=why[:2000])

    def _judged(self, attempt: Attempt) -> Attempt:
        assert attempt.code is not None  # only an attempt with code is judged
        candidate_id = f"{self.task.name}-r{self.run}-a{attempt.index}-{uuid.uuid4().hex[:8]}"
        self.ctx.on_event("judging", {"task": self.task.name, "run": self.run, "index": attempt.index})
        try:
            # recorded as sent before it is judged: a resumed run does not judge for ever a
            # candidate whose judging kills this process (agent/judging.py)
            verdict = submit_recorded(self.ctx.judge, self.ctx.store, self.ctx.turns, self.task, self.run,
                                      attempt.index, attempt.code, candidate_id).result()
        except Exception as exc:  # noqa: BLE001 - the pool was closed, or a judge bug: not the candidate's verdict
            if self.ctx.stopping():
                raise
            why = f"the judge could not decide: {exc!r}"
            verdict = judge_error_verdict(self.task.name, candidate_id, why, candidate_id=candidate_id)
            return attempt.with_verdict(verdict, why + "\n" + traceback.format_exc(limit=3)[-1500:])
        feedback = verdict.feedback() if hasattr(verdict, "feedback") else (verdict.reason or "")
        return attempt.with_verdict(verdict, feedback)
