"""Runs and everything they leave behind: events, model calls, plan versions, steps,
decisions. A run is a durable state machine; see ``engine`` for how it advances."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, FloatField, Func
from django.urls import reverse


class Status(models.TextChoices):
    QUEUED = "queued", "Queued"
    PLANNING = "planning", "Planning"
    AWAITING_PLAN_APPROVAL = "awaiting_plan_approval", "Awaiting plan approval"
    EXECUTING = "executing", "Executing"
    SYNTHESIZING = "synthesizing", "Synthesizing"
    ANALYZING = "analyzing", "Analyzing"
    REVIEWING = "reviewing", "Reviewing"
    REFLECTING = "reflecting", "Reflecting"
    AWAITING_TRIAGE = "awaiting_triage", "Awaiting triage"
    MERGING = "merging", "Merging"
    AWAITING_MERGE_REQUEST = "awaiting_merge_request", "Awaiting merge decision"
    AWAITING_ESCALATION = "awaiting_escalation", "Escalated to you"
    AWAITING_TOOL_APPROVAL = "awaiting_tool_approval", "Awaiting tool approval"
    AWAITING_ASK_PERSON = "awaiting_ask_person", "Awaiting your answer"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    BUDGET_EXCEEDED = "budget_exceeded", "Budget exceeded"


def gate_status_labels() -> dict[str, str]:
    """``awaiting_<gate>`` → words, for the gates the patterns name themselves."""
    from .patterns import PATTERNS

    return {f"awaiting_{gate}": label for p in PATTERNS.values()
            for gate, label in p.gate_labels.items()}


# Every status of a run waiting at a gate, in the order of ``status_groups()``' waiting group
# (the inbox's ``waiting_statuses()``; a test keeps them equal): the condition of the partial
# index the inbox reads (``run_waiting``). SQLite uses a partial index only for a query whose
# IN list is this very list, in this order.
WAITING_STATUSES = ["awaiting_plan_approval", "awaiting_triage", "awaiting_merge_request",
                    "awaiting_escalation", "awaiting_tool_approval", "awaiting_ask_person",
                    "awaiting_vote_pick"]

RUNNABLE = (Status.QUEUED, Status.PLANNING, Status.EXECUTING, Status.SYNTHESIZING,
            Status.ANALYZING, Status.REVIEWING, Status.REFLECTING, Status.MERGING)
TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED, Status.BUDGET_EXCEEDED)


def gate_status(gate: str) -> str:
    return f"awaiting_{gate}"


# The statuses as people think of them, for the history's filter: each group's key (the filter
# value), its words, and the detailed statuses inside it (the waiting ones also include the gates
# the patterns name themselves: ``status_groups``).
STATUS_GROUPS = (
    ("all_waiting", "Waiting for me", ()),
    ("all_running", "Running", RUNNABLE),
    ("all_finished", "Finished", (Status.COMPLETED, Status.CANCELLED)),
    ("all_failed", "Failed", (Status.FAILED, Status.BUDGET_EXCEEDED)),
)


def status_groups() -> list[tuple[str, str, list[str]]]:
    """(key, words, statuses) of each group, the waiting group with every gate's status."""
    waiting = [s for s in Status.values if s.startswith("awaiting_")]
    waiting += [s for s in gate_status_labels() if s not in waiting]
    return [(key, label, waiting if key == "all_waiting" else [str(s) for s in statuses])
            for key, label, statuses in STATUS_GROUPS]


class RunDuration(Func):
    """Seconds from a run's start to its end, or ``missing`` while it runs, in SQL both
    databases can index (SQLite's ``julianday`` and Postgres's ``EXTRACT(EPOCH …)`` are
    deterministic). ``missing`` is written into the SQL, not passed as a parameter: a query
    matches an expression index only when its text is the index's own."""

    output_field = FloatField()

    def __init__(self, missing: float):
        super().__init__(F("finished_at"), F("created_at"))
        self.missing = float(missing)

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, arg_joiner=") - julianday(", template=(
            f"COALESCE(((julianday(%(expressions)s)) * 86400.0), {self.missing!r})"), **extra)

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, arg_joiner=" - ", template=(
            "COALESCE(EXTRACT(EPOCH FROM (%(expressions)s))::double precision, "
            f"{self.missing!r})"), **extra)

    def deconstruct(self):
        return "agents_app.models.RunDuration", (self.missing,), {}


def run_tokens():
    return F("prompt_tokens") + F("completion_tokens")


