-- Up Migration

-- Every gateway replica keeps a filter of every issued key's hash and answers
-- a key outside it 401 from memory, without a store lookup (docs/operations.md,
-- "Issued-key filter"). A replica learns of a new key as it learns of a
-- revoked one: through the invalidation log (and the Redis fast path), so a
-- creation waits, as a revoke does, until every live replica has applied it.
-- The log therefore records creations too: 'created', by a trigger of its own,
-- whichever code path inserted the key. Safe on a populated database: a
-- constraint swapped in place and a new trigger; no rows are touched.
ALTER TABLE key_invalidations DROP CONSTRAINT key_invalidations_state_check;
ALTER TABLE key_invalidations ADD CONSTRAINT key_invalidations_state_check
  CHECK (state IN ('revoked', 'deleted', 'changed', 'created'));

-- Runs as the owner (as 006 does for the other log writers), so agency-service
-- needs no write access to the log.
CREATE FUNCTION api_keys_record_creation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO key_invalidations (key_hash, state) VALUES (NEW.key_hash, 'created');
  RETURN NEW;
END $$;
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION api_keys_record_creation() SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END $$;
CREATE TRIGGER api_keys_record_creation AFTER INSERT ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_record_creation();

-- The gateway loads every issued hash at start, keyset-paged by hash: both
-- tables are indexed by key_hash already (a unique index and a primary key).

-- Down Migration

DROP TRIGGER api_keys_record_creation ON api_keys;
DROP FUNCTION api_keys_record_creation();
DELETE FROM key_invalidations WHERE state = 'created';
ALTER TABLE key_invalidations DROP CONSTRAINT key_invalidations_state_check;
ALTER TABLE key_invalidations ADD CONSTRAINT key_invalidations_state_check
  CHECK (state IN ('revoked', 'deleted', 'changed'));
