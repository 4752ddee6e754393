-- Up Migration

-- A tenant's usage without the key dimension (issue 31, "Speed and scale"):
-- the per-key counts of 017 summed per agency, sub-account, bucket, route,
-- outcome and status class, at the minute, the hour and the day. Every
-- report not grouped by key nor filtered by one reads these, so its cost
-- follows the tenant's routes and outcomes rather than its number of keys.
--
-- They are written by the same statement as the per-key rows (from the same
-- batch's minute rows, summed in Postgres), so the usage_batches record of a
-- batch covers both and the two never disagree. Partitioned and expired like
-- the per-key tables: usage_prepare makes their partitions, usage_expire drops
-- them with the same ages.
--
-- A cell's identity is unique with NULLS NOT DISTINCT: an agency's own keys
-- have no sub-account, and their rows must add up in one cell too. Its index
-- leads with (agency_id, bucket), which is how every report reads.

CREATE TABLE usage_summary_minutes (
  bucket timestamptz NOT NULL,
  agency_id uuid NOT NULL,
  sub_account_id uuid,
  route text NOT NULL,
  outcome text NOT NULL,
  status_class smallint NOT NULL CHECK (status_class BETWEEN 1 AND 5),
  requests bigint NOT NULL CHECK (requests >= 0),
  latency bigint[] NOT NULL,
  CONSTRAINT usage_summary_minutes_agency UNIQUE NULLS NOT DISTINCT (agency_id, bucket, sub_account_id, route, outcome, status_class)
) PARTITION BY RANGE (bucket);
CREATE TABLE usage_summary_hours (
  LIKE usage_summary_minutes INCLUDING CONSTRAINTS,
  CONSTRAINT usage_summary_hours_agency UNIQUE NULLS NOT DISTINCT (agency_id, bucket, sub_account_id, route, outcome, status_class)
) PARTITION BY RANGE (bucket);
CREATE TABLE usage_summary_days (
  LIKE usage_summary_minutes INCLUDING CONSTRAINTS,
  CONSTRAINT usage_summary_days_agency UNIQUE NULLS NOT DISTINCT (agency_id, bucket, sub_account_id, route, outcome, status_class)
) PARTITION BY RANGE (bucket);

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

-- CREATE OR REPLACE keeps the grants but not the settings.
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION usage_prepare(timestamptz, timestamptz) SET search_path = %I, pg_temp', current_schema());
  EXECUTE format('ALTER FUNCTION usage_expire(interval, interval, interval) SET search_path = %I, pg_temp', current_schema());
END $$;

-- The counts already kept, summed once: a partition for every per-key
-- partition, then each table's rows grouped without the key.
DO $$
DECLARE
  kind record;
  part text;
BEGIN
  FOR kind IN SELECT * FROM (VALUES ('usage_minutes', 'usage_summary_minutes', 'day'), ('usage_hours', 'usage_summary_hours', 'month'),
                                    ('usage_days', 'usage_summary_days', 'month')) AS k (source, summary, period) LOOP
    FOR part IN
      SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = to_regclass(kind.source) AND c.relname ~ ('^' || kind.source || '_[0-9]{8}$')
    LOOP
      PERFORM usage_partition(kind.summary, kind.period, to_date(right(part, 8), 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC');
    END LOOP;
    EXECUTE format('INSERT INTO %I (bucket, agency_id, sub_account_id, route, outcome, status_class, requests, latency)
                    SELECT bucket, agency_id, sub_account_id, route, outcome, status_class, sum(requests), usage_histogram_sum(latency)
                      FROM %I GROUP BY 1, 2, 3, 4, 5, 6', kind.summary, kind.source);
  END LOOP;
END $$;

GRANT SELECT, INSERT, UPDATE ON usage_summary_minutes, usage_summary_hours, usage_summary_days TO scoped_gateway;
GRANT SELECT ON usage_summary_minutes, usage_summary_hours, usage_summary_days TO scoped_agency;

-- Down Migration

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
           + usage_drop_before('usage_days', 'month', now() - day_age);
  DELETE FROM usage_batches WHERE applied_at < now() - interval '1 day';
  RETURN dropped;
END $$;

DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION usage_prepare(timestamptz, timestamptz) SET search_path = %I, pg_temp', current_schema());
  EXECUTE format('ALTER FUNCTION usage_expire(interval, interval, interval) SET search_path = %I, pg_temp', current_schema());
END $$;

DROP TABLE usage_summary_days;
DROP TABLE usage_summary_hours;
DROP TABLE usage_summary_minutes;