def run_duration(longest_first: bool) -> RunDuration:
    """The duration the history sorts by: a run still going has none yet and comes after the
    others in either direction (a number below or above every duration, so the key is never
    NULL and one index serves each direction on both databases)."""
    return RunDuration(-1.0 if longest_first else 1e12)


class Run(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    # A team's run is seen by its members and decided by its approvers (issue 35).
    team = models.ForeignKey("agents_app.Team", null=True, blank=True, on_delete=models.PROTECT,
                             related_name="runs")
    pattern = models.CharField(max_length=40, db_index=True)
    task = models.TextField()
    status = models.CharField(max_length=40, choices=Status.choices, default=Status.QUEUED)
    # The stage to run next (or the one waiting behind the gate) and the gate's kind.
    stage = models.CharField(max_length=80, blank=True)
    gate = models.CharField(max_length=40, blank=True)
    state = models.JSONField(default=dict)
    options = models.JSONField(default=dict)
    models_used = models.JSONField(default=dict, help_text="role → model")
    offline = models.BooleanField(default=False, help_text="Some role used the offline model")

    max_cost_usd = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    calls = models.PositiveIntegerField(default=0)

    # Claims: every transition bumps stage_seq; a worker holds a lease while it runs a stage.
    stage_seq = models.PositiveIntegerField(default=0)
    stage_attempt = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    active_seconds = models.FloatField(default=0.0)
    last_event_seq = models.PositiveIntegerField(default=0)

    answer = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Forks (issue 33): a run started from another run's checkpoint. Its stages before
    # ``fork_seq`` are the parent's (read through it, never copied); ``root`` is the first run
    # of the lineage (None for a root itself), so a tree is one query; ``fork`` says what
    # changed: {"kind", "by", "stage", "edits", "models", "gates", "note"}.
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="forks")
    fork_seq = models.PositiveIntegerField(null=True, blank=True)
    root = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    fork = models.JSONField(default=dict, blank=True)
    # A run of an experiment (issue 34): its cell (pattern, options, models), its dataset
    # item and its repetition. One run per (cell, item, repetition): the constraint below
    # makes a launch that is redelivered or raced add nothing twice.
    experiment = models.ForeignKey("Experiment", null=True, blank=True,
                                   on_delete=models.CASCADE, related_name="runs")
    cell = models.ForeignKey("Cell", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="runs")
    item = models.ForeignKey("DatasetItem", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="runs")
    repetition = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["cell", "item", "repetition"],
                                    condition=models.Q(cell__isnull=False),
                                    name="run_one_per_experiment_slot"),
        ]
        indexes = [
            models.Index(fields=["owner", "-id"], name="run_owner_recent"),
            models.Index(fields=["owner", "status", "-id"], name="run_owner_status"),
            models.Index(fields=["owner", "pattern", "-id"], name="run_owner_pattern"),
            models.Index(fields=["status", "lease_expires_at"], name="run_sweep"),
            # The history's sorts and date range (agents_app/history.py).
            models.Index(fields=["owner", "cost_usd", "id"], name="run_owner_cost"),
            models.Index(F("owner"), run_tokens(), F("id"), name="run_owner_tokens"),
            models.Index(F("owner"), run_duration(True), F("id"), name="run_owner_longest"),
            models.Index(F("owner"), run_duration(False), F("id"), name="run_owner_shortest"),
            # The date range, and the usage page's sums read from the index alone (usage.py).
            models.Index(fields=["owner", "created_at", "pattern", "cost_usd", "prompt_tokens",
                                 "completion_tokens"], name="run_owner_usage"),
            # The inbox (issue 35): the runs waiting at a gate — about 1 % of a history — with
            # what decides who sees them, so its count and its team filter read the index alone.
            models.Index(fields=["team", "owner", "updated_at", "id"],
                         condition=models.Q(status__in=WAITING_STATUSES), name="run_waiting"),
            # A team's runs in a status: SQLite does not use the partial index for a list
            # given as parameters, and otherwise reads every run of the team to find its few
            # waiting ones (the team's index); PostgreSQL uses it for a team filter.
            models.Index(fields=["team", "status"], name="run_team_status"),
            # A team's runs by each sort key (issue 37): a member's sorted history reads their
            # personal runs (the owner's indexes above) and their teams' runs (these) each in
            # order and merges the pages (history._sorted_page). Team runs only.
            models.Index(fields=["team", "cost_usd", "id"], name="run_team_cost",
                         condition=models.Q(team__isnull=False)),
            models.Index(F("team"), run_tokens(), F("id"), name="run_team_tokens",
                         condition=models.Q(team__isnull=False)),
            models.Index(F("team"), run_duration(True), F("id"), name="run_team_longest",
                         condition=models.Q(team__isnull=False)),
            models.Index(F("team"), run_duration(False), F("id"), name="run_team_shortest",
                         condition=models.Q(team__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.pattern}, {self.status})"

    def get_absolute_url(self) -> str:
        from .patterns import PATTERNS  # patterns register when apps are ready

        pattern = PATTERNS.get(self.pattern)
        return reverse(pattern.page if pattern else "run_detail", args=[self.pk])

    def get_status_display(self) -> str:
        """The status in words; a gate the app does not name is named by its pattern."""
        if self.status in Status.values:
            return str(Status(self.status).label)
        return gate_status_labels().get(self.status, self.status.replace("_", " ").capitalize())

    @property
    def model_names(self) -> list[str]:
        """The distinct models the run's roles use, for compact lists."""
        return sorted(set((self.models_used or {}).values()))

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def error_detail(self) -> str:
        """The error as a page shows it after the status in words ("Budget exceeded: …"):
        without those words again when the message starts with them (the budget's and the
        time limit's messages do, for the command line, which prints them alone)."""
        label = f"{self.get_status_display()}:"
        if self.error[: len(label)].lower() == label.lower():
            return self.error[len(label):].lstrip()
        return self.error

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def is_waiting(self) -> bool:
        return self.status.startswith("awaiting_")

    @property
    def duration_seconds(self) -> float | None:
        if self.finished_at:
            return (self.finished_at - self.created_at).total_seconds()
        return None


class Checkpoint(models.Model):
    """The state a run's stage ``seq`` started from (issue 33), written with the commit that
    led to it: where a fork starts, and what a replay or a comparison reads. The state is
    JSON compressed with zlib (``agents_app/forking/checkpoints.py``). ``gate`` is set when the
    run waited there for a person; ``decision`` on the checkpoint a decision led to (what was
    decided, by whom, and a hash of what was decided on). ``event_seq`` is the run's last
    event at that point: a fork's timeline shows the parent's events up to it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    seq = models.PositiveIntegerField()
    stage = models.CharField(max_length=80, blank=True)
    gate = models.CharField(max_length=40, blank=True)
    state = models.BinaryField()
    event_seq = models.PositiveIntegerField(default=0)
    decision = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="checkpoint_unique")]

    def __str__(self) -> str:
        return f"Checkpoint {self.seq} of run {self.run_id} ({self.stage or self.gate or 'end'})"


class Event(models.Model):
    """An ordered record of something that happened to a run; written before broadcast."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=40)
    message = models.TextField()
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="event_seq_unique")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind}"


