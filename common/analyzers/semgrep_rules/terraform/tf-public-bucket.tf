resource "aws_s3_bucket" "logs" {
  bucket = "acme-logs"
  # ruleid: tf-public-bucket
  acl    = "public-read"
}

resource "aws_s3_bucket_acl" "uploads" {
  bucket = aws_s3_bucket.uploads.id
  # ruleid: tf-public-bucket
  acl    = "public-read-write"
}

resource "aws_s3_bucket_public_access_block" "logs" {
  bucket                  = aws_s3_bucket.logs.id
  # ruleid: tf-public-bucket
  block_public_acls       = false
  # ok: tf-public-bucket
  block_public_policy     = true
  # ok: tf-public-bucket
  ignore_public_acls      = true
  # ruleid: tf-public-bucket
  restrict_public_buckets = false
}

resource "aws_s3_bucket" "private" {
  bucket = "acme-private"
  # ok: tf-public-bucket
  acl    = "private"
}
