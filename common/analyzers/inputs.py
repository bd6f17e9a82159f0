"""The analyzers' input: a file's text, whole or cut from its diff hunks, its line map, and its
kind (which analyzers read it)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

# A file's kind decides which analyzers read it (``tools.TOOLS``); "other" is read by the
# secrets scanners only.
KINDS = ("python", "javascript", "typescript", "go", "java", "shell", "dockerfile",
         "php", "ruby", "csharp", "kotlin",
         "terraform", "workflow", "yaml", "markdown", "text", "sql", "other")
KIND_LABELS = {"python": "Python", "javascript": "JavaScript", "typescript": "TypeScript",
               "go": "Go", "java": "Java", "shell": "shell", "dockerfile": "Dockerfiles",
               "php": "PHP", "ruby": "Ruby", "csharp": "C#", "kotlin": "Kotlin",
               "terraform": "Terraform", "workflow": "GitHub Actions workflows",
               "yaml": "YAML", "markdown": "Markdown", "text": "plain-text documents",
               "sql": "SQL", "other": "other files"}
_BY_EXTENSION = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".go": "go", ".java": "java",
    ".sh": "shell", ".bash": "shell", ".ksh": "shell", ".bats": "shell",
    ".dockerfile": "dockerfile",
    ".php": "php", ".phtml": "php",
    ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby", ".ru": "ruby",
    ".cs": "csharp",
    ".kt": "kotlin", ".kts": "kotlin",
    ".tf": "terraform", ".tfvars": "terraform",
    ".yml": "yaml", ".yaml": "yaml",
    ".md": "markdown", ".markdown": "markdown",
    ".rst": "text", ".adoc": "text", ".txt": "text",
    ".sql": "sql",
}
# A workflow of GitHub Actions: a YAML file directly in .github/workflows/.
_WORKFLOW = re.compile(r"(?:^|/)\.github/workflows/[^/]+\.ya?ml$", re.IGNORECASE)
# Ruby files known by their name alone.
_BY_NAME = {"gemfile": "ruby", "rakefile": "ruby", "guardfile": "ruby"}
# The generated name's extension for kinds whose parser wants one spelling (semgrep reads
# ``.phtml`` or ``.rake`` as nothing).
_ONE_SUFFIX = {"php": "php", "ruby": "rb", "csharp": "cs"}
_SHEBANG = re.compile(r"^#!\s*(?:/usr)?(?:/local)?/bin/(?:env\s+(?:-\S+\s+)*)?(?:ba|da|k)?sh\b")
_SAFE_EXT = re.compile(r"^[A-Za-z0-9]{1,10}$")


def kind_of(path: str, first_line: str | None = None) -> str:
    """The kind of a file, by its name (``Dockerfile``, ``*.ts``, ...) or, for a file without a
    known extension, by a shell shebang on its first line."""
    name = posixpath.basename(str(path or ""))
    low = name.lower()
    if low in ("dockerfile", "containerfile") or low.startswith(("dockerfile.",
                                                                  "containerfile.")):
        return "dockerfile"
    kind = _BY_EXTENSION.get(posixpath.splitext(low)[1]) or _BY_NAME.get(low)
    if kind == "yaml" and _WORKFLOW.search(str(path or "").replace("\\", "/")):
        return "workflow"
    if kind:
        return kind
    if first_line is not None and _SHEBANG.match(first_line):
        return "shell"
    return "other"


def suffix_for(kind: str, path: str) -> str:
    """The extension of the generated file name: the tools choose their parser by it. Only a
    short alphanumeric extension of the original name is kept; never the name itself."""
    ext = posixpath.splitext(posixpath.basename(str(path or "")).lstrip("."))[1][1:]
    if kind == "python":
        return "py"
    if kind == "dockerfile":
        return "Dockerfile"
    if kind == "shell":
        return "sh"
    if kind == "terraform":
        return "tf"
    if kind == "workflow":
        return "yml"
    if kind == "markdown":
        return "md"
    if kind == "sql":
        return "sql"
    if kind == "yaml":
        return ext.lower() if ext.lower() in ("yml", "yaml") else "yaml"
    if kind in ("other", "text"):
        return ext if _SAFE_EXT.match(ext) else "txt"
    if kind in _ONE_SUFFIX:
        return _ONE_SUFFIX[kind]
    return ext.lower() if _SAFE_EXT.match(ext) else {"javascript": "js", "typescript": "ts",
                                                      "go": "go", "java": "java",
                                                      "kotlin": "kt"}[kind]


@dataclass
class AnalyzerInput:
    path: str                                   # display only; never a filesystem path
    text: str                                   # source to analyze
    line_map: dict[int, int] | None = None      # analyzed line -> new-file line; None = identity
    full: bool = True                           # True when text is the whole new file
    changed_lines: set[int] | None = None       # new-file lines the change adds; None = all
    kind: str = "python"                        # see KINDS


def _first_line(file: dict) -> str | None:
    content = file.get("content")
    if isinstance(content, str):
        return content.split("\n", 1)[0]
    for h in file.get("hunks") or []:
        for ln in h.get("lines") or []:
            if ln.get("new") == 1:
                return str(ln.get("text") or "")
    return None


def input_from_file(file: dict) -> AnalyzerInput | None:
    """The analyzer input for one file of the diff parser, or None (no new code).

    With the new content, the whole file is analyzed; otherwise the new side (context and
    added lines) of its hunks, in order, with a map from fragment line to new-file line.
    """
    path = str(file.get("path") or "")
    kind = "python" if file.get("is_python") else kind_of(path, _first_line(file))
    hunks = file.get("hunks") or []
    changed = {ln["new"] for h in hunks for ln in h.get("lines") or []
               if ln.get("kind") == "add" and isinstance(ln.get("new"), int)}
    content = file.get("content")
    if content is not None:
        if not content.strip():
            return None
        return AnalyzerInput(path=path, text=content, line_map=None, full=True,
                             changed_lines=changed, kind=kind)
    texts: list[str] = []
    line_map: dict[int, int] = {}
    for h in hunks:
        for ln in h.get("lines") or []:
            if ln.get("kind") in ("add", "ctx") and isinstance(ln.get("new"), int):
                texts.append(str(ln.get("text") or "").rstrip("\r\n"))
                line_map[len(texts)] = ln["new"]
    if not any(t.strip() for t in texts):
        return None
    return AnalyzerInput(path=path, text="\n".join(texts) + "\n", line_map=line_map,
                         full=False, changed_lines=changed, kind=kind)