class ModelCall(models.Model):
    """One logical model call (its retries included). Unique per run, stage and key, which
    is what lets a stage executed again replay its calls instead of repeating them."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="model_calls")
    stage = models.CharField(max_length=80)
    key = models.CharField(max_length=120)
    role = models.CharField(max_length=40)
    model = models.CharField(max_length=200)
    messages = models.JSONField(default=list)
    response = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=1)
    error = models.TextField(blank=True)
    retryable = models.BooleanField(default=False)
    # A call not made again but served from another run's journal (a fork's replay, a retry
    # reusing what succeeded): no provider call, no cost to this run.
    replayed_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "stage", "key"], name="model_call_unique")
        ]
        # The usage page's sums by model, read from the index alone (usage.py): a call's row
        # holds its prompt and reply.
        indexes = [models.Index(fields=["run", "model", "prompt_tokens", "completion_tokens",
                                        "cost_usd"], name="call_usage"),
                   # A model's latest successful first attempts, for its stall timeout
                   # (llm/gateway.py, issue 37): read once per model per process every 5 min.
                   models.Index(fields=["model", "-id"], condition=models.Q(
                       error="", attempts=1, replayed_from__isnull=True),
                       name="call_model_latency")]

    def __str__(self) -> str:
        return f"{self.role} {self.model} ({self.stage})"


class PlanVersion(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="plan_versions")
    version = models.PositiveIntegerField()
    steps = models.JSONField(default=list)
    goal = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    author = models.CharField(max_length=150, help_text='"model" or the editor\'s username')
    reason = models.CharField(max_length=200, blank=True)
    frozen = models.PositiveIntegerField(default=0, help_text="Leading steps already executed")
    details = models.JSONField(default=dict, blank=True,
                               help_text="A plan document's other fields (files, risks, ...)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "version"]
        constraints = [
            models.UniqueConstraint(fields=["run", "version"], name="plan_version_unique")
        ]

    def __str__(self) -> str:
        return f"Plan v{self.version} of run {self.run_id}"

    @property
    def by_model(self) -> bool:
        return self.author == "model"


class StepResult(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="step_results")
    plan_version = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    description = models.TextField()
    status = models.CharField(max_length=10, choices=[("done", "Done"), ("failed", "Failed")])
    output = models.TextField(blank=True)
    problem = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "plan_version", "index"], name="step_unique")
        ]

    def __str__(self) -> str:
        return f"Step {self.index + 1} (v{self.plan_version}) of run {self.run_id}"


class Approval(models.Model):
    """A decision at a gate: who decided what, on which version."""

    class Action(models.TextChoices):
        APPROVE = "approve", "Approved"
        REJECT = "reject", "Rejected"
        AUTO_APPROVE = "auto_approve", "Auto-approved"
        DISCARD = "discard", "Discarded"
        ANOTHER_ROUND = "another_round", "Another round"
        REPLAN = "replan", "New plan"
        STOP = "stop", "Stopped"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    gate = models.CharField(max_length=40)
    action = models.CharField(max_length=20, choices=Action.choices)
    plan_version = models.PositiveIntegerField(null=True, blank=True)
    edited = models.BooleanField(default=False)
    feedback = models.TextField(blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]

    def __str__(self) -> str:
        return f"{self.get_action_display()} {self.gate} (run {self.run_id})"


class AgentReport(models.Model):
    """What one agent stage of a plan-execute-review run did: its tool calls (the trace), its
    structured answer, and for an execute round the commit, the diff and the test output."""

    class Kind(models.TextChoices):
        PLAN = "plan", "Plan"
        EXECUTE = "execute", "Execute"
        REVIEW = "review", "Review"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="agent_reports")
    stage = models.CharField(max_length=80)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    plan_version = models.PositiveIntegerField()
    round = models.PositiveIntegerField(default=0)
    trace = models.JSONField(default=list, blank=True)
    stopped = models.CharField(max_length=20, blank=True, help_text="done | max_turns | repeating")
    answer = models.JSONField(default=dict, blank=True)
    commit_sha = models.CharField(max_length=64, blank=True)
    base_sha = models.CharField(max_length=64, blank=True)
    diff = models.TextField(blank=True)
    diff_truncated = models.BooleanField(default=False)
    files = models.JSONField(default=list, blank=True)
    test_ran = models.BooleanField(default=False)
    test_output = models.TextField(blank=True)
    test_exit = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "stage"], name="agent_report_unique")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.stage} of run {self.run_id}"

    @property
    def tests_passed(self) -> bool | None:
        return None if not self.test_ran else self.test_exit == 0


class MergeRequest(models.Model):
    """The change a plan-execute-review run proposes: its branch, and what became of it."""

    class State(models.TextChoices):
        DRAFT = "draft", "In progress"
        OPEN = "open", "Open"
        CONFLICT = "conflict", "Conflict"
        MERGED = "merged", "Merged"
        DISCARDED = "discarded", "Discarded"
        CLOSED = "closed", "Closed unmerged"

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="merge_request")
    repo = models.CharField(max_length=1000)
    base_branch = models.CharField(max_length=250)
    branch = models.CharField(max_length=250)
    base_sha = models.CharField(max_length=64, blank=True)
    head_sha = models.CharField(max_length=64, blank=True)
    merged_sha = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=12, choices=State.choices, default=State.DRAFT)
    message = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.branch} → {self.base_branch} ({self.status})"


class RunItem(models.Model):
    """A generic record of a pattern's work (see ``patterns.base.Item``), in the order written."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="items")
    kind = models.CharField(max_length=40)
    key = models.CharField(max_length=120)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "kind", "key"],
                                               name="run_item_unique")]

    def __str__(self) -> str:
        return f"{self.kind} {self.key} of run {self.run_id}"


