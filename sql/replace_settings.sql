--
-- replace_settings: the settings of etl_replace_partition (points 8 and 9).
-- idem_etl.keep_replaced (seconds, default 0), idem_etl.lock_timeout
-- (milliseconds, default 5s) and idem_etl.lock_retries (default 5) exist
-- with their defaults, take units, and refuse values out of range (22023).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem_etl CASCADE;
CREATE EXTENSION idem_etl;
RESET client_min_messages;

SELECT name, setting, unit, boot_val, vartype, context
  FROM pg_settings
 WHERE name IN ('idem_etl.keep_replaced', 'idem_etl.lock_timeout', 'idem_etl.lock_retries')
 ORDER BY name;
SHOW idem_etl.keep_replaced;
SHOW idem_etl.lock_timeout;
SHOW idem_etl.lock_retries;

-- units
SET idem_etl.keep_replaced = '1d';
SHOW idem_etl.keep_replaced;
SET idem_etl.keep_replaced = 90;
SHOW idem_etl.keep_replaced;
SET idem_etl.lock_timeout = '250ms';
SHOW idem_etl.lock_timeout;
SET idem_etl.lock_timeout = '2s';
SHOW idem_etl.lock_timeout;
SET idem_etl.lock_retries = 0;
SHOW idem_etl.lock_retries;

-- out of range: 22023, the setting keeps its value
\set VERBOSITY sqlstate
SET idem_etl.keep_replaced = -1;
SET idem_etl.lock_timeout = 0;
SET idem_etl.lock_timeout = -5;
SET idem_etl.lock_retries = -1;
\set VERBOSITY default
SHOW idem_etl.keep_replaced;
SHOW idem_etl.lock_timeout;
SHOW idem_etl.lock_retries;

RESET idem_etl.keep_replaced;
RESET idem_etl.lock_timeout;
RESET idem_etl.lock_retries;
SHOW idem_etl.lock_timeout;

DROP EXTENSION idem_etl;
