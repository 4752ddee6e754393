-- Up Migration

-- Key permissions (issue 30): a key either has no list (NULL: unrestricted,
-- every permission of its scope, as before) or a list of `<resource>:read`
-- and `<resource>:write` names, sorted and each once (agency-service writes
-- them so, checked against the routes file). The list joins what the
-- gateways cache about a key (api_keys_state, migration 009), so a change of
-- it bumps the state version and reaches every replica exactly as a revoke
-- does. Safe on a populated database: a nullable column (no table rewrite)
-- and a function replaced in place; every existing key stays unrestricted.
ALTER TABLE api_keys ADD COLUMN permissions text[];
ALTER TABLE api_keys ADD CONSTRAINT api_keys_permissions_check CHECK (
  permissions IS NULL OR (
    cardinality(permissions) <= 64
    AND array_position(permissions, NULL) IS NULL
    AND array_to_string(permissions, ',', '') ~ '^([a-z0-9][a-z0-9-]{0,63}:(read|write)(,[a-z0-9][a-z0-9-]{0,63}:(read|write))*)?$'
  )
);

CREATE OR REPLACE FUNCTION api_keys_state(k api_keys) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_array(k.revoked_at, k.expires_at, k.allowed_cidrs, k.rate_limit_rate, k.rate_limit_burst, k.replaced_by, k.permissions)
$$;

-- A key may be renamed (PATCH .../keys/:keyId {name}, with the permissions):
-- migration 005's guard without the name; scope, tenant, hash and what a key
-- replaced still never change.
CREATE OR REPLACE FUNCTION api_keys_guard_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id <> OLD.id OR NEW.scope <> OLD.scope OR NEW.agency_id <> OLD.agency_id
     OR NEW.sub_account_id IS DISTINCT FROM OLD.sub_account_id
     OR NEW.key_hash <> OLD.key_hash OR NEW.hint <> OLD.hint
     OR NEW.created_at <> OLD.created_at OR NEW.created_by <> OLD.created_by
     OR NEW.replaces IS DISTINCT FROM OLD.replaces THEN
    RAISE EXCEPTION 'api key % : scope, tenant and hash never change', OLD.id;
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

-- Down Migration

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

CREATE OR REPLACE FUNCTION api_keys_state(k api_keys) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_array(k.revoked_at, k.expires_at, k.allowed_cidrs, k.rate_limit_rate, k.rate_limit_burst, k.replaced_by)
$$;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_permissions_check;
ALTER TABLE api_keys DROP COLUMN permissions;