class Dataset(models.Model):
    """A list of tasks to run experiments on (issue 34): uploaded as JSONL or CSV, or picked
    from the history. Owner-scoped like runs."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="datasets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=20, default="upload")  # upload | history
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["owner", "-id"], name="dataset_owner_recent")]

    def __str__(self) -> str:
        return f"Dataset {self.pk} ({self.name})"

    def get_absolute_url(self) -> str:
        return reverse("dataset_detail", args=[self.pk])


class DatasetItem(models.Model):
    """One task of a dataset: its text, and what a run of it is scored against — a reference
    answer, expected findings (code review: file, line range, category) or checks (evaluator
    specifications of its own, added to the experiment's)."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    key = models.CharField(max_length=100)  # the row's "id", else its line number
    task = models.TextField()
    reference = models.TextField(blank=True)
    expected_findings = models.JSONField(default=list, blank=True)
    checks = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "key"], name="dataset_item_key"),
        ]

    def __str__(self) -> str:
        return f"Item {self.key} of dataset {self.dataset_id}"


class ExperimentStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    CANCELLED = "cancelled", "Cancelled"
    BUDGET_STOPPED = "budget_stopped", "Stopped by its budget"


class Experiment(models.Model):
    """A grid (issue 34): patterns × role-model assignments × the dataset's tasks ×
    ``repetitions``, scored by ``spec["evaluators"]``, with a gate policy per gate kind and a
    hard budget cap. Its runs are ordinary runs with ``experiment``, ``cell``, ``item`` and
    ``repetition`` set; they are started a few at a time (``spec["concurrency"]``) as earlier
    ones end, so one grid does not take every worker from everyone else."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="experiments")
    team = models.ForeignKey("agents_app.Team", null=True, blank=True, on_delete=models.PROTECT,
                             related_name="experiments")
    name = models.CharField(max_length=200)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="experiments")
    spec = models.JSONField(default=dict)
    repetitions = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=20, choices=ExperimentStatus.choices,
                              default=ExperimentStatus.RUNNING)
    budget_usd = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    forecast_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    planned_runs = models.PositiveIntegerField(default=0)
    baseline = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    note = models.TextField(blank=True)  # why it stopped, in words
    # The pairwise judge's verdicts between two cells, once the grid has ended:
    # {"state": "judging" | "done", "verdicts": [...]} (``experiments/pairwise.py``).
    pairwise = models.JSONField(default=dict, blank=True)
    # The launch form's one-time token: a form sent twice (a double click, two tabs racing)
    # makes one experiment.
    nonce = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["owner", "-id"], name="experiment_owner_recent"),
                   models.Index(fields=["status"], name="experiment_status")]
        constraints = [models.UniqueConstraint(fields=["owner", "nonce"],
                                               condition=~models.Q(nonce=""),
                                               name="experiment_launched_once")]

    def __str__(self) -> str:
        return f"Experiment {self.pk} ({self.name})"

    def get_absolute_url(self) -> str:
        return reverse("experiment_detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status != ExperimentStatus.RUNNING


class Cell(models.Model):
    """One point of an experiment's grid: a pattern with its options and a model per role."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="cells")
    index = models.PositiveIntegerField()
    pattern = models.CharField(max_length=40)
    options = models.JSONField(default=dict)
    models_used = models.JSONField(default=dict)  # role → model
    label = models.CharField(max_length=300)

    class Meta:
        ordering = ["experiment", "index"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "index"], name="cell_index"),
        ]

    def __str__(self) -> str:
        return f"Cell {self.index} of experiment {self.experiment_id} ({self.label})"


class Evaluation(models.Model):
    """One evaluator's score of one run of an experiment. ``value`` is None when the
    evaluator could not score (a judge that failed, a missing reference): counted and shown,
    never averaged in as a zero."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="evaluations")
    evaluator = models.PositiveIntegerField()  # its index in the experiment's evaluators
    kind = models.CharField(max_length=20)
    value = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(default=False)
    detail = models.TextField(blank=True)
    error = models.TextField(blank=True)
    calls = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "evaluator"]
        constraints = [
            models.UniqueConstraint(fields=["run", "evaluator"], name="evaluation_once"),
        ]

    def __str__(self) -> str:
        return f"Evaluation {self.evaluator} ({self.kind}) of run {self.run_id}"


# Teams, shared gates and notifications (issue 35) live in their own packages; imported here
# so that Django finds their models in this app.
from .gates.models import (  # noqa: E402,F401
    Channel,
    DefaultAction,
    GateAudit,
    GateOpening,
    GateRule,
    GateVote,
)
from .notify.models import DecisionLink, Endpoint, Notification, Preference  # noqa: E402,F401
from .teams.models import Membership, Role, Team  # noqa: E402,F401
