resource "aws_db_instance" "orders" {
  engine         = "mysql"
  instance_class = "db.t3.micro"
  # ruleid: tf-public-database
  publicly_accessible = true
}

resource "aws_rds_cluster_instance" "reader" {
  cluster_identifier = aws_rds_cluster.main.id
  instance_class     = "db.r6g.large"
  # ruleid: tf-public-database
  publicly_accessible = true
}

resource "aws_redshift_cluster" "warehouse" {
  cluster_identifier = "warehouse"
  node_type          = "ra3.xlplus"
  # ruleid: tf-public-database
  publicly_accessible = true
}

resource "aws_db_instance" "internal" {
  engine = "postgres"
  # ok: tf-public-database
  publicly_accessible = false
}

resource "aws_instance" "bastion" {
  ami = "ami-0abcdef1234567890"
  # ok: tf-public-database
  associate_public_ip_address = true
}

module "orders_db" {
  source         = "terraform-aws-modules/rds/aws"
  identifier     = "orders"
  engine         = "postgres"
  instance_class = "db.t4g.small"
  # ruleid: tf-public-database
  publicly_accessible = true
}

module "replica_db" {
  source = "terraform-aws-modules/rds/aws"
  # ok: tf-public-database
  publicly_accessible = false
}
