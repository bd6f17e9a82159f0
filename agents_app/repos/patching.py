"""Applying a model's unified diff to a workspace with ``git apply``, all or nothing.

The diff is untrusted. Before git sees it, every path it names (``---``/``+++`` names and git's
``rename``/``copy`` headers) goes through :func:`paths.resolve`, so nothing outside the root,
inside ``.git`` or through a symbolic link is touched; binary, symlink and submodule patches are
refused. ``git apply`` refuses such paths itself as well (``invalid path``, ``beyond a symbolic
link``). ``git apply --check`` runs first, so a patch that does not apply changes nothing and
the model is told which file and hunk failed and why; then ``git apply`` writes the files.
``unidiff`` only reads the patch (names, hunks, counts for the summary and the error message).
"""

from __future__ import annotations

import re
from pathlib import Path

import unidiff
from unidiff.errors import UnidiffParseError

from common import proc

from .gitcmd import GIT_FLAGS
from .paths import BINARY_SNIFF_BYTES, ToolError, is_binary, resolve

DEV_NULL = "/dev/null"
GIT_APPLY_TIMEOUT = 60
_HEADER_NAME = re.compile(r"^(?:rename|copy) (?:from|to) (.+)$")
_PATCH_FAILED = re.compile(r"^error: patch failed: (.+):(\d+)$", re.MULTILINE)
_RESEND = "Nothing was changed; read the file again and resend the whole patch."


def apply_patch(root: Path, diff: str, *, max_write_bytes: int) -> str:
    """Apply a unified diff (git-style or plain; ``a/`` ``b/`` prefixes or none) under
    ``root``. Each hunk's old lines must match exactly, at the stated line or wherever git
    finds them nearest to it. A summary like ``Applied patch: modified x (+1 -1)``, or
    :class:`ToolError` with nothing changed."""
    if not diff or not diff.strip():
        raise ToolError("The patch is empty")
    if not diff.endswith("\n"):
        diff += "\n"
    try:
        patch = unidiff.PatchSet(diff)
    except UnidiffParseError as exc:
        raise ToolError(f"Could not parse the patch as a unified diff: {exc}") from None
    if not len(patch):
        raise ToolError("The patch contains no file changes (expected '--- a/path', "
                        "'+++ b/path' and '@@' hunk headers)")
    strip = 1 if all(_prefixed(pf) for pf in patch) else 0
    touched: dict[Path, str] = {}
    summary = [_check_file(root, pf, strip, touched, max_write_bytes) for pf in patch]
    text = diff
    check = git_apply(root, text, strip, "--check")
    if check.returncode != 0:
        adapted = _crlf_variant(root, patch, strip)
        if adapted is None or git_apply(root, adapted, strip, "--check").returncode != 0:
            raise ToolError(_explain(root, patch, strip, check.text("stderr")))
        text = adapted
    originals = {path: path.read_bytes() if path.is_file() else None for path in touched}
    done = git_apply(root, text, strip)
    if done.returncode != 0:
        _restore(originals)
        raise ToolError(f"git apply failed after its check passed ({_errors(done)}); nothing "
                        "was changed")
    return "Applied patch: " + "; ".join(summary)


def git_apply(root: Path, text: str, strip: int, *flags: str) -> proc.Result:
    """``git apply -p<strip>`` of ``text`` in ``root``; git looks for a repository no higher
    than ``root`` (a worktree is one; a plain folder is patched as by GNU patch)."""
    argv = ["git", *GIT_FLAGS, "apply", f"-p{strip}", "--unidiff-zero", "--whitespace=nowarn",
            *flags, "-"]
    try:
        result = proc.run(argv, cwd=root, timeout=GIT_APPLY_TIMEOUT,
                          stdin=text.encode("utf-8", "surrogateescape"),
                          env={"GIT_CEILING_DIRECTORIES": str(root.parent)})
    except OSError:
        raise ToolError("git is not installed, so patches cannot be applied; use write_file "
                        "or replace_in_file") from None
    if result.timed_out:
        raise ToolError(f"git apply took longer than {GIT_APPLY_TIMEOUT}s; nothing was changed")
    return result


def _errors(result: proc.Result) -> str:
    lines = [line.removeprefix("error: ").strip() for line in
             result.text("stderr").splitlines() if line.strip()]
    return "; ".join(lines[:10]) or f"exit code {result.returncode}"


def _prefixed(pf) -> bool:
    git_style = any(str(line).startswith("diff --git a/") for line in pf.patch_info or [])
    src, tgt = (str(name).lstrip('"') if name else DEV_NULL
                for name in (pf.source_file, pf.target_file))
    return git_style or ((src == DEV_NULL or src.startswith("a/"))
                         and (tgt == DEV_NULL or tgt.startswith("b/")))


def names(pf, strip: int) -> tuple[str | None, str | None]:
    """(source, target) as git will read them: quotes and ``strip`` leading components
    removed; None for /dev/null."""
    def clean(name: str | None) -> str | None:
        if name is None or name == DEV_NULL:
            return None
        if len(name) >= 2 and name.startswith('"') and name.endswith('"'):
            name = name[1:-1]
        return name.split("/", strip)[-1] if strip else name
    return clean(pf.source_file), clean(pf.target_file)


