-- Up Migration

-- A version of what the gateways cache about each key, so that every change
-- of it holds on every replica as a revoke does: the version goes inside the
-- sealed Redis entry (its MAC), every 'changed' row of the invalidation log
-- carries the version the change made, and each replica refuses an entry, or
-- a lookup that raced the change, older than the newest version it has heard
-- of. Safe on a populated database: a column with a constant default (no
-- table rewrite); every existing key starts at version 1.
ALTER TABLE api_keys ADD COLUMN state_version bigint NOT NULL DEFAULT 1;
ALTER TABLE key_invalidations ADD COLUMN state_version bigint;

-- What the gateways cache about a key, as one value: a change of any of it
-- is a change of the key's state. The one place to name a column that joins
-- the state (a later `permissions`, say): the version and the log follow.
CREATE FUNCTION api_keys_state(k api_keys) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_array(k.revoked_at, k.expires_at, k.allowed_cidrs, k.rate_limit_rate, k.rate_limit_burst, k.replaced_by)
$$;

-- The version moves by one with every change of the state, and never
-- otherwise: nobody sets it by hand (a write of it alone is undone).
CREATE FUNCTION api_keys_bump_state_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF api_keys_state(NEW) IS DISTINCT FROM api_keys_state(OLD) THEN
    NEW.state_version := OLD.state_version + 1;
  ELSE
    NEW.state_version := OLD.state_version;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER api_keys_state_version BEFORE UPDATE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_bump_state_version();

-- A new key starts at 1 whatever the insert says.
CREATE FUNCTION api_keys_first_state_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.state_version := 1;
  RETURN NEW;
END $$;
CREATE TRIGGER api_keys_first_state_version BEFORE INSERT ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_first_state_version();

-- The log: a revoke and a delete as before; any other change of the state is
-- 'changed', with the version it made (the AFTER trigger sees the bumped row).
CREATE OR REPLACE FUNCTION api_keys_record_invalidation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (OLD.key_hash, 'deleted');
    RETURN OLD;
  END IF;
  IF OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (NEW.key_hash, 'revoked');
  ELSIF NEW.state_version <> OLD.state_version THEN
    INSERT INTO key_invalidations (key_hash, state, state_version) VALUES (NEW.key_hash, 'changed', NEW.state_version);
  END IF;
  RETURN NEW;
END $$;
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION api_keys_record_invalidation() SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END $$;

-- Down Migration

CREATE OR REPLACE FUNCTION api_keys_record_invalidation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (OLD.key_hash, 'deleted');
    RETURN OLD;
  END IF;
  IF OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (NEW.key_hash, 'revoked');
  ELSIF NEW.expires_at IS DISTINCT FROM OLD.expires_at OR NEW.allowed_cidrs IS DISTINCT FROM OLD.allowed_cidrs
     OR NEW.rate_limit_rate IS DISTINCT FROM OLD.rate_limit_rate OR NEW.rate_limit_burst IS DISTINCT FROM OLD.rate_limit_burst THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (NEW.key_hash, 'changed');
  END IF;
  RETURN NEW;
END $$;
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION api_keys_record_invalidation() SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END $$;
DROP TRIGGER api_keys_first_state_version ON api_keys;
DROP FUNCTION api_keys_first_state_version();
DROP TRIGGER api_keys_state_version ON api_keys;
DROP FUNCTION api_keys_bump_state_version();
DROP FUNCTION api_keys_state(api_keys);
ALTER TABLE key_invalidations DROP COLUMN state_version;
ALTER TABLE api_keys DROP COLUMN state_version;
