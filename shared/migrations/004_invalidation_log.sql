-- Up Migration

-- The record of invalidations: every revoke and delete of a key writes a row
-- here in its own transaction (by trigger, whichever code path did it), so
-- Postgres is both the source of truth and the backstop that every gateway
-- replica follows, whatever Redis is doing. `xid` is the writing
-- transaction's id: a replica reads "the rows committed since the snapshot I
-- last applied" exactly, with pg_visible_in_snapshot, without relying on ids
-- or clocks being committed in order.
CREATE TABLE key_invalidations (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  key_hash text NOT NULL CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  state text NOT NULL CHECK (state IN ('revoked', 'deleted', 'changed')),
  recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX key_invalidations_by_xid ON key_invalidations (xid);
CREATE INDEX key_invalidations_by_time ON key_invalidations (recorded_at);

CREATE FUNCTION api_keys_record_invalidation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (OLD.key_hash, 'deleted');
    RETURN OLD;
  END IF;
  IF OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (NEW.key_hash, 'revoked');
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER api_keys_record_invalidation AFTER UPDATE OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_record_invalidation();

-- Old rows are of no use to anyone: a replica that has not polled for this
-- long distrusted its caches long ago, and Redis entries live minutes.
CREATE FUNCTION key_invalidations_prune() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM key_invalidations WHERE recorded_at < now() - interval '1 day';
  DELETE FROM gateway_replicas WHERE seen_at < now() - interval '1 day';
  RETURN NULL;
END $$;

-- Every gateway replica, with the last invalidation snapshot it has applied
-- and when it last said so. A revoker waits until every replica seen
-- recently has applied its transaction (or has stopped being seen, and so
-- has stopped trusting its caches): confirmation without Redis.
CREATE TABLE gateway_replicas (
  replica_id text PRIMARY KEY CHECK (length(replica_id) BETWEEN 1 AND 200),
  seen_at timestamptz NOT NULL,
  applied_snapshot pg_snapshot NOT NULL
);

CREATE TRIGGER key_invalidations_prune AFTER INSERT ON key_invalidations
  FOR EACH STATEMENT EXECUTE FUNCTION key_invalidations_prune();

-- Down Migration

DROP TRIGGER key_invalidations_prune ON key_invalidations;
DROP TABLE gateway_replicas;
DROP FUNCTION key_invalidations_prune();
DROP TRIGGER api_keys_record_invalidation ON api_keys;
DROP FUNCTION api_keys_record_invalidation();
DROP TABLE key_invalidations;
