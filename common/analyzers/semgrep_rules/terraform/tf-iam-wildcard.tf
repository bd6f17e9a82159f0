resource "aws_iam_policy" "admin" {
  name = "admin"
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect   = "Allow"
      # ruleid: tf-iam-wildcard
      Action   = "*"
      Resource = "*"
    }]
  })
}

data "aws_iam_policy_document" "ci" {
  statement {
    effect    = "Allow"
    # ruleid: tf-iam-wildcard
    actions   = ["*"]
    resources = ["*"]
  }
  statement {
    effect    = "Allow"
    # ok: tf-iam-wildcard
    actions   = ["s3:GetObject"]
    resources = ["arn:aws:s3:::acme-logs/*"]
  }
  statement {
    effect    = "Deny"
    # ok: tf-iam-wildcard
    actions   = ["*"]
    resources = ["*"]
  }
}

resource "aws_iam_role_policy" "legacy" {
  role   = aws_iam_role.legacy.id
  policy = <<POLICY
{
  "Version": "2012-10-17",
  "Statement": [
    {
      "Effect": "Allow",
      # ruleid: tf-iam-wildcard
      "Action": "*",
      "Resource": "*"
    }
  ]
}
POLICY
}
