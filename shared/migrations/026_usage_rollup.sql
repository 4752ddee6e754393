-- Up Migration

-- Usage rolled up (issue 31, "Speed and scale"). Until now every flush added
-- each of its minute rows to the minute, the hour and the day rows, per key
-- and summed: a flush of a busy minute updated the same hour and day rows a
-- dozen times, and cost three times its minutes. Now a flush adds its minute
-- rows only, and the hours and days are rolled up from the minutes once, when
-- they are over: usage_roll_up, called by every gateway replica and run by one
-- at a time.
--
-- usage_rollup.rolled_until is where the rollup stands: every hour before it
-- is in the hour tables, every whole day before its day in the day tables.
-- Reports read hour rows before it and minute rows from it, day rows before its
-- day, hour rows from its day to it and minute rows after (usage-report.ts),
-- so a report is exact whether or not an hour was rolled yet.
--
-- A row that arrives for an hour already rolled (a replica that held its
-- counts while Postgres was away) is added by the writer to the hour row too,
-- and to the day row when that day is rolled. The writer holds a shared
-- advisory lock on each of its rows' days and hours, and reads rolled_until
-- under them; the rollup holds the hour's (and at a day's end the day's) lock
-- exclusively while it sums and moves rolled_until. So every row is either in
-- the minutes the rollup sums or sees the rollup done, never neither, never
-- both. Locks are taken days first then hours, each in ascending order, by
-- both sides, so they never wait on each other in a circle.
--
-- The rollup sums each hour (and each day) afresh from the per-key rows: it
-- replaces whatever rows the period had. A gateway older than this migration,
-- still running during a rolling upgrade, keeps adding to hour and day rows
-- directly and writes no agency summary; once their hour is rolled, those rows
-- are the exact sums of the per-key minutes it did write.
--
-- Also here: the agency's own summary, without the sub-account
-- (usage_agency_*): a report on a whole agency, not grouped by sub-account,
-- reads a handful of rows per bucket rather than one per sub-account.

CREATE TABLE usage_agency_minutes (
  bucket timestamptz NOT NULL,
  agency_id uuid NOT NULL,
  route text NOT NULL,
  outcome text NOT NULL,
  status_class smallint NOT NULL CHECK (status_class BETWEEN 1 AND 5),
  requests bigint NOT NULL CHECK (requests >= 0),
  latency bigint[] NOT NULL,
  PRIMARY KEY (agency_id, bucket, route, outcome, status_class)
) PARTITION BY RANGE (bucket);
CREATE TABLE usage_agency_hours (LIKE usage_agency_minutes INCLUDING CONSTRAINTS, PRIMARY KEY (agency_id, bucket, route, outcome, status_class))
  PARTITION BY RANGE (bucket);
CREATE TABLE usage_agency_days (LIKE usage_agency_minutes INCLUDING CONSTRAINTS, PRIMARY KEY (agency_id, bucket, route, outcome, status_class))
  PARTITION BY RANGE (bucket);

-- The per-key minute rows are the one table every flush adds to row by row,
-- so they carry one index: their primary key, led by the agency and the
-- bucket (a flush's rows share the bucket and come in agencies, so its inserts
-- land together; a report by key reads an agency's range by it). The agency
-- and sub-account indexes of 017 go. Their partitions leave room on each page,
-- so adding to a row already there (every later flush of the minute) is a
-- heap-only update that touches no index.
ALTER TABLE usage_minutes DROP CONSTRAINT usage_minutes_pkey;
ALTER TABLE usage_minutes ADD PRIMARY KEY (agency_id, bucket, key_id, route, outcome, status_class);
DROP INDEX usage_minutes_agency;
DROP INDEX usage_minutes_sub_account;
DO $$
DECLARE
  part text;
BEGIN
  FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'usage_minutes'::regclass LOOP
    EXECUTE format('ALTER TABLE %I SET (fillfactor = 70)', part);
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION usage_partition(parent text, period text, at timestamptz) RETURNS void
  LANGUAGE plpgsql AS $$
DECLARE
  start timestamptz := date_trunc(period, at, 'UTC');
  name text := parent || '_' || to_char(start AT TIME ZONE 'UTC', 'YYYYMMDD');
BEGIN
  IF to_regclass(name) IS NOT NULL THEN
    RETURN;
  END IF;
  BEGIN
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)%s', name, parent, start, start + ('1 ' || period)::interval,
                   CASE WHEN parent = 'usage_minutes' THEN ' WITH (fillfactor = 70)' ELSE '' END);
  EXCEPTION WHEN duplicate_table OR unique_violation THEN
    -- Another replica made it at the same moment.
    NULL;
  END;
