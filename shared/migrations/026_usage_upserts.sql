-- Up Migration

-- Adding two latency histograms (017's usage_add_histograms) in a loop over
-- the second one's elements, in PL/pgSQL: every flush's upsert calls it once
-- per row that a batch adds to (and usage_histogram_sum once per row it
-- reads), and the SQL version (generate_series and array_agg per call) cost
-- about three times as much. Same answers: element-wise sums, a missing
-- element counting 0, so histograms of different lengths (the gateway sends
-- them without their trailing zeros) add up.
CREATE OR REPLACE FUNCTION usage_add_histograms(a bigint[], b bigint[]) RETURNS bigint[]
  LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  sum bigint[] := coalesce(a, '{}');
BEGIN
  FOR i IN 1..coalesce(array_length(b, 1), 0) LOOP
    sum[i] := coalesce(sum[i], 0) + coalesce(b[i], 0);
  END LOOP;
  RETURN sum;
END $$;

-- Usage rows are added to many times (an hour row by every flush of that
-- hour, of every replica): their partitions keep a third of each page free
-- (fillfactor 70), so that an addition can write the row's new version on
-- its own page without touching its indexes (a HOT update). The request log,
-- which is only appended to, keeps full pages.
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
                   CASE WHEN parent = 'request_log' THEN '' ELSE ' WITH (fillfactor = 70)' END);
  EXCEPTION WHEN duplicate_table OR unique_violation THEN
    -- Another replica made it at the same moment.
    NULL;
  END;
END $$;

DO $$
DECLARE
  part text;
BEGIN
  -- CREATE OR REPLACE drops the function's settings: its search path again, as 017 set it.
  EXECUTE format('ALTER FUNCTION usage_partition(text, text, timestamptz) SET search_path = %I, pg_temp', current_schema());
  FOR part IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent IN (to_regclass('usage_minutes'), to_regclass('usage_hours'), to_regclass('usage_days'))
  LOOP
    EXECUTE format('ALTER TABLE %I SET (fillfactor = 70)', part);
  END LOOP;
END $$;

-- Down Migration

CREATE OR REPLACE FUNCTION usage_add_histograms(a bigint[], b bigint[]) RETURNS bigint[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(coalesce(a[i], 0) + coalesce(b[i], 0) ORDER BY i), '{}')
    FROM generate_series(1, greatest(coalesce(array_length(a, 1), 0), coalesce(array_length(b, 1), 0))) AS i
$$;

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
