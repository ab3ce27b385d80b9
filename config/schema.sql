-- Per-shard schema for the fleets in config/shardgate.yaml.
--
-- `shardgate fleet init --config config/shardgate.yaml --schema config/schema.sql`
-- creates every shard database (db00000..db04095 on the main fleet,
-- msdb00000..msdb04095 on the mod fleet) on the master that owns it and runs
-- each CREATE TABLE below in it. A table is created only on the fleet whose
-- `tables` entry in the config names it; every table here must be in the
-- config. Statements must be idempotent (IF NOT EXISTS): init may be re-run.

-- Object tables (fleet main). The global 64-bit ID is composed from the
-- shard, the type id and local_id: (shard << 46) | (type << 36) | local_id.
CREATE TABLE IF NOT EXISTS pins (
  local_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  data     TEXT,
  ts       TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS boards (
  local_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  data     TEXT,
  ts       TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS users (
  local_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  data     TEXT,
  ts       TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Mapping tables (fleet main). A row lives on the shard of its from-ID
-- (board_id, user_id); `sequence` orders a board's pins / a user's likes.
CREATE TABLE IF NOT EXISTS board_has_pins (
  board_id BIGINT UNSIGNED NOT NULL,
  pin_id   BIGINT UNSIGNED NOT NULL,
  sequence BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (board_id, pin_id),
  KEY board_sequence (board_id, sequence)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS user_likes_pins (
  user_id  BIGINT UNSIGNED NOT NULL,
  pin_id   BIGINT UNSIGNED NOT NULL,
  sequence BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, pin_id),
  KEY user_sequence (user_id, sequence)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Mod-shard table (fleet mod): shard = md5(email) % 4096.
CREATE TABLE IF NOT EXISTS user_by_email (
  email   VARCHAR(255) NOT NULL PRIMARY KEY,
  user_id BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Object table of the time-sortable fleet (photos): the row stores its
-- 64-bit id, minted by the server at INSERT from NOW(3), the shard and the
-- shard database's `shardgate_id_seq` sequence (created by fleet init).
CREATE TABLE IF NOT EXISTS photos (
  id       BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  data     TEXT,
  ts       TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
