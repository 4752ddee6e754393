-- Up Migration

CREATE TABLE agencies (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sub_accounts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  agency_id uuid NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sub_accounts_by_agency ON sub_accounts (agency_id, created_at, id);

CREATE TABLE users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- Stored lower-cased, so uniqueness ignores case.
  email text NOT NULL UNIQUE CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  password_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agency_memberships (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  agency_id uuid NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  PRIMARY KEY (user_id, agency_id)
);

CREATE TABLE sub_account_memberships (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  sub_account_id uuid NOT NULL REFERENCES sub_accounts (id) ON DELETE CASCADE,
  PRIMARY KEY (user_id, sub_account_id)
);

-- API keys. Only the SHA-256 hash of a key and a display hint are stored;
-- the plaintext exists only in the answer to its creation.
CREATE TABLE api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  scope text NOT NULL CHECK (scope IN ('AGENCY', 'SUB-ACCOUNT')),
  agency_id uuid NOT NULL REFERENCES agencies (id) ON DELETE RESTRICT,
  -- RESTRICT: a sub-account's keys must be deleted through the key service
  -- (which invalidates gateway caches) before the sub-account can go.
  sub_account_id uuid REFERENCES sub_accounts (id) ON DELETE RESTRICT,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  key_hash text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  hint text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  revoked_at timestamptz,
  revoked_by text,
  last_used_at timestamptz,
  CHECK ((scope = 'AGENCY') = (sub_account_id IS NULL)),
  CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);
-- The active-key count per tenant, for the limit of 25.
CREATE INDEX api_keys_active_agency ON api_keys (agency_id) WHERE revoked_at IS NULL AND scope = 'AGENCY';
CREATE INDEX api_keys_active_sub_account ON api_keys (sub_account_id) WHERE revoked_at IS NULL;
CREATE INDEX api_keys_by_sub_account ON api_keys (sub_account_id, created_at);
CREATE INDEX api_keys_by_agency ON api_keys (agency_id, created_at);

-- Scope, tenant, name and hash are fixed at creation; a revoked key stays revoked.
CREATE FUNCTION api_keys_guard_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER api_keys_immutable BEFORE UPDATE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_guard_immutable();

-- A deleted key's record is gone, but its hash stays here (hash and time
-- only), so presenting it still reads "Invalid or revoked API key".
CREATE TABLE deleted_api_keys (
  key_hash text PRIMARY KEY,
  deleted_at timestamptz NOT NULL DEFAULT now()
);

-- Every deletion leaves a tombstone, whichever code path deleted the row.
CREATE FUNCTION api_keys_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deleted_api_keys (key_hash) VALUES (OLD.key_hash) ON CONFLICT DO NOTHING;
  RETURN OLD;
END $$;
CREATE TRIGGER api_keys_tombstone AFTER DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_tombstone();

-- Audit trail of key lifecycle; it outlives the keys it speaks of.
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

-- Down Migration

DROP TABLE api_key_events;
DROP TABLE deleted_api_keys;
DROP TABLE api_keys;
DROP FUNCTION api_keys_tombstone();
DROP FUNCTION api_keys_guard_immutable();
DROP TABLE sub_account_memberships;
DROP TABLE agency_memberships;
DROP TABLE users;
DROP TABLE sub_accounts;
DROP TABLE agencies;
