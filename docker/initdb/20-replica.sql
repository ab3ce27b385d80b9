-- Run on first start of mysql-a-replica only: follow mysql-a by GTID.
-- The IO thread retries until mysql-a answers; the setting survives the
-- image's restart after initialisation.
CHANGE REPLICATION SOURCE TO
  SOURCE_HOST = 'mysql-a', SOURCE_PORT = 3306,
  SOURCE_USER = 'repl', SOURCE_PASSWORD = 'replpw',
  SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 2, SOURCE_RETRY_COUNT = 10000;
START REPLICA;