END $$;

CREATE TABLE usage_rollup (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  rolled_until timestamptz NOT NULL CHECK (rolled_until = date_trunc('hour', rolled_until, 'UTC'))
);
-- Every hour up to now was written whole by the gateways before this migration (they added to the hour and day rows).
INSERT INTO usage_rollup (rolled_until) VALUES (date_trunc('hour', now(), 'UTC') + interval '1 hour');

-- The three kinds of counts, finest first, each in a minute, an hour and a day table, and the columns that make a row's identity besides its bucket.
CREATE FUNCTION usage_kinds() RETURNS TABLE (n integer, minutes text, hours text, days text, dims text)
  LANGUAGE sql IMMUTABLE AS $$
  VALUES (1, 'usage_minutes', 'usage_hours', 'usage_days', 'key_id, agency_id, sub_account_id, route, outcome, status_class'),
         (2, 'usage_summary_minutes', 'usage_summary_hours', 'usage_summary_days', 'agency_id, sub_account_id, route, outcome, status_class'),
         (3, 'usage_agency_minutes', 'usage_agency_hours', 'usage_agency_days', 'agency_id, route, outcome, status_class')
$$;

-- The advisory locks of a day and of an hour (a class of its own each, numbered by days or hours since 1970).
CREATE FUNCTION usage_day_lock(at timestamptz) RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT floor(extract(epoch FROM at) / 86400)::integer $$;
CREATE FUNCTION usage_hour_lock(at timestamptz) RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT floor(extract(epoch FROM at) / 3600)::integer $$;

-- A writer's locks: shared, on every day then every hour its rows fall in, in ascending order.
CREATE FUNCTION usage_hold(buckets timestamptz[]) RETURNS void
  LANGUAGE plpgsql AS $$
DECLARE
  n integer;
BEGIN
  FOR n IN SELECT DISTINCT usage_day_lock(b) FROM unnest(buckets) AS b ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock_shared(31026, n);
  END LOOP;
  FOR n IN SELECT DISTINCT usage_hour_lock(b) FROM unnest(buckets) AS b ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock_shared(31027, n);
  END LOOP;
END $$;

-- One period of `target` summed afresh from `source`: its rows replaced by the sums of the source's rows within it.
CREATE FUNCTION usage_resum(source text, target text, dims text, start timestamptz, span interval) RETURNS void
  LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %I WHERE bucket = $1', target) USING start;
  EXECUTE format('INSERT INTO %I (bucket, %s, requests, latency)
                  SELECT $1, %s, sum(requests), usage_histogram_sum(latency) FROM %I WHERE bucket >= $1 AND bucket < $2 GROUP BY %s',
                 target, dims, dims, source, dims) USING start, start + span;
END $$;

