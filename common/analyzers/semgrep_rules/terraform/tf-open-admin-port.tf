resource "aws_security_group" "admin" {
  name = "admin"

  ingress {
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    # ruleid: tf-open-admin-port
    cidr_blocks = ["0.0.0.0/0"]
  }

  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    # ok: tf-open-admin-port
    cidr_blocks = ["0.0.0.0/0"]
  }

  ingress {
    from_port   = 5432
    to_port     = 5432
    protocol    = "tcp"
    # ok: tf-open-admin-port
    cidr_blocks = ["10.0.0.0/16"]
  }

  ingress {
    from_port        = 3000
    to_port          = 3500
    protocol         = "tcp"
    # ruleid: tf-open-admin-port
    ipv6_cidr_blocks = ["::/0"]
  }
}

resource "aws_security_group_rule" "rdp" {
  type        = "ingress"
  from_port   = 3389
  to_port     = 3389
  protocol    = "tcp"
  # ruleid: tf-open-admin-port
  cidr_blocks = ["0.0.0.0/0"]
}

resource "aws_security_group_rule" "egress" {
  type        = "egress"
  from_port   = 0
  to_port     = 65535
  protocol    = "tcp"
  # ok: tf-open-admin-port
  cidr_blocks = ["0.0.0.0/0"]
}
