"""A person changes a repository in Chromium: start a plan → execute → review run from the
form, approve the plan, watch the change arrive over the WebSocket, read the diff and merge
it into the base branch. Everything real: Daphne, the Celery worker, Redis, git and the
offline model through LiteLLM (slowed to 0.4 s a call)."""

import re
import subprocess

import pytest

from agents_app.models import MergeRequest, Run
from tests.conftest import STACK_TEST_COMMAND as TEST_COMMAND
from tests.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

TASK = 'replace "Helo world" with "Hello world" in README.md'


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(path):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    (path / "README.md").write_text("# Project\n\nHelo world.\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def start_to_merge_gate(page, live_stack: str, repo) -> None:
    """Start a change run of TASK on ``repo`` from the form, approve its plan and wait for
    the merge request's gate (for the tests of what follows it)."""
    sign_in(page, live_stack)
    page.goto(live_stack + "/changes/new/")
    page.fill("input[name=repo]", str(repo))
    page.fill("input[name=base]", "main")
    page.fill("textarea[name=task]", TASK)
    page.select_option("select[name=test_command]", TEST_COMMAND)
    page.click("#change-form button.primary")
    page.wait_for_url(re.compile(r".*/changes/\d+/$"))
    approve = page.locator("#gate-panel button[value=approve]", has_text="Approve and execute")
    approve.wait_for(timeout=20_000)
    approve.click()
    page.locator("#gate-panel button[value=approve]", has_text="Merge into main").wait_for(
        timeout=30_000)


@pytest.fixture
def alice(browser_alice):
    return browser_alice


@pytest.fixture
def repo(stack_repo_root):
    """A repository under the roots the shared Daphne and worker were started with."""
    return make_repo(stack_repo_root / "proj")


def test_start_approve_plan_watch_and_merge(live_stack, page, alice, repo):
    sign_in(page, live_stack)
    page.click("nav >> text=Change a repository")
    page.wait_for_url(live_stack + "/changes/new/")
    page.fill("input[name=repo]", str(repo))
    page.fill("input[name=base]", "main")
    page.fill("textarea[name=task]", TASK)
    page.select_option("select[name=test_command]", TEST_COMMAND)
    page.click("#change-form button.primary")

    page.wait_for_url(re.compile(r".*/changes/\d+/$"))
    run = Run.objects.get()
    assert page.url == f"{live_stack}/changes/{run.pk}/"
    page.evaluate("window.__noReload = true")

    # The plan gate opens live.
    approve = page.locator("#gate-panel button[value=approve]", has_text="Approve and execute")
    approve.wait_for(timeout=20_000)
    # The plan shows once: in the editor the person approves, not again below it.
    assert page.locator("#gate-panel textarea[name=files]").input_value() == "README.md"
    assert page.locator("#plan-panel .plan-doc").count() == 0
    approve.click()

    # The executor edits the worktree, the tests run, the reviewer approves: the merge
    # request gate opens live, with the diff.
    merge = page.locator("#gate-panel button[value=approve]", has_text="Merge into main")
    merge.wait_for(timeout=30_000)
    assert page.evaluate("window.__noReload") is True, "the page reloaded"
    page.wait_for_selector("#mr-panel table.diff-code tr.add", timeout=10_000)
    added = " ".join(page.locator("#mr-panel table.diff-code tr.add").all_inner_texts())
    removed = " ".join(page.locator("#mr-panel table.diff-code tr.del").all_inner_texts())
    assert "Hello world" in added and "Helo world" in removed
    assert "README.md" in page.locator("#mr-panel .diff-file summary").first.inner_text()
    assert "tests ok" in page.locator("#mr-panel pre.test-output").inner_text()
    assert "approved" in page.locator("#mr-panel .verdict").inner_text()
    # Nothing is merged before the person decides.
    assert "Helo world" in git(repo, "show", "main:README.md")

    # The person edits the proposed commit message and asks for a merge commit.
    message = page.locator("#gate-panel textarea[name=commit_message]")
    # The plan's goal as the subject, without the offline model's label.
    assert "(Offline model:" in run.plan_versions.last().goal
    assert message.input_value().startswith("Apply 1 explicit edit(s) from the request\n\n")
    assert "Approved-by: alice" in page.locator("#gate-panel").inner_text()
    assert page.locator("#gate-panel input[name=merge_mode][value=squash]").is_checked()
    edited = "Fix the README greeting, which every visitor of the project reads first\n\nBy alice."
    message.fill(edited)
    page.check("#gate-panel input[name=merge_mode][value=merge]")
    base = git(repo, "rev-parse", "main")
    merge.click()
    page.wait_for_function(
        "() => document.querySelector('#run-header') && "
        "document.querySelector('#run-header').innerText.includes('MR: Merged')",
        timeout=20_000)
    page.wait_for_selector("#run-header .badge.ok", timeout=20_000)
    assert page.locator("#run-header .badge.ok").first.inner_text() == "Completed"
    assert page.evaluate("window.__noReload") is True, "the page reloaded"
    assert "Outcome" in page.locator("#gate-panel h2").inner_text()

    # Merged into the base branch with the person's message, as a merge commit; main is checked
    # out in the person's working tree, so its files follow (not a change that looks undone).
    assert git(repo, "log", "-1", "--format=%B", "main") == edited + "\n\nApproved-by: alice"
    assert git(repo, "rev-list", "--parents", "-n", "1", "main").split()[1:2] == [base]
    assert len(git(repo, "rev-list", "--parents", "-n", "1", "main").split()) == 3
    assert "Hello world" in git(repo, "show", "main:README.md")
    assert "Hello world" in (repo / "README.md").read_text()
    assert git(repo, "status", "--porcelain") == ""
    run.refresh_from_db()
    assert run.status == "completed"
    mr = MergeRequest.objects.get(run=run)
    assert mr.status == "merged" and mr.merged_sha and mr.decided_by == alice
    assert git(repo, "rev-parse", "main") == mr.merged_sha
    # The change is listed with its merge request on the changes page.
    page.click("nav >> text=Changes")
    page.wait_for_url(live_stack + "/changes/")
    row = page.locator("table.changes tbody tr").first.inner_text()
    assert f"#{run.pk}" in row and "Merged" in row and f"quorum/run-{run.pk}" in row
    assert page.errors == []


def test_a_repository_outside_the_roots_is_refused_in_place(live_stack, page, alice, tmp_path):
    outside = make_repo(tmp_path / "elsewhere" / "proj")
    sign_in(page, live_stack)
    page.goto(live_stack + "/changes/new/")
    page.evaluate("window.__noReload = true")
    page.fill("input[name=repo]", str(outside))
    page.fill("input[name=base]", "main")
    page.fill("textarea[name=task]", TASK)
    page.click("#change-form button.primary")
    page.wait_for_selector("#change-form .error")
    assert "outside the folders Quorum may read" in page.locator("#change-form .error").first.inner_text()
    # Swapped in place: same page, whole, form still there with what was typed.
    assert page.evaluate("window.__noReload") is True, "the page reloaded"
    assert page.url == live_stack + "/changes/new/"
    assert page.locator("#change-form").count() == 1
    assert page.locator("#change-form form button.primary").is_visible()
    assert page.locator("header.topbar nav").is_visible()
    assert page.locator("textarea[name=task]").input_value() == TASK
    assert page.locator("input[name=repo]").input_value() == str(outside)
    assert not Run.objects.exists()
    assert page.errors == []


def test_discard_asks_first_and_a_dismissed_dialog_changes_nothing(live_stack, page, alice,
                                                                    repo):
    sign_in(page, live_stack)
    page.goto(live_stack + "/changes/new/")
    page.fill("input[name=repo]", str(repo))
    page.fill("textarea[name=task]", TASK)
    page.check("input[name=auto_approve_plan]")
    page.click("#change-form button.primary")
    page.wait_for_url(re.compile(r".*/changes/\d+/$"))
    discard = page.locator("#gate-panel button[value=discard]")
    discard.wait_for(timeout=30_000)
    run = Run.objects.get()
    dialogs = []

    def dismiss(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    discard.click()
    page.wait_for_timeout(700)
    assert dialogs and "Discard the change?" in dialogs[0]
    run.refresh_from_db()
    assert run.status == "awaiting_merge_request"
    page.once("dialog", lambda dialog: dialog.accept())
    discard.click()
    page.wait_for_function(
        "() => document.querySelector('#run-header').innerText.includes('MR: Discarded')",
        timeout=20_000)
    assert not git(repo, "branch", "--list", f"quorum/run-{run.pk}")
    assert "Helo world" in git(repo, "show", "main:README.md")
    assert page.errors == []


TWO_STEPS = ('replace "Helo world" with "Hello world" in README.md, then '
             'replace "colour" with "color" in README.md')


@pytest.mark.parametrize("width", [1280, 390])
def test_a_skipped_step_is_sent_back_and_the_page_says_so_at_its_top(live_stack, page, alice,
                                                                     repo, width):
    """QA (issue 32): one of two plan steps was skipped (its text occurs twice), the other
    committed, and the merge request said "The reviewer approved round 1"; the skip was visible
    only deep in the trail. Now the round goes back, and the page's top says what is not done."""
    (repo / "README.md").write_text("# Project\n\nHelo world.\nThe colour of the colour.\n")
    git(repo, "commit", "-qam", "colour")
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_stack)
    page.goto(live_stack + "/changes/new/")
    page.fill("input[name=repo]", str(repo))
    page.fill("textarea[name=task]", TWO_STEPS)
    page.check("input[name=auto_approve_plan]")
    page.click("#change-form button.primary")
    page.wait_for_url(re.compile(r".*/changes/\d+/$"))
    run = Run.objects.get()
    page.evaluate("window.__noReload = true")

    # Rounds 1 and 2 go back to the executor; at the round cap the person is asked.
    again = page.locator("#gate-panel button[value=another_round]")
    again.wait_for(timeout=60_000)
    assert page.evaluate("window.__noReload") is True, "the page reloaded"
    notice = page.locator("#run-header #not-done")
    assert notice.is_visible()
    text = notice.inner_text()
    assert text.startswith("1 of 2 plan steps not done")
    assert 'Step 2: Replace "colour" with "color" in README.md — “colour” occurs 2 times' in text
    assert "replace all “colour” with “color” in README.md" in text
    # At the top of the page: above the decision and the merge request; on a phone too,
    # with nothing wider than the screen.
    assert page.evaluate("() => document.documentElement.scrollWidth - innerWidth") <= 0
    assert notice.bounding_box()["x"] + notice.bounding_box()["width"] <= width
    top = notice.bounding_box()["y"]
    assert top < page.locator("#gate-panel").bounding_box()["y"]
    assert top < page.locator("#mr-panel").bounding_box()["y"]
    badges = page.locator("#rounds-panel .round-review h3 .badge").all_inner_texts()
    assert badges == ["rejected · fixup", "rejected · fixup"]
    assert "Plan step 2 was not done" in page.locator("#rounds-panel").inner_text()
    assert "The reviewer approved" not in page.locator("body").inner_text()
    assert "rejected (fixup)" in page.locator("#mr-panel .verdict").inner_text()

    # The person says which occurrences: every one. That round finishes the work.
    page.fill("#gate-panel textarea[name=feedback]",
              'replace all "colour" with "color" in README.md')
    again.click()
    merge = page.locator("#gate-panel button[value=approve]", has_text="Merge into main")
    merge.wait_for(timeout=30_000)
    assert page.locator("#run-header #not-done").count() == 0
    assert "The reviewer approved round 3" in page.locator("#gate-panel").inner_text()
    merge.click()
    page.wait_for_function(
        "() => document.querySelector('#run-header').innerText.includes('MR: Merged')",
        timeout=20_000)
    assert git(repo, "show", "main:README.md") == \
        "# Project\n\nHello world.\nThe color of the color."
    message = git(repo, "log", "-1", "--format=%B", "main")
    assert message.startswith("Apply 2 explicit edit(s) from the request\n\n")
    assert message.endswith("\n\nApproved-by: alice")
    run.refresh_from_db()
    assert run.status == "completed"
    assert page.errors == []