def _check_file(root: Path, pf, strip: int, touched: dict[Path, str],
                max_write_bytes: int) -> str:
    """Refuse what may not be patched; record the paths the file touches; its summary."""
    src, tgt = names(pf, strip)
    label = tgt or src or "?"
    if pf.is_binary_file:
        raise ToolError(f"Binary patches are not supported ({label!r}); use write_file")
    if pf.is_symlink or pf.is_submodule:
        raise ToolError(f"Patches that create or change symlinks or submodules are not "
                        f"supported ({label!r})")
    if src is None and tgt is None:
        raise ToolError("A file in the patch has /dev/null as both source and target")
    extra = [m[1].strip('"') for line in pf.patch_info or [] if (m := _HEADER_NAME.match(
        str(line).rstrip("\n")))]
    for name in [n for n in (src, tgt) if n] + extra:
        touched.setdefault(resolve(root, name, for_write=True), name)
    if src is None:
        return f"created {tgt} (+{pf.added})"
    if tgt is None:
        return f"deleted {src}"
    source = resolve(root, src, for_write=True)
    size = source.stat().st_size if source.is_file() else 0
    added = sum(len(line.value.encode("utf-8", "surrogateescape"))
                for hunk in pf for line in hunk if line.is_added)
    removed = sum(len(line.value.encode("utf-8", "surrogateescape"))
                  for hunk in pf for line in hunk if line.is_removed)
    if size + added - removed > max_write_bytes:
        raise ToolError(f"Patching {tgt!r} would make it about {size + added - removed} bytes, "
                        f"more than the {max_write_bytes}-byte limit")
    if src != tgt and (pf.is_rename or extra):
        return f"renamed {src} -> {tgt} (+{pf.added} -{pf.removed})"
    return f"modified {tgt} (+{pf.added} -{pf.removed})"


def _restore(originals: dict[Path, bytes | None]) -> None:
    for path, data in originals.items():
        try:
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(data)
        except OSError:
            pass


def _crlf_variant(root: Path, patch, strip: int) -> str | None:
    """The patch with CRLF line ends in the hunks of files that use CRLF, when the patch was
    written with plain newlines (as a model writes it after reading such a file); None when
    no file needs it."""
    changed = False
    for pf in patch:
        src = names(pf, strip)[0]
        if src is None or any(line.value.endswith("\r\n") for hunk in pf for line in hunk):
            continue
        try:
            head = resolve(root, src).read_bytes()[:BINARY_SNIFF_BYTES]
        except (ToolError, OSError):
            continue
        if b"\n" not in head or not head.split(b"\n", 1)[0].endswith(b"\r"):
            continue
        for hunk in pf:
            lines = list(hunk)
            for index, line in enumerate(lines):
                follows = lines[index + 1].line_type if index + 1 < len(lines) else ""
                if line.line_type in (" ", "-", "+") and line.value.endswith("\n") \
                        and follows != "\\":
                    line.value = line.value[:-1] + "\r\n"
                    changed = True
    return str(patch) if changed else None


def _explain(root: Path, patch, strip: int, stderr: str) -> str:
    """What the model should be told about git's refusal: for a hunk that does not match,
    which file, which hunk, and the first line that differs from what the hunk expects."""
    failed = _PATCH_FAILED.search(stderr)
    if failed:
        name, line = failed[1], int(failed[2])
        for pf in patch:
            if name not in names(pf, strip):
                continue
            for number, hunk in enumerate(pf, 1):
                if hunk.source_start == line:
                    return _mismatch(root, name, number, hunk)
        return f"The patch does not apply to {name!r} at line {line}. {_RESEND}"
    lines = [line.removeprefix("error: ").strip() for line in stderr.splitlines() if line.strip()]
    detail = "; ".join(lines[:10]) or "git apply refused it"
    if "invalid path" in detail or "beyond a symbolic link" in detail:
        return f"Refused: {detail}. Nothing was changed."
    if "No such file or directory" in detail:
        detail += " (to create a file, use /dev/null as its source)"
    return f"The patch does not apply: {detail}. Nothing was changed."


def _strip_eol(line: str) -> str:
    return line.removesuffix("\n").removesuffix("\r")


def _mismatch(root: Path, path: str, number: int, hunk) -> str:
    header = (f"@@ -{hunk.source_start},{hunk.source_length} "
              f"+{hunk.target_start},{hunk.target_length} @@")
    start = f"Hunk #{number} ({header}) for {path!r} does not apply"
    try:
        data = resolve(root, path).read_bytes()
    except (ToolError, OSError):
        return f"{start}. {_RESEND}"
    if is_binary(data[:BINARY_SNIFF_BYTES]):
        return f"{start}: {path!r} is a binary file; it cannot be patched"
    lines = [part for part in re.split(r"(?<=\n)", data.decode("utf-8", "surrogateescape"))
             if part]
    old = [line.value for line in hunk if line.line_type in (" ", "-")]
    expected = max(hunk.source_start if hunk.source_length == 0 else hunk.source_start - 1, 0)
    if not old:
        return (f"{start}: line {expected} is past the end of the file ({len(lines)} lines). "
                f"{_RESEND}")
    detail = ""
    for index, want in enumerate(old):
        at = expected + index
        if at >= len(lines):
            detail = (f": the file has only {len(lines)} lines, but the hunk expects "
                      f"{_strip_eol(want)!r} at line {at + 1}")
            break
        if _strip_eol(lines[at]) != _strip_eol(want):
            detail = (f": line {at + 1} is {_strip_eol(lines[at])[:200]!r} but the hunk "
                      f"expects {_strip_eol(want)[:200]!r}")
            break
    return f"{start}{detail}, and its old lines were not found elsewhere in the file. {_RESEND}"
