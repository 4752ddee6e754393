-- Up Migration

-- A key's own rate limit: a token bucket (rate tokens per second, burst at
-- most) that replaces the route's `key` limit for this key, on every route of
-- its scope (the gateway's rate-limit-headers.ts). NULL (both): the routes
-- file decides, as before. Safe on a populated database: nullable columns
-- without a default (no table rewrite); every existing key keeps the route
-- defaults. The bounds are those of the routes file (shared/src/rate-limit.ts).
--
-- Grants: none to add. The gateway reads api_keys through its table-level
-- SELECT (006), which covers new columns, and still updates only last use;
-- agency-service's table-level UPDATE covers them too. The immutability guard
-- (005) lists what never changes, so these may change like the allowlist.

ALTER TABLE api_keys
  ADD COLUMN rate_limit_rate double precision,
  ADD COLUMN rate_limit_burst integer,
  ADD CONSTRAINT api_keys_rate_limit_whole CHECK ((rate_limit_rate IS NULL) = (rate_limit_burst IS NULL)),
  -- NaN passes `> 0` in Postgres (it sorts above every number) but not `<= 1000000`.
  ADD CONSTRAINT api_keys_rate_limit_rate CHECK (rate_limit_rate > 0 AND rate_limit_rate <= 1000000),
  ADD CONSTRAINT api_keys_rate_limit_burst CHECK (rate_limit_burst BETWEEN 1 AND 10000000);

-- A change of the limit is a change of what the gateways cache about the key,
-- like its expiry or allowlist: 'changed' in the invalidation log, which every
-- replica answers by forgetting the key, so its next request reads the new
-- limit. The function keeps 006's SECURITY DEFINER and search_path (CREATE OR
-- REPLACE resets both, so they are set again below).
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

-- Down Migration

CREATE OR REPLACE FUNCTION api_keys_record_invalidation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (OLD.key_hash, 'deleted');
    RETURN OLD;
  END IF;
  IF OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (NEW.key_hash, 'revoked');
  ELSIF NEW.expires_at IS DISTINCT FROM OLD.expires_at OR NEW.allowed_cidrs IS DISTINCT FROM OLD.allowed_cidrs THEN
    INSERT INTO key_invalidations (key_hash, state) VALUES (NEW.key_hash, 'changed');
  END IF;
  RETURN NEW;
END $$;
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION api_keys_record_invalidation() SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END $$;

ALTER TABLE api_keys
  DROP CONSTRAINT api_keys_rate_limit_burst,
  DROP CONSTRAINT api_keys_rate_limit_rate,
  DROP CONSTRAINT api_keys_rate_limit_whole,
  DROP COLUMN rate_limit_burst,
  DROP COLUMN rate_limit_rate;
