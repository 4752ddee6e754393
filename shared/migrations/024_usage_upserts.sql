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

-- Down Migration

CREATE OR REPLACE FUNCTION usage_add_histograms(a bigint[], b bigint[]) RETURNS bigint[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(coalesce(a[i], 0) + coalesce(b[i], 0) ORDER BY i), '{}')
    FROM generate_series(1, greatest(coalesce(array_length(a, 1), 0), coalesce(array_length(b, 1), 0))) AS i
$$;
