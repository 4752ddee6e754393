-- Up Migration

-- The request log (issue 31): every refused request of a key and every 5xx
-- answer (REQUEST_LOG=errors, the default), or every request of a key
-- (REQUEST_LOG=all), written by the gateway in the same batches as its usage
-- counts. Never a key, a body, a query string or a header value: the path is
-- the normalized path without its query, masked as the gateway's log lines
-- are. Partitioned by day, so the age bound drops whole partitions; the row
-- cap per agency (request_log_trim) drops its oldest rows first, so one
-- tenant's flood cannot fill the database or push out another tenant's rows.

CREATE TABLE request_log (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  at timestamptz NOT NULL,
  request_id text NOT NULL CHECK (length(request_id) BETWEEN 1 AND 200),
  agency_id uuid NOT NULL,
  key_id uuid NOT NULL,
  sub_account_id uuid,
  method text NOT NULL CHECK (length(method) BETWEEN 1 AND 16),
  path text NOT NULL CHECK (length(path) <= 300),
  status smallint NOT NULL,
  outcome text NOT NULL,
  duration_ms double precision NOT NULL,
  client_address text,
  PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
CREATE INDEX request_log_agency ON request_log (agency_id, at DESC, id DESC);
CREATE INDEX request_log_sub_account ON request_log (sub_account_id, at DESC, id DESC) WHERE sub_account_id IS NOT NULL;

-- Every day partition rows from `first` to `last` need.
CREATE FUNCTION request_log_prepare(first timestamptz, last timestamptz) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  day timestamptz;
BEGIN
  IF last < first OR last - first > interval '31 days' THEN
    RAISE EXCEPTION 'request_log_prepare: a batch spans % to %', first, last;
  END IF;
  day := date_trunc('day', first, 'UTC');
  WHILE day <= last LOOP
    PERFORM usage_partition('request_log', 'day', day);
    day := day + interval '1 day';
  END LOOP;
END $$;

-- Keeps each of `agencies` to its newest `cap` rows.
CREATE FUNCTION request_log_trim(agencies uuid[], cap integer) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  agency uuid;
  edge record;
BEGIN
  FOREACH agency IN ARRAY agencies LOOP
    SELECT at, id INTO edge FROM request_log WHERE agency_id = agency ORDER BY at DESC, id DESC OFFSET cap LIMIT 1;
    IF FOUND THEN
      DELETE FROM request_log WHERE agency_id = agency AND (at, id) <= (edge.at, edge.id);
    END IF;
  END LOOP;
END $$;

-- The age bound: whole day partitions past it go.
CREATE FUNCTION request_log_expire(max_age interval) RETURNS integer
  LANGUAGE sql SECURITY DEFINER AS $$
  SELECT usage_drop_before('request_log', 'day', now() - max_age);
$$;

DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['request_log_prepare(timestamptz, timestamptz)', 'request_log_trim(uuid[], integer)', 'request_log_expire(interval)'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
  END LOOP;
END $$;

REVOKE ALL ON FUNCTION request_log_prepare(timestamptz, timestamptz), request_log_trim(uuid[], integer), request_log_expire(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION request_log_prepare(timestamptz, timestamptz), request_log_trim(uuid[], integer), request_log_expire(interval) TO scoped_gateway;
GRANT INSERT ON request_log TO scoped_gateway;
GRANT SELECT ON request_log TO scoped_agency;

-- Down Migration

DROP FUNCTION request_log_expire(interval);
DROP FUNCTION request_log_trim(uuid[], integer);
DROP FUNCTION request_log_prepare(timestamptz, timestamptz);
DROP TABLE request_log;
