-- Up Migration

-- Least privilege. The role that runs the migrations (the DATABASE_URL of
-- `ctl migrate`, the migration Job) owns every table, function and trigger;
-- each service connects as a login that is a member of exactly one of these
-- NOLOGIN group roles, which hold only the grants that service needs:
--
--   scoped_gateway   reads keys, tombstones and the invalidation log; keeps
--                    its row in gateway_replicas; writes last use (the
--                    last_used_at and last_used_ip columns, nothing else)
--   scoped_resource  its own tables (agents, contacts, calls); reads
--                    sub_accounts
--   scoped_agency    tenancy, users, console, keys; appends to and reads the
--                    audit trail, never changes or removes a row of it
--
-- Roles belong to the whole server, not to one database: they are made when
-- missing (several databases on one server share them), and never dropped
-- here. The grants are explicit, table by table, and follow the schema: a
-- migration that adds a table grants on it in the same file (ALTER DEFAULT
-- PRIVILEGES would miss tables made by another role or before it), and
-- test/shared/database-roles.test.ts fails on a table that no role's grants
-- were decided for. docs/operations.md ("Database roles") has the logins.

DO $$
DECLARE
  name text;
BEGIN
  FOREACH name IN ARRAY ARRAY['scoped_gateway', 'scoped_resource', 'scoped_agency'] LOOP
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = name) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', name);
      EXCEPTION WHEN duplicate_object OR unique_violation THEN
        -- Another database on this server made it at the same moment.
        NULL;
      END;
    END IF;
  END LOOP;
END $$;

-- Connecting, and resolving names in the schema. PUBLIC usually has both
-- already; a migrator that does not own the database or the schema only gets
-- a notice here, and the deployment grants them (docs/operations.md).
-- Nobody but the owner creates objects in the schema (the default since
-- Postgres 15; older servers let PUBLIC create).
DO $$
BEGIN
  BEGIN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO scoped_gateway, scoped_resource, scoped_agency', current_database());
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO scoped_gateway, scoped_resource, scoped_agency', current_schema());
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'least privilege: could not grant CONNECT and USAGE or revoke CREATE (%); see docs/operations.md, "Database roles"', SQLERRM;
  END;
END $$;

-- The gateway.
GRANT SELECT ON api_keys, deleted_api_keys, key_invalidations TO scoped_gateway;
GRANT UPDATE (last_used_at, last_used_ip) ON api_keys TO scoped_gateway;
GRANT SELECT, INSERT, UPDATE, DELETE ON gateway_replicas TO scoped_gateway;

-- resource-service.
GRANT SELECT, INSERT, UPDATE, DELETE ON agents, contacts, calls TO scoped_resource;
GRANT SELECT ON sub_accounts TO scoped_resource;
GRANT SELECT ON schema_migrations TO scoped_resource;

-- agency-service and ctl. UPDATE on agencies: key creation locks the agency
-- row (SELECT … FOR NO KEY UPDATE), which Postgres allows only with UPDATE.
GRANT SELECT, INSERT, UPDATE ON agencies TO scoped_agency;
GRANT SELECT, INSERT, UPDATE, DELETE ON sub_accounts TO scoped_agency;
GRANT SELECT, INSERT, UPDATE ON users TO scoped_agency;
GRANT SELECT, INSERT ON agency_memberships, sub_account_memberships TO scoped_agency;
GRANT SELECT, INSERT, UPDATE, DELETE ON api_keys TO scoped_agency;
GRANT SELECT, INSERT, UPDATE, DELETE ON console_sessions, console_sign_in_failures, console_key_reveals TO scoped_agency;
GRANT SELECT ON gateway_replicas TO scoped_agency;
-- The audit trail: appended to and read, never changed, removed or truncated.
GRANT SELECT, INSERT ON audit_events TO scoped_agency;
GRANT SELECT ON schema_migrations TO scoped_agency;

-- The triggers that write beyond the row they fire on (the tombstone of a
-- deleted key, the invalidation log and its pruning of old log rows and
-- replicas) run as the owner, so no service needs to write those tables
-- itself: a revoke or delete by agency-service still leaves its record.
DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['api_keys_tombstone()', 'api_keys_record_invalidation()', 'key_invalidations_prune()'] LOOP
    EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', fn, current_schema());
  END LOOP;
END $$;

-- TRUNCATE would remove keys without a tombstone or a log entry (row
-- triggers do not fire on it), and the gateways would go on believing them:
-- refused for everyone, the owner included. Delete keys one by one instead.
CREATE FUNCTION api_keys_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'api_keys cannot be truncated: delete keys with DELETE (or ctl key delete), which leaves their tombstones and invalidations';
END $$;
CREATE TRIGGER api_keys_refuse_truncate BEFORE TRUNCATE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION api_keys_refuse_truncate();

-- Every field of a revocation is final: once a key is revoked, neither when
-- nor by whom changes (api_keys_guard_immutable keeps the rest).
CREATE FUNCTION api_keys_guard_revocation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.revoked_at IS NOT NULL AND (NEW.revoked_at IS DISTINCT FROM OLD.revoked_at OR NEW.revoked_by IS DISTINCT FROM OLD.revoked_by) THEN
    RAISE EXCEPTION 'api key % : a revocation (revoked_at, revoked_by) never changes', OLD.id;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER api_keys_guard_revocation BEFORE UPDATE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_guard_revocation();

-- Down Migration

DROP TRIGGER api_keys_guard_revocation ON api_keys;
DROP FUNCTION api_keys_guard_revocation();
DROP TRIGGER api_keys_refuse_truncate ON api_keys;
DROP FUNCTION api_keys_refuse_truncate();
ALTER FUNCTION api_keys_tombstone() SECURITY INVOKER RESET search_path;
ALTER FUNCTION api_keys_record_invalidation() SECURITY INVOKER RESET search_path;
ALTER FUNCTION key_invalidations_prune() SECURITY INVOKER RESET search_path;
REVOKE ALL ON agencies, sub_accounts, users, agency_memberships, sub_account_memberships, api_keys, deleted_api_keys,
  audit_events, agents, contacts, calls, console_sessions, console_sign_in_failures, console_key_reveals,
  key_invalidations, gateway_replicas, schema_migrations
  FROM scoped_gateway, scoped_resource, scoped_agency;
DO $$
BEGIN
  EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM scoped_gateway, scoped_resource, scoped_agency', current_database());
  EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM scoped_gateway, scoped_resource, scoped_agency', current_schema());
EXCEPTION WHEN insufficient_privilege THEN
  NULL;
END $$;
-- The roles stay: other databases on this server may use them.
