resource "aws_ebs_volume" "data" {
  availability_zone = "eu-west-1a"
  size              = 40
  # ruleid: tf-unencrypted-storage
  encrypted         = false
}

resource "aws_db_instance" "main" {
  engine            = "postgres"
  instance_class    = "db.t4g.micro"
  # ruleid: tf-unencrypted-storage
  storage_encrypted = false
}

resource "aws_ebs_volume" "logs" {
  availability_zone = "eu-west-1a"
  size              = 10
  # ok: tf-unencrypted-storage
  encrypted         = true
}
