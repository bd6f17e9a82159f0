"""The memories page: the suggestions waiting for approval, the active memories the reviewers
receive, and the retired ones. Approve, edit, retire, restore.

Only the owner sees and changes a memory: anyone else gets a 404, anonymous visitors the
sign-in page. htmx requests get the memory's card back; plain posts redirect to the page, or
get the whole page with the message when refused.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from ..models import Memory
from ..status_change import change_status
from . import match as pure

PAGE = "reviews_app/memories.html"
Status = Memory.Status


class MemoryForm(forms.Form):
    text = forms.CharField(max_length=pure.MAX_TEXT, strip=True, error_messages={
        "required": "Write the memory: one sentence the reviewers read.",
        "max_length": f"Keep the memory under {pure.MAX_TEXT:,} characters.",
        "null_characters_not_allowed": "The text contains a NUL byte; remove it."})
    path_glob = forms.CharField(max_length=pure.MAX_GLOB, strip=True, error_messages={
        "required": "Give a path glob, e.g. tests/** (** alone is every file).",
        "max_length": f"Keep the path glob under {pure.MAX_GLOB} characters.",
        "null_characters_not_allowed": "The path glob contains a NUL byte; remove it."})
    effect = forms.ChoiceField(choices=[("drop", "Drop matching findings"),
                                        ("downgrade", "Downgrade them to info")],
                               error_messages={"invalid_choice": "Choose drop or downgrade."})

    def __init__(self, *args, memory: Memory, **kwargs):
        super().__init__(*args, **kwargs)
        self.memory = memory

    def clean_path_glob(self):
        glob = self.cleaned_data["path_glob"]
        if error := pure.glob_error(glob):
            raise forms.ValidationError(error)
        return glob

    def clean(self):
        data = super().clean()
        glob = data.get("path_glob")
        if glob and not self.errors:
            m = self.memory
            same = (Memory.objects.filter(owner=m.owner, connection=m.connection, path_glob=glob)
                    .exclude(pk=m.pk).exclude(status=Status.RETIRED))
            if m.match and any(o.match == m.match for o in same):
                clash = next(o for o in same if o.match == m.match)
                self.add_error("path_glob", f"Memory #{clash.pk} already says this for "
                                            f"{glob}; edit or retire that one instead.")
        return data


def _groups(user) -> dict:
    rows = list(Memory.objects.filter(owner=user).select_related(
        "connection", "decided_by", "source_finding__review").order_by("-id"))
    return {"pending": [m for m in rows if m.status == Status.PENDING],
            "active": [m for m in rows if m.status == Status.ACTIVE],
            "retired": [m for m in rows if m.status == Status.RETIRED]}


def _answer(request, memory: Memory, *, status: int = 200, notice: str = "", error: str = "",
            form: MemoryForm | None = None, moved: bool = False):
    """The memory's card (htmx), else back to the page (or the page with the message)."""
    if request.htmx:
        memory.refresh_from_db()
        ctx = {"m": memory, "notice": notice, "card_error": error, "form": form,
               "form_for": memory.pk, "moved": moved}
        return render(request, f"{PAGE}#memory-card", ctx, status=status)
    if status >= 400:
        ctx = {**_groups(request.user), "error": error, "form": form, "form_for": memory.pk}
        return render(request, PAGE, ctx, status=status)
    return redirect(reverse("memory_list") + f"#memory-{memory.pk}")


@login_required
@require_GET
def memory_list(request):
    return render(request, PAGE, _groups(request.user))


def _change(request, pk: int, allowed: tuple[str, ...], to: str, done: str):
    memory, outcome = change_status(Memory, pk, request.user, allowed, to)
    now = memory.get_status_display().lower()
    if outcome == "same":
        return _answer(request, memory, notice=f"Memory #{pk} is {now} already; nothing changed.")
    if outcome == "refused":
        return _answer(request, memory, status=409, error=(
            f"Memory #{pk} is {now}, so it cannot be {done.split(':')[0]}. Reload the page."))
    return _answer(request, memory, notice=f"Memory #{pk} {done}.", moved=True)


@login_required
@require_POST
def memory_approve(request, pk: int):
    return _change(request, pk, (Status.PENDING,), Status.ACTIVE,
                   "approved: the next reviews receive it")


@login_required
@require_POST
def memory_retire(request, pk: int):
    return _change(request, pk, (Status.PENDING, Status.ACTIVE), Status.RETIRED,
                   "retired: it no longer applies")


@login_required
@require_POST
def memory_restore(request, pk: int):
    return _change(request, pk, (Status.RETIRED,), Status.ACTIVE,
                   "restored: the next reviews receive it again")


@login_required
@require_POST
def memory_edit(request, pk: int):
    memory = get_object_or_404(Memory, pk=pk, owner=request.user)
    form = MemoryForm(request.POST, memory=memory)
    if not form.is_valid():
        errors = " ".join(e for errs in form.errors.values() for e in errs)
        return _answer(request, memory, status=400, form=form,
                       error=f"Memory #{pk} was not changed: {errors}")
    d = form.cleaned_data
    with transaction.atomic():
        memory = Memory.objects.select_for_update().get(pk=memory.pk)
        memory.text, memory.path_glob, memory.effect = d["text"], d["path_glob"], d["effect"]
        memory.save(update_fields=["text", "path_glob", "effect"])
    return _answer(request, memory, notice=f"Memory #{pk} saved.")
