-- Up Migration

-- Usage counting (issue 31). Each gateway replica counts the requests of
-- every key in memory and adds them here in batches: one row per key, minute,
-- route prefix, outcome and status class in usage_minutes, and the same
-- counts summed to the hour (usage_hours) and the day (usage_days) in the same
-- transaction, so the three never disagree. `latency` is a fixed log-scale
-- histogram (gateway/src/usage/latency-histogram.ts): element i counts the
-- answers that took at most 0.5 ms × 2^(i/2), the last one everything
-- slower; histograms add element by element, so percentiles of any range
-- merge exactly.
--
-- Every table is partitioned by its bucket's time (minutes by day, hours and
-- days by month): expiring old rows drops whole partitions (usage_expire),
-- never a scan. Partitions are made on demand by usage_prepare, which the
-- gateway calls with each batch's range; nothing is inserted before its
-- partition exists.
--
-- A batch is idempotent: its replica id and sequence number go into
-- usage_batches in the same transaction, and a batch already there is not
-- applied again (a commit whose answer was lost, retried).

CREATE TABLE usage_minutes (
  bucket timestamptz NOT NULL,
  key_id uuid NOT NULL,
  agency_id uuid NOT NULL,
  sub_account_id uuid,
  route text NOT NULL,
  outcome text NOT NULL,
  status_class smallint NOT NULL CHECK (status_class BETWEEN 1 AND 5),
  requests bigint NOT NULL CHECK (requests >= 0),
  latency bigint[] NOT NULL,
  PRIMARY KEY (key_id, bucket, route, outcome, status_class)
) PARTITION BY RANGE (bucket);
CREATE TABLE usage_hours (LIKE usage_minutes INCLUDING CONSTRAINTS, PRIMARY KEY (key_id, bucket, route, outcome, status_class)) PARTITION BY RANGE (bucket);
CREATE TABLE usage_days (LIKE usage_minutes INCLUDING CONSTRAINTS, PRIMARY KEY (key_id, bucket, route, outcome, status_class)) PARTITION BY RANGE (bucket);

-- An agency's (or a sub-account's) usage over a range reads its own rows by
-- these, whatever its number of keys.
CREATE INDEX usage_minutes_agency ON usage_minutes (agency_id, bucket);
CREATE INDEX usage_minutes_sub_account ON usage_minutes (sub_account_id, bucket) WHERE sub_account_id IS NOT NULL;
CREATE INDEX usage_hours_agency ON usage_hours (agency_id, bucket);
CREATE INDEX usage_hours_sub_account ON usage_hours (sub_account_id, bucket) WHERE sub_account_id IS NOT NULL;
CREATE INDEX usage_days_agency ON usage_days (agency_id, bucket);
CREATE INDEX usage_days_sub_account ON usage_days (sub_account_id, bucket) WHERE sub_account_id IS NOT NULL;

CREATE TABLE usage_batches (
  replica_id text NOT NULL CHECK (length(replica_id) BETWEEN 1 AND 200),
  seq bigint NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (replica_id, seq)
);
CREATE INDEX usage_batches_applied_at ON usage_batches (applied_at);

-- Element-wise sum of two histograms (a missing element counts 0).
CREATE FUNCTION usage_add_histograms(a bigint[], b bigint[]) RETURNS bigint[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(coalesce(a[i], 0) + coalesce(b[i], 0) ORDER BY i), '{}')
    FROM generate_series(1, greatest(coalesce(array_length(a, 1), 0), coalesce(array_length(b, 1), 0))) AS i
$$;

-- The sum of histograms, as an aggregate (the usage queries merge buckets with it).
CREATE AGGREGATE usage_histogram_sum(bigint[]) (SFUNC = usage_add_histograms, STYPE = bigint[], INITCOND = '{}');

-- The partition of `parent` that holds `at`, made when missing. Its name
-- carries the start of its period (parent_YYYYMMDD), which usage_expire reads.
CREATE FUNCTION usage_partition(parent text, period text, at timestamptz) RETURNS void
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
    -- Another replica made it at the same moment.
    NULL;
  END;
END $$;

-- Every partition a batch of buckets from `first` to `last` needs.
CREATE FUNCTION usage_prepare(first timestamptz, last timestamptz) RETURNS void
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
    day := day + interval '1 day';
  END LOOP;
END $$;

-- Drops every partition of `parent` whose period ended before `horizon`;
-- answers how many it dropped.
CREATE FUNCTION usage_drop_before(parent text, period text, horizon timestamptz) RETURNS integer
  LANGUAGE plpgsql AS $$
DECLARE
  part text;
  dropped integer := 0;
BEGIN
  FOR part IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = to_regclass(parent) AND c.relname ~ ('^' || parent || '_[0-9]{8}$')
  LOOP
    IF to_timestamp(right(part, 8), 'YYYYMMDD') AT TIME ZONE 'UTC' + ('1 ' || period)::interval <= horizon THEN
      EXECUTE format('DROP TABLE IF EXISTS %I', part);
      dropped := dropped + 1;
    END IF;
  END LOOP;
  RETURN dropped;
END $$;

-- Retention: minutes, hours and days older than their ages go, whole
-- partitions at a time; so do batch records older than a day (a batch is
-- retried within seconds, never a day later).
CREATE FUNCTION usage_expire(minute_age interval, hour_age interval, day_age interval) RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  dropped integer;
BEGIN
  dropped := usage_drop_before('usage_minutes', 'day', now() - minute_age)
           + usage_drop_before('usage_hours', 'month', now() - hour_age)
           + usage_drop_before('usage_days', 'month', now() - day_age);
  DELETE FROM usage_batches WHERE applied_at < now() - interval '1 day';
  RETURN dropped;
END $$;

DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['usage_prepare(timestamptz, timestamptz)', 'usage_expire(interval, interval, interval)',
                            'usage_partition(text, text, timestamptz)', 'usage_drop_before(text, text, timestamptz)'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
  END LOOP;
END $$;

-- Only the gateway makes partitions and expires them (through the two
-- definer functions); nobody calls the helpers directly.
REVOKE ALL ON FUNCTION usage_prepare(timestamptz, timestamptz), usage_expire(interval, interval, interval),
  usage_partition(text, text, timestamptz), usage_drop_before(text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION usage_prepare(timestamptz, timestamptz), usage_expire(interval, interval, interval) TO scoped_gateway;

-- The gateway adds to the counts (an upsert reads the row it adds to) and
-- records its batches; agency-service and ctl read the counts.
GRANT SELECT, INSERT, UPDATE ON usage_minutes, usage_hours, usage_days TO scoped_gateway;
GRANT INSERT ON usage_batches TO scoped_gateway;
GRANT SELECT ON usage_minutes, usage_hours, usage_days TO scoped_agency;

-- Down Migration

DROP FUNCTION usage_expire(interval, interval, interval);
DROP FUNCTION usage_drop_before(text, text, timestamptz);
DROP FUNCTION usage_prepare(timestamptz, timestamptz);
DROP FUNCTION usage_partition(text, text, timestamptz);
DROP AGGREGATE usage_histogram_sum(bigint[]);
DROP FUNCTION usage_add_histograms(bigint[], bigint[]);
DROP TABLE usage_batches;
DROP TABLE usage_days;
DROP TABLE usage_hours;
DROP TABLE usage_minutes;
