-- Run by the MySQL image on first start of every MySQL container.
-- Not binlogged: each server (the replica too) owns its accounts, and the
-- replica's GTID auto-position starts from an empty history of mysql-a.
SET SESSION sql_log_bin = 0;
-- shardgate's data-path account (`backend`): DML and table DDL (CREATE,
-- DROP, INDEX, ALTER) on the shard databases only (`_` is the one-character wildcard of a grant: db_____ is db00000 to
-- db04095, msdb_____ msdb00000 to msdb04095). shardgate's backend side speaks
-- mysql_native_password only.
CREATE USER IF NOT EXISTS 'shard'@'%' IDENTIFIED WITH mysql_native_password BY 'shardpw';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON `db_____`.* TO 'shard'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON `msdb_____`.* TO 'shard'@'%';
-- The control plane's account (`operations`: fleet init, VERIFY FLEET,
-- PROMOTE REPLICA, failover). ALL on *.* includes MySQL 8's dynamic
-- privileges (REPLICATION_SLAVE_ADMIN, SYSTEM_VARIABLES_ADMIN, ...).
CREATE USER IF NOT EXISTS 'shardops'@'%' IDENTIFIED WITH mysql_native_password BY 'shardopspw';
GRANT ALL PRIVILEGES ON *.* TO 'shardops'@'%';
-- Replication account (used on mysql-a by mysql-a-replica).
CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED WITH mysql_native_password BY 'replpw';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'%';
