"""Infrastructure, workflow and documentation changes for the offline review (issue 36): each
case a diff with the findings a reviewer must make (file, line, rule) or none at all.

``tests/test_review_infra.py`` reviews every case through the real pipeline; ``write_cases``
writes them as case folders of ``tests/data/review_cases`` (``change.diff`` and
``expected.json``) for ``tests/benchmarks/bench_review_quality.py --cases DIR``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


def new_file(path: str, lines: list[str]) -> str:
    body = "".join(f"+{ln}\n" for ln in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}")


@dataclass
class InfraCase:
    name: str
    language: str
    description: str
    diff: str
    # (file, line, rule, kind, severity at least)
    expected: list[tuple[str, int, str, str, str]] = field(default_factory=list)
    clean: bool = False
    # (file, line, why, kind): a line that looks like a problem of that kind and is not
    negatives: list[tuple[str, int, str, str]] = field(default_factory=list)


TERRAFORM_BUCKET = InfraCase(
    "terraform_public_bucket", "terraform",
    "An S3 bucket for exports made public-read, and an SSH port open to the world.",
    new_file("infra/exports.tf", [
        'resource "aws_s3_bucket" "exports" {',
        '  bucket = "acme-exports"',
        '  acl    = "public-read"',
        "}",
        "",
        'resource "aws_security_group" "bastion" {',
        '  name = "bastion"',
        "  ingress {",
        "    from_port   = 22",
        "    to_port     = 22",
        '    protocol    = "tcp"',
        '    cidr_blocks = ["0.0.0.0/0"]',
        "  }",
        "  ingress {",
        "    from_port   = 443",
        "    to_port     = 443",
        '    protocol    = "tcp"',
        '    cidr_blocks = ["0.0.0.0/0"]',
        "  }",
        "}"]),
    [("infra/exports.tf", 3, "tf-public-bucket", "public_bucket", "high"),
     ("infra/exports.tf", 12, "tf-open-admin-port", "open_port", "high")],
    negatives=[("infra/exports.tf", 18, "HTTPS open to the world is what a web server is for",
                "open_port")])

TERRAFORM_IAM = InfraCase(
    "terraform_iam_unencrypted", "terraform",
    "A CI role allowed every action, and an unencrypted EBS volume.",
    new_file("infra/ci.tf", [
        'data "aws_iam_policy_document" "ci" {',
        "  statement {",
        '    effect    = "Allow"',
        '    actions   = ["*"]',
        '    resources = ["*"]',
        "  }",
        "}",
        "",
        'resource "aws_ebs_volume" "cache" {',
        '  availability_zone = "eu-west-1a"',
        "  size              = 100",
        "  encrypted         = false",
        "}"]),
    [("infra/ci.tf", 4, "tf-iam-wildcard", "wildcard_iam", "high"),
     ("infra/ci.tf", 12, "tf-unencrypted-storage", "unencrypted_storage", "medium")])

TERRAFORM_CLEAN = InfraCase(
    "terraform_clean", "terraform",
    "Clean: a private bucket with its public access block on, HTTPS open, SSH from the VPN.",
    new_file("infra/site.tf", [
        'resource "aws_s3_bucket" "site" {',
        '  bucket = "acme-site"',
        "}",
        "",
        'resource "aws_s3_bucket_public_access_block" "site" {',
        "  bucket                  = aws_s3_bucket.site.id",
        "  block_public_acls       = true",
        "  block_public_policy     = true",
        "  ignore_public_acls      = true",
        "  restrict_public_buckets = true",
        "}",
        "",
        'resource "aws_security_group" "web" {',
        '  name = "web"',
        "  ingress {",
        "    from_port   = 443",
        "    to_port     = 443",
        '    protocol    = "tcp"',
        '    cidr_blocks = ["0.0.0.0/0"]',
        "  }",
        "  ingress {",
        "    from_port   = 22",
        "    to_port     = 22",
        '    protocol    = "tcp"',
        '    cidr_blocks = ["10.8.0.0/16"]',
        "  }",
        "}"]),
    clean=True, negatives=[("infra/site.tf", 19, "HTTPS to the world", "open_port"),
                           ("infra/site.tf", 25, "SSH from the VPN range only", "open_port")])

WORKFLOW_INJECTION = InfraCase(
    "workflow_title_injection", "workflow",
    "A workflow that echoes the pull request's title in a shell, on pull_request_target, "
    "checking out the head, with a third-party action on a branch and a write-all token.",
    new_file(".github/workflows/greet.yml", [
        "name: greet",
        "on:",
        "  pull_request_target:",
        "    types: [opened]",
        "permissions: write-all",
        "jobs:",
        "  greet:",
        "    runs-on: ubuntu-latest",
        "    steps:",
        "      - uses: actions/checkout@v4",
        "        with:",
        "          ref: ${{ github.event.pull_request.head.sha }}",
        "          persist-credentials: false",
        "      - uses: someone/labeler-action@main",
        "      - name: Thank",
        "        run: |",
        '          echo "Thanks for ${{ github.event.pull_request.title }}"']),
    [(".github/workflows/greet.yml", 17, "template-injection", "script_injection", "high"),
     (".github/workflows/greet.yml", 12, "gha-pr-target-head-checkout", "untrusted_checkout",
      "high"),
     (".github/workflows/greet.yml", 14, "unpinned-uses", "unpinned_dependency", "medium"),
     (".github/workflows/greet.yml", 5, "excessive-permissions", "broad_token", "medium"),
     (".github/workflows/greet.yml", 3, "dangerous-triggers", "dangerous_trigger", "medium")])

WORKFLOW_CLEAN = InfraCase(
    "workflow_clean", "workflow",
    "Clean: a pull_request workflow with read-only permissions, GitHub's actions by tag, a "
    "third-party action by commit, the title passed through the environment.",
    new_file(".github/workflows/ci.yml", [
        "name: ci",
        "on:",
        "  pull_request:",
        "permissions:",
        "  contents: read",
        "jobs:",
        "  test:",
        "    runs-on: ubuntu-latest",
        "    steps:",
        "      - uses: actions/checkout@v4",
        "        with:",
        "          persist-credentials: false",
        "      - uses: astral-sh/setup-uv@e92bafb6253dcd438e0484186d7669ea7a8ca1cc  # v6.4.3",
        "      - name: Title",
        "        env:",
        "          TITLE: ${{ github.event.pull_request.title }}",
        '        run: echo "Testing $TITLE"',
        "      - run: make test"]),
    clean=True, negatives=[(".github/workflows/ci.yml", 16, "the title goes through env",
                            "script_injection")])

KUBERNETES = InfraCase(
    "kubernetes_privileged", "kubernetes",
    "A Deployment with a privileged container on the host network, nginx:latest, no limits.",
    new_file("deploy/web.yaml", [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        "  name: web",
        "spec:",
        "  replicas: 2",
        "  selector:",
        "    matchLabels:",
        "      app: web",
        "  template:",
        "    metadata:",
        "      labels:",
        "        app: web",
        "    spec:",
        "      hostNetwork: true",
        "      containers:",
        "        - name: web",
        "          image: nginx:latest",
        "          securityContext:",
        "            privileged: true"]),
    [("deploy/web.yaml", 15, "k8s-host-namespace", "host_namespace", "high"),
     ("deploy/web.yaml", 18, "k8s-latest-image", "unpinned_dependency", "low"),
     ("deploy/web.yaml", 18, "k8s-no-resource-limits", "no_limits", "low"),
     ("deploy/web.yaml", 20, "k8s-privileged-container", "privileged", "high")])

KUBERNETES_CLEAN = InfraCase(
    "kubernetes_clean", "kubernetes",
    "Clean: a pinned image, limits, no privilege escalation.",
    new_file("deploy/api.yaml", [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        "  name: api",
        "spec:",
        "  replicas: 2",
        "  selector:",
        "    matchLabels:",
        "      app: api",
        "  template:",
        "    metadata:",
        "      labels:",
        "        app: api",
        "    spec:",
        "      containers:",
        "        - name: api",
        "          image: registry.example.com/acme/api:2.3.1",
        "          resources:",
        "            requests:",
        "              memory: 128Mi",
        "            limits:",
        "              memory: 256Mi",
        "          securityContext:",
        "            allowPrivilegeEscalation: false",
        "            runAsNonRoot: true"]),
    clean=True)

DOCS_CLEAN = InfraCase(
    "docs_clean", "docs",
    "Clean: a documentation-only change (Markdown guide, a YAML example, an reST note).",
    new_file("docs/deploying.md", [
        "# Deploying",
        "",
        "Quorum runs as one web process and one worker.",
        "",
        "## Settings",
        "",
        "Set `QUORUM_SECRET_KEY` before the first start:",
        "",
        "```bash",
        "export QUORUM_SECRET_KEY=\"$(openssl rand -hex 32)\"",
        "```",
        "",
        "See [the configuration](configuration.md) for the rest."])
    + new_file("docs/examples/worker.yaml", [
        "worker:",
        "  concurrency: 2",
        "  queues:",
        "    - reviews",
        "    - default"])
    + new_file("docs/notes.rst", [
        "Release notes",
        "=============",
        "",
        "The worker now restarts cleanly after a crash."]),
    clean=True)

DOCS_TYPO = InfraCase(
    "docs_typo", "docs",
    "A misspelt word in a Markdown guide (a low finding: the change can still be approved).",
    new_file("docs/guide.md", [
        "# Guide",
        "",
        "You will recieve a notification when the review is done."]),
    [("docs/guide.md", 3, "misspelling", "spelling", "low")])

YAML_DUPLICATE = InfraCase(
    "yaml_duplicate_key", "yaml",
    "A configuration file with a key given twice (the second silently wins).",
    new_file("config/app.yml", [
        "database:",
        "  host: db.internal",
        "  port: 5432",
        "  host: localhost"]),
    [("config/app.yml", 4, "key-duplicates", "bug", "medium")])

SQL_MIGRATION = InfraCase(
    "sql_migration", "sql",
    "A migration that deletes every session, grants to PUBLIC and sets a password inline.",
    new_file("db/migrations/004_cleanup.sql", [
        "BEGIN;",
        "DELETE FROM sessions;",
        "GRANT SELECT ON users TO PUBLIC;",
        "CREATE ROLE reporting LOGIN PASSWORD 'Spring2025!';",
        "COMMIT;"]),
    [("db/migrations/004_cleanup.sql", 2, "sql-unbounded-write", "bug", "medium"),
     ("db/migrations/004_cleanup.sql", 3, "sql-grant-to-public", "broad_grant", "medium"),
     ("db/migrations/004_cleanup.sql", 4, "sql-hardcoded-password", "hardcoded_secret",
      "high")])

SQL_CLEAN = InfraCase(
    "sql_clean", "sql",
    "Clean: a migration with a bounded delete and a role without a password.",
    new_file("db/migrations/005_expire.sql", [
        "BEGIN;",
        "DELETE FROM sessions WHERE expires_at < now();",
        "GRANT SELECT ON orders TO reporting;",
        "CREATE ROLE reporting NOLOGIN;",
        "COMMIT;"]),
    clean=True)

CASES = [TERRAFORM_BUCKET, TERRAFORM_IAM, TERRAFORM_CLEAN, WORKFLOW_INJECTION, WORKFLOW_CLEAN,
         KUBERNETES, KUBERNETES_CLEAN, DOCS_CLEAN, DOCS_TYPO, YAML_DUPLICATE, SQL_MIGRATION,
         SQL_CLEAN]


def write_cases(root: Path) -> list[Path]:
    """Each case as a folder of the review-quality benchmark (``tests/data/review_cases``)."""
    out = []
    for case in CASES:
        folder = root / case.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "change.diff").write_text(case.diff, encoding="utf-8")
        worst = {"docs", "yaml"}
        meta = {"language": case.language, "description": case.description,
                "verdict_not": None if case.clean or case.language in worst else "approve",
                "clean": case.clean,
                "expected": [{"file": f, "line": n, "kind": kind, "severity_at_least": sev,
                              "rule": rule} for f, n, rule, kind, sev in case.expected],
                "negatives": [{"file": f, "line": n, "kind": kind, "why": why}
                              for f, n, why, kind in case.negatives]}
        (folder / "expected.json").write_text(json.dumps(meta, indent=2) + "\n",
                                              encoding="utf-8")
        out.append(folder)
    return out
