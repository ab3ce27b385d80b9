-- Run by the MySQL image on first start of every MySQL container.
-- Not binlogged: each server (the replica too) owns its accounts, and the
-- replica's GTID auto-position starts from an empty history of mysql-a.
SET SESSION sql_log_bin = 0;
-- shardgate's backend account; shardgate's backend side speaks
-- mysql_native_password only.
CREATE USER IF NOT EXISTS 'shard'@'%' IDENTIFIED WITH mysql_native_password BY 'shardpw';
GRANT ALL PRIVILEGES ON *.* TO 'shard'@'%';
-- Replication account (used on mysql-a by mysql-a-replica).
CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED WITH mysql_native_password BY 'replpw';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'%';
