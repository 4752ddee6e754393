-- Up Migration

-- Liveness from the database's clock. A revoker waits for every gateway
-- replica seen recently (gateway_replicas.seen_at); with write access to that
-- column, a gateway login could register a replica "seen" years ahead and
-- make every revoke, roll and update wait out its deadline and answer 503.
-- Now Postgres stamps every heartbeat itself: the gateway's role keeps its
-- row only through the functions below (SECURITY DEFINER, the owner's
-- rights), which write now() and nothing the caller chooses, and a trigger
-- stamps any other writer's row the same way. Readers also ignore a row
-- stamped ahead of the database's clock (key-store.ts), so a row left by an
-- older build or a clock that stepped back cannot hold a change either.

CREATE FUNCTION gateway_replicas_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.seen_at := now();
  RETURN NEW;
END $$;
CREATE TRIGGER gateway_replicas_stamp BEFORE INSERT OR UPDATE ON gateway_replicas
  FOR EACH ROW EXECUTE FUNCTION gateway_replicas_stamp();

-- One heartbeat: this replica has applied everything visible in `applied`.
-- Answers how many replicas the registry holds as live within `live_ms`,
-- this one included (the rate limiter's fallback shares limits among them).
CREATE FUNCTION gateway_replica_heartbeat(replica text, applied pg_snapshot, live_ms integer) RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  live integer;
BEGIN
  INSERT INTO gateway_replicas (replica_id, seen_at, applied_snapshot) VALUES (replica, now(), applied)
  ON CONFLICT (replica_id) DO UPDATE SET seen_at = now(), applied_snapshot = excluded.applied_snapshot;
  SELECT count(*)::int INTO live FROM gateway_replicas
   WHERE seen_at > now() - live_ms * interval '1 millisecond' AND seen_at <= clock_timestamp();
  RETURN live;
END $$;

-- A replica that stops cleanly leaves the registry.
CREATE FUNCTION gateway_replica_leave(replica text) RETURNS void
  LANGUAGE sql SECURITY DEFINER AS $$
  DELETE FROM gateway_replicas WHERE replica_id = replica;
$$;

DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['gateway_replica_heartbeat(text, pg_snapshot, integer)', 'gateway_replica_leave(text)', 'gateway_replicas_stamp()'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
  END LOOP;
END $$;

-- Functions are executable by PUBLIC unless told otherwise: only the gateway
-- keeps a heartbeat.
REVOKE ALL ON FUNCTION gateway_replica_heartbeat(text, pg_snapshot, integer), gateway_replica_leave(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gateway_replica_heartbeat(text, pg_snapshot, integer), gateway_replica_leave(text) TO scoped_gateway;
REVOKE INSERT, UPDATE, DELETE ON gateway_replicas FROM scoped_gateway;

-- Down Migration

GRANT INSERT, UPDATE, DELETE ON gateway_replicas TO scoped_gateway;
DROP FUNCTION gateway_replica_leave(text);
DROP FUNCTION gateway_replica_heartbeat(text, pg_snapshot, integer);
DROP TRIGGER gateway_replicas_stamp ON gateway_replicas;
DROP FUNCTION gateway_replicas_stamp();