-- Rolls up the next hour if it ended by `until` (and, when it is a day's last, that day): answers whether it did.
-- The per-key hour rows are summed from the per-key minutes, and each coarser kind from the kind before it (fewer
-- rows to read, and all of them from the rows every gateway version writes). One caller at a time: while
-- another one rolls, it answers false at once.
CREATE FUNCTION usage_roll_up(until timestamptz) RETURNS boolean
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  hour timestamptz;
  next timestamptz;
  day_ends boolean;
  kind record;
  finer_hours text;
  finer_days text;
BEGIN
  SELECT rolled_until INTO hour FROM usage_rollup FOR UPDATE SKIP LOCKED;
  IF NOT FOUND OR hour + interval '1 hour' > until THEN
    RETURN false;
  END IF;
  next := hour + interval '1 hour';
  day_ends := next = date_trunc('day', next, 'UTC');
  PERFORM usage_prepare(hour, hour);
  IF day_ends THEN
    PERFORM pg_advisory_xact_lock(31026, usage_day_lock(hour));
  END IF;
  PERFORM pg_advisory_xact_lock(31027, usage_hour_lock(hour));
  FOR kind IN SELECT * FROM usage_kinds() ORDER BY n LOOP
    PERFORM usage_resum(coalesce(finer_hours, kind.minutes), kind.hours, kind.dims, hour, interval '1 hour');
    IF day_ends THEN
      PERFORM usage_resum(coalesce(finer_days, kind.hours), kind.days, kind.dims, next - interval '1 day', interval '1 day');
    END IF;
    finer_hours := kind.hours;
    finer_days := kind.days;
  END LOOP;
  UPDATE usage_rollup SET rolled_until = next;
  RETURN true;
END $$;

CREATE OR REPLACE FUNCTION usage_prepare(first timestamptz, last timestamptz) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  day timestamptz;
  kind record;
BEGIN
  IF last < first OR last - first > interval '400 days' THEN
    RAISE EXCEPTION 'usage_prepare: a batch spans % to %', first, last;
  END IF;
  day := date_trunc('day', first, 'UTC');
  WHILE day <= last LOOP
    FOR kind IN SELECT * FROM usage_kinds() LOOP
      PERFORM usage_partition(kind.minutes, 'day', day);
      PERFORM usage_partition(kind.hours, 'month', day);
      PERFORM usage_partition(kind.days, 'month', day);
    END LOOP;
    day := day + interval '1 day';
  END LOOP;
END $$;

-- Minutes go when past their age and rolled up; hours when past theirs and their days rolled up.
CREATE OR REPLACE FUNCTION usage_expire(minute_age interval, hour_age interval, day_age interval) RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  rolled timestamptz := (SELECT rolled_until FROM usage_rollup);
  dropped integer := 0;
  kind record;
BEGIN
  FOR kind IN SELECT * FROM usage_kinds() LOOP
    dropped := dropped + usage_drop_before(kind.minutes, 'day', least(now() - minute_age, rolled))
                       + usage_drop_before(kind.hours, 'month', least(now() - hour_age, date_trunc('day', rolled, 'UTC')))
                       + usage_drop_before(kind.days, 'month', now() - day_age);
  END LOOP;
  DELETE FROM usage_batches WHERE applied_at < now() - interval '1 day';
  RETURN dropped;
END $$;

DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['usage_prepare(timestamptz, timestamptz)', 'usage_expire(interval, interval, interval)', 'usage_roll_up(timestamptz)',
                            'usage_partition(text, text, timestamptz)',
                            'usage_resum(text, text, text, timestamptz, interval)', 'usage_kinds()', 'usage_hold(timestamptz[])',
                            'usage_day_lock(timestamptz)', 'usage_hour_lock(timestamptz)'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
  END LOOP;
END $$;

-- The agency summaries of the counts already kept: the sub-accounts' summaries (025) summed once more.
DO $$
DECLARE
  kind record;
  part text;
BEGIN
  FOR kind IN SELECT * FROM (VALUES ('usage_summary_minutes', 'usage_agency_minutes', 'day'), ('usage_summary_hours', 'usage_agency_hours', 'month'),
                                    ('usage_summary_days', 'usage_agency_days', 'month')) AS k (source, target, period) LOOP
    FOR part IN
      SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = to_regclass(kind.source) AND c.relname ~ ('^' || kind.source || '_[0-9]{8}$')
    LOOP
      PERFORM usage_partition(kind.target, kind.period, to_date(right(part, 8), 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC');
    END LOOP;
    EXECUTE format('INSERT INTO %I (bucket, agency_id, route, outcome, status_class, requests, latency)
                    SELECT bucket, agency_id, route, outcome, status_class, sum(requests), usage_histogram_sum(latency)
                      FROM %I GROUP BY 1, 2, 3, 4, 5', kind.target, kind.source);
  END LOOP;
END $$;

-- The gateway adds to the counts and calls the rollup; it neither deletes rows nor moves the rollup but through usage_roll_up.
REVOKE ALL ON FUNCTION usage_roll_up(timestamptz), usage_resum(text, text, text, timestamptz, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION usage_roll_up(timestamptz) TO scoped_gateway;
GRANT SELECT, INSERT, UPDATE ON usage_agency_minutes, usage_agency_hours, usage_agency_days TO scoped_gateway;
GRANT SELECT ON usage_rollup TO scoped_gateway, scoped_agency;
GRANT SELECT ON usage_agency_minutes, usage_agency_hours, usage_agency_days TO scoped_agency;

-- Down Migration

-- Back to the flush that adds to every table: the hours and days not rolled up yet are summed from their minutes first.
DO $$
DECLARE
  rolled timestamptz := (SELECT rolled_until FROM usage_rollup);
  kind record;
  hour timestamptz;
BEGIN
  FOR kind IN SELECT * FROM usage_kinds() WHERE minutes <> 'usage_agency_minutes' LOOP
    hour := rolled;
    WHILE hour <= now() LOOP
      PERFORM usage_prepare(hour, hour);
      PERFORM usage_resum(kind.minutes, kind.hours, kind.dims, hour, interval '1 hour');
      hour := hour + interval '1 hour';
    END LOOP;
    hour := date_trunc('day', rolled, 'UTC');
    WHILE hour <= now() LOOP
      PERFORM usage_resum(kind.hours, kind.days, kind.dims, hour, interval '1 day');
      hour := hour + interval '1 day';
    END LOOP;
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION usage_prepare(first timestamptz, last timestamptz) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  day timestamptz;
BEGIN
  IF last < first OR last - first > interval '400 days' THEN
    RAISE EXCEPTION 'usage_prepare: a batch spans % to %', first, last;
  END IF;
  day := date_trunc('day', first, 'UTC');
  WHILE day <= last LOOP
    PERFORM usage_partition('usage_minutes', 'day', day);
    PERFORM usage_partition('usage_hours', 'month', day);
    PERFORM usage_partition('usage_days', 'month', day);
    PERFORM usage_partition('usage_summary_minutes', 'day', day);
    PERFORM usage_partition('usage_summary_hours', 'month', day);
    PERFORM usage_partition('usage_summary_days', 'month', day);
    day := day + interval '1 day';
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION usage_expire(minute_age interval, hour_age interval, day_age interval) RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  dropped integer;
BEGIN
  dropped := usage_drop_before('usage_minutes', 'day', now() - minute_age)
           + usage_drop_before('usage_hours', 'month', now() - hour_age)
           + usage_drop_before('usage_days', 'month', now() - day_age)
           + usage_drop_before('usage_summary_minutes', 'day', now() - minute_age)
           + usage_drop_before('usage_summary_hours', 'month', now() - hour_age)
           + usage_drop_before('usage_summary_days', 'month', now() - day_age);
  DELETE FROM usage_batches WHERE applied_at < now() - interval '1 day';
  RETURN dropped;
END $$;

DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION usage_prepare(timestamptz, timestamptz) SET search_path = %I, pg_temp', current_schema());
  EXECUTE format('ALTER FUNCTION usage_expire(interval, interval, interval) SET search_path = %I, pg_temp', current_schema());
END $$;

ALTER TABLE usage_minutes DROP CONSTRAINT usage_minutes_pkey;
ALTER TABLE usage_minutes ADD PRIMARY KEY (key_id, bucket, route, outcome, status_class);
CREATE INDEX usage_minutes_agency ON usage_minutes (agency_id, bucket);
CREATE INDEX usage_minutes_sub_account ON usage_minutes (sub_account_id, bucket) WHERE sub_account_id IS NOT NULL;
CREATE OR REPLACE FUNCTION usage_partition(parent text, period text, at timestamptz) RETURNS void
  LANGUAGE plpgsql AS $$
DECLARE
  start timestamptz := date_trunc(period, at, 'UTC');
  name text := parent || '_' || to_char(start AT TIME ZONE 'UTC', 'YYYYMMDD');
BEGIN
  IF to_regclass(name) IS NOT NULL THEN
    RETURN;
  END IF;
  BEGIN
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', name, parent, start, start + ('1 ' || period)::interval);
  EXCEPTION WHEN duplicate_table OR unique_violation THEN
    NULL;
  END;
END $$;
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION usage_partition(text, text, timestamptz) SET search_path = %I, pg_temp', current_schema());
END $$;

DROP FUNCTION usage_roll_up(timestamptz);
DROP FUNCTION usage_resum(text, text, text, timestamptz, interval);
DROP FUNCTION usage_hold(timestamptz[]);
DROP FUNCTION usage_hour_lock(timestamptz);
DROP FUNCTION usage_day_lock(timestamptz);
DROP FUNCTION usage_kinds();
DROP TABLE usage_rollup;
DROP TABLE usage_agency_days;
DROP TABLE usage_agency_hours;
DROP TABLE usage_agency_minutes;
