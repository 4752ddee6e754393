-- Up Migration

-- The key lifecycle past create, revoke and delete: expiry, roll with a grace
-- period, IP allowlists, where a key was last used from, and an audit trail
-- that tenants read. Safe on a populated database: every new column is
-- nullable or has a constant default (no table rewrite), existing keys keep
-- working exactly as before (no expiry, any address), and the rows of the old
-- audit table move to the new one before it is replaced by a view.

ALTER TABLE api_keys
  -- The instant from which the key is refused (an expiry chosen at creation,
  -- or the end of a roll's grace period); NULL: never.
  ADD COLUMN expires_at timestamptz,
  -- Client addresses the key may be used from; empty: any address.
  ADD COLUMN allowed_cidrs cidr[] NOT NULL DEFAULT '{}',
  -- The client address of the latest use, written with last_used_at.
  ADD COLUMN last_used_ip inet,
  -- Roll: the new key names the key it replaced, the old key its replacement.
  -- Plain references, not foreign keys: the record of a roll outlives either key.
  ADD COLUMN replaces uuid,
  ADD COLUMN replaced_by uuid,
  ADD CONSTRAINT api_keys_allowed_cidrs_bounded CHECK (cardinality(allowed_cidrs) <= 32),
  ADD CONSTRAINT api_keys_rolled_key_expires CHECK (replaced_by IS NULL OR expires_at IS NOT NULL);
-- A key is replaced at most once.
CREATE UNIQUE INDEX api_keys_replaces ON api_keys (replaces) WHERE replaces IS NOT NULL;

-- Scope, tenant, name, hash and what a key replaced are fixed at creation; a
-- revoked key stays revoked; an expiry is only ever brought forward (a roll),
-- never extended or removed; a rolled key stays rolled. The allowlist and the
-- last-use fields may change.
CREATE OR REPLACE FUNCTION api_keys_guard_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id <> OLD.id OR NEW.scope <> OLD.scope OR NEW.agency_id <> OLD.agency_id
     OR NEW.sub_account_id IS DISTINCT FROM OLD.sub_account_id OR NEW.name <> OLD.name
     OR NEW.key_hash <> OLD.key_hash OR NEW.hint <> OLD.hint
     OR NEW.created_at <> OLD.created_at OR NEW.created_by <> OLD.created_by
     OR NEW.replaces IS DISTINCT FROM OLD.replaces THEN
    RAISE EXCEPTION 'api key % : scope, tenant, name and hash never change', OLD.id;
  END IF;
  IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
    RAISE EXCEPTION 'api key % : a revoked key cannot be restored', OLD.id;
  END IF;
  IF NEW.expires_at IS DISTINCT FROM OLD.expires_at
     AND (NEW.expires_at IS NULL OR (OLD.expires_at IS NOT NULL AND NEW.expires_at > OLD.expires_at)) THEN
    RAISE EXCEPTION 'api key % : an expiry is only ever brought forward, never extended or removed', OLD.id;
  END IF;
  IF OLD.replaced_by IS NOT NULL AND NEW.replaced_by IS DISTINCT FROM OLD.replaced_by THEN
    RAISE EXCEPTION 'api key % : a rolled key stays rolled', OLD.id;
  END IF;
  RETURN NEW;
END $$;

-- The invalidation log also carries changes of what the gateways cache about
-- a key (its expiry, its allowlist): 'changed', which every replica answers
-- by forgetting the key, so the next request reads it again.
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

-- The audit trail: every key event and every sub-account creation or
-- deletion, with who did it (a console user, an operator through ctl, or an
-- API key) and from which client address. Append-only: UPDATE, DELETE and
-- TRUNCATE are refused by trigger. It never holds a plaintext key or a hash,
-- and it outlives the keys, sub-accounts and users it speaks of (no foreign keys).
CREATE TABLE audit_events (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- Insertion order, for readers that want it (the api_key_events view).
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  type text NOT NULL CHECK (type IN ('key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated', 'sub-account.created', 'sub-account.deleted')),
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  actor_kind text NOT NULL CHECK (actor_kind IN ('user', 'cli', 'key')),
  actor_id text NOT NULL CHECK (length(actor_id) BETWEEN 1 AND 200),
  agency_id uuid NOT NULL,
  sub_account_id uuid,
  key_id uuid,
  -- The key's name and scope at the time, for people reading the trail after the key is gone.
  key_name text,
  scope text CHECK (scope IN ('AGENCY', 'SUB-ACCOUNT')),
  client_address inet,
  CHECK ((type LIKE 'key.%') = (key_id IS NOT NULL)),
  CHECK (type NOT LIKE 'sub-account.%' OR sub_account_id IS NOT NULL)
);
-- Lists are newest first, per agency, sub-account or key.
CREATE INDEX audit_events_by_agency ON audit_events (agency_id, at DESC, id DESC);
CREATE INDEX audit_events_by_sub_account ON audit_events (sub_account_id, at DESC, id DESC) WHERE sub_account_id IS NOT NULL;
CREATE INDEX audit_events_by_key ON audit_events (key_id, at DESC, id DESC) WHERE key_id IS NOT NULL;

-- The rows of the old audit table, in their order, with their actors read as
-- the code wrote them: `user:<id>`, `api-key:<id>`, anything else an operator.
INSERT INTO audit_events (type, at, actor_kind, actor_id, agency_id, sub_account_id, key_id, key_name, scope)
SELECT 'key.' || event, occurred_at,
       CASE WHEN actor LIKE 'user:_%' THEN 'user' WHEN actor LIKE 'api-key:_%' THEN 'key' ELSE 'cli' END,
       CASE WHEN actor LIKE 'user:_%' THEN substr(actor, 6) WHEN actor LIKE 'api-key:_%' THEN substr(actor, 9) ELSE left(actor, 200) END,
       agency_id, sub_account_id, key_id, key_name, scope
  FROM api_key_events ORDER BY id;
DROP TABLE api_key_events;

CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_events is append-only: % is refused', TG_OP;
END $$;
-- Statement triggers: even a statement that would touch no row is refused.
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

-- The old table's shape, read from the new one, for readers written against it.
CREATE VIEW api_key_events AS
SELECT seq AS id, key_id, substr(type, 5) AS event,
       CASE actor_kind WHEN 'user' THEN 'user:' || actor_id WHEN 'key' THEN 'api-key:' || actor_id ELSE actor_id END AS actor,
       scope, agency_id, sub_account_id, key_name, at AS occurred_at
  FROM audit_events WHERE type LIKE 'key.%';

-- Down Migration

DROP VIEW api_key_events;
CREATE TABLE api_key_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  key_id uuid NOT NULL,
  event text NOT NULL CHECK (event IN ('created', 'revoked', 'deleted')),
  actor text NOT NULL,
  scope text NOT NULL,
  agency_id uuid NOT NULL,
  sub_account_id uuid,
  key_name text NOT NULL,
  occurred_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_key_events_by_key ON api_key_events (key_id, occurred_at);
CREATE INDEX api_key_events_by_agency ON api_key_events (agency_id, occurred_at);
INSERT INTO api_key_events (key_id, event, actor, scope, agency_id, sub_account_id, key_name, occurred_at)
SELECT key_id, substr(type, 5),
       CASE actor_kind WHEN 'user' THEN 'user:' || actor_id WHEN 'key' THEN 'api-key:' || actor_id ELSE actor_id END,
       scope, agency_id, sub_account_id, key_name, at
  FROM audit_events WHERE type IN ('key.created', 'key.revoked', 'key.deleted') AND scope IS NOT NULL AND key_name IS NOT NULL
 ORDER BY seq;
DROP TABLE audit_events;
DROP FUNCTION audit_events_append_only();

CREATE OR REPLACE FUNCTION api_keys_record_invalidation() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION api_keys_guard_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id <> OLD.id OR NEW.scope <> OLD.scope OR NEW.agency_id <> OLD.agency_id
     OR NEW.sub_account_id IS DISTINCT FROM OLD.sub_account_id OR NEW.name <> OLD.name
     OR NEW.key_hash <> OLD.key_hash OR NEW.hint <> OLD.hint
     OR NEW.created_at <> OLD.created_at OR NEW.created_by <> OLD.created_by THEN
    RAISE EXCEPTION 'api key % : scope, tenant, name and hash never change', OLD.id;
  END IF;
  IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
    RAISE EXCEPTION 'api key % : a revoked key cannot be restored', OLD.id;
  END IF;
  RETURN NEW;
END $$;

DROP INDEX api_keys_replaces;
ALTER TABLE api_keys
  DROP CONSTRAINT api_keys_rolled_key_expires,
  DROP CONSTRAINT api_keys_allowed_cidrs_bounded,
  DROP COLUMN replaced_by,
  DROP COLUMN replaces,
  DROP COLUMN last_used_ip,
  DROP COLUMN allowed_cidrs,
  DROP COLUMN expires_at;
