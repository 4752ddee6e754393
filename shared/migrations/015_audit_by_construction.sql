-- Up Migration

-- The audit trail, complete by construction and tamper-evident.
--
-- 1. Triggers write the events. Every change to api_keys, sub_accounts,
--    users, agency_memberships, sub_account_memberships and every new
--    console session leaves its event, whichever path made it (a service,
--    ctl, or psql with a service's login). The triggers are deferred to the
--    commit, so the code that made the change has said by then who did it:
--    recordAuditEvent no longer inserts, it declares (audit_declare) the event
--    with its actor and what it knows beside (the user's role, the key's name).
--    A change meets the declaration of its type and subject and is written
--    with it; a change that nobody declared is written all the same, with the
--    transaction's actor (scoped.actor, set by the first declaration or by the
--    service) or, when there is none, as actor kind `unattributed` named by
--    the database login. An update carries `changes`: the before and after of
--    each column that changed, never a hash, a secret or a volatile column.
-- 2. Nothing else writes the trail. The services lose INSERT on audit_events:
--    only these SECURITY DEFINER functions write it. A declaration of an event
--    that stands for a table change (key.created, user.signed-in, …) writes
--    nothing by itself: `user.signed-in` exists only with the session row it
--    records. Events with no table change (user.sign-in-refused, and any type
--    a later migration adds, such as key.leaked) are written from their
--    declaration.
-- 3. A hash chain per agency: each event carries chain_seq (its place in its
--    agency's trail), prev_hash (the hash of the event before it, '' for the
--    first) and hash (sha256 over a canonical encoding of the event and
--    prev_hash, audit_event_digest). Appending takes a transaction-level
--    advisory lock on the agency, and (agency_id, chain_seq) is unique, so
--    concurrent writers cannot fork a chain. `ctl audit verify` recomputes it.
--
-- Safe on a populated database: the existing events are chained here, in
-- their order, with the append-only trigger off for this one update.

ALTER TABLE audit_events
  -- The before and after of each changed column of an update (NULL for other events).
  ADD COLUMN changes jsonb,
  -- The database login that wrote the change (session_user): what the database knows, whatever actor was declared.
  ADD COLUMN database_login text,
  ADD COLUMN chain_seq bigint,
  ADD COLUMN prev_hash text,
  ADD COLUMN hash text;

ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_kind_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_actor_kind_check CHECK (actor_kind IN ('user', 'cli', 'key', 'unattributed'));
ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.updated', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.added', 'membership.removed'
));

-- The canonical encoding: each field as text (NULL as `~`), prefixed by its
-- length in bytes, in this order; the hash is sha256 of it in hex.
-- agency-service/src/audit/audit-chain.ts recomputes it from the same texts.
CREATE FUNCTION audit_event_digest(e audit_events) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT encode(sha256(convert_to(string_agg(CASE WHEN f IS NULL THEN '~' ELSE octet_length(f)::text || ':' || f END, '|' ORDER BY n), 'UTF8')), 'hex')
    FROM unnest(ARRAY[
      e.id::text, e.agency_id::text, e.chain_seq::text, e.type,
      to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
      e.actor_kind, e.actor_id, e.sub_account_id::text, e.key_id::text, e.key_name, e.scope,
      e.client_address::text, e.user_id::text, e.user_email, e.role, e.refusals::text,
      e.changes::text, e.database_login, e.prev_hash
    ]) WITH ORDINALITY AS u(f, n)
$$;

-- Chain the existing events, per agency in the order they were written.
ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only;
DO $$
DECLARE
  r audit_events;
  previous text;
  agency uuid;
  n bigint;
BEGIN
  FOR r IN SELECT * FROM audit_events ORDER BY agency_id, seq LOOP
    IF agency IS DISTINCT FROM r.agency_id THEN
      agency := r.agency_id;
      previous := '';
      n := 0;
    END IF;
    n := n + 1;
    r.chain_seq := n;
    r.prev_hash := previous;
    r.hash := audit_event_digest(r);
    UPDATE audit_events SET chain_seq = r.chain_seq, prev_hash = r.prev_hash, hash = r.hash WHERE id = r.id;
    previous := r.hash;
  END LOOP;
END $$;
ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only;
ALTER TABLE audit_events
  ALTER COLUMN chain_seq SET NOT NULL,
  ALTER COLUMN prev_hash SET NOT NULL,
  ALTER COLUMN hash SET NOT NULL;
CREATE UNIQUE INDEX audit_events_chain ON audit_events (agency_id, chain_seq);

-- Every insert joins its agency's chain, under the agency's advisory lock
-- (held to the commit): the next writer of that agency waits, then reads
-- this event as the head (each statement of a READ COMMITTED transaction
-- sees what committed before it; under a stricter isolation the unique
-- index refuses a second event at the same place instead of forking).
CREATE FUNCTION audit_events_chain() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  head audit_events;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('audit_events:' || NEW.agency_id::text, 0));
  SELECT * INTO head FROM audit_events WHERE agency_id = NEW.agency_id ORDER BY chain_seq DESC LIMIT 1;
  NEW.chain_seq := coalesce(head.chain_seq, 0) + 1;
  NEW.prev_hash := coalesce(head.hash, '');
  NEW.database_login := session_user;
  NEW.hash := audit_event_digest(NEW);
  RETURN NEW;
END $$;
CREATE TRIGGER audit_events_chain BEFORE INSERT ON audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_events_chain();

-- Declarations: what the code says about the events of its transaction,
-- until the commit writes them. Rows of finished transactions are removed by
-- later declarations (a rolled-back one's are never seen). No service reads
-- or writes this table; audit_declare does.
CREATE TABLE audit_declarations (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
  type text NOT NULL,
  agency_id uuid NOT NULL,
  sub_account_id uuid,
  key_id uuid,
  user_id uuid,
  -- The event's fields as audit_events names them (actor, key name, scope, user, role, refusals).
  event jsonb NOT NULL,
  consumed boolean NOT NULL DEFAULT false
);
CREATE INDEX audit_declarations_by_xact ON audit_declarations (xact);

-- The types a table change stands for: a declaration of one writes nothing by itself.
CREATE FUNCTION audit_type_needs_change(type text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT type IN ('key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
                  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
                  'user.created', 'user.updated', 'user.disabled', 'user.password-changed', 'user.signed-in',
                  'membership.added', 'membership.removed')
$$;

-- Columns whose changes the trail does not show: volatile ones (last use,
-- versions, update stamps) never make an event; hashes and secrets make
-- their event (a password change) but never appear in `changes`.
CREATE FUNCTION audit_volatile_columns() RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY['last_used_at', 'last_used_ip', 'state_version', 'updated_at', 'last_seen_at']
$$;
CREATE FUNCTION audit_changes(before jsonb, after jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(jsonb_object_agg(k, jsonb_build_object('before', before -> k, 'after', after -> k)), '{}'::jsonb)
    FROM jsonb_object_keys(after) AS k
   WHERE before -> k IS DISTINCT FROM after -> k
     AND k <> ALL (audit_volatile_columns())
     AND k !~ '(hash|secret|password|token)'
$$;

-- The transaction's actor: scoped.actor (jsonb with actor_kind, actor_id,
-- client_address), or `unattributed` named by the database login. A value
-- that does not parse counts as none.
CREATE FUNCTION audit_transaction_actor() RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  declared jsonb;
BEGIN
  BEGIN
    declared := nullif(current_setting('scoped.actor', true), '')::jsonb;
  EXCEPTION WHEN OTHERS THEN
    declared := NULL;
  END;
  IF declared IS NULL OR jsonb_typeof(declared) <> 'object' OR declared ->> 'actor_kind' IS NULL OR declared ->> 'actor_id' IS NULL THEN
    RETURN jsonb_build_object('actor_kind', 'unattributed', 'actor_id', session_user, 'client_address', NULL);
  END IF;
  RETURN jsonb_build_object('actor_kind', declared -> 'actor_kind', 'actor_id', declared -> 'actor_id', 'client_address', declared -> 'client_address');
END $$;

CREATE FUNCTION audit_insert(ev jsonb) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  INSERT INTO audit_events (type, actor_kind, actor_id, agency_id, sub_account_id, key_id, key_name, scope, client_address,
                            user_id, user_email, role, refusals, changes)
  SELECT r.type, r.actor_kind, r.actor_id, r.agency_id, r.sub_account_id, r.key_id, r.key_name, r.scope, r.client_address,
         r.user_id, r.user_email, r.role, r.refusals, r.changes
    FROM jsonb_populate_record(NULL::audit_events, ev) AS r;
END $$;

-- Writes the event of one table change: `ev` is what the trigger derived
-- (type, subject, changes); `also` other types a declaration may give it
-- (a membership added with a new user is user.created). A declaration of one
-- of those types for the same subject, not yet used, supplies the actor and
-- what the code knew; otherwise the transaction's actor.
CREATE FUNCTION audit_write(ev jsonb, also text[] DEFAULT '{}') RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  d audit_declarations;
BEGIN
  SELECT * INTO d FROM audit_declarations
   WHERE xact = pg_current_xact_id() AND NOT consumed
     AND type = ANY (array_prepend(ev ->> 'type', also))
     AND agency_id = (ev ->> 'agency_id')::uuid
     AND key_id IS NOT DISTINCT FROM (ev ->> 'key_id')::uuid
     AND user_id IS NOT DISTINCT FROM (ev ->> 'user_id')::uuid
     AND (sub_account_id IS NOT DISTINCT FROM (ev ->> 'sub_account_id')::uuid OR type = 'user.created')
   ORDER BY id LIMIT 1;
  IF FOUND THEN
    UPDATE audit_declarations SET consumed = true WHERE id = d.id;
    ev := ev || (d.event - 'changes') || jsonb_build_object('type', d.type);
  ELSE
    ev := ev || audit_transaction_actor();
  END IF;
  PERFORM audit_insert(ev);
END $$;

-- What recordAuditEvent calls: declares one event of this transaction, and
-- makes its actor the transaction's when it has none yet.
CREATE FUNCTION audit_declare(ev jsonb) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  -- Those of finished transactions, a few at a time, never waiting on another writer's.
  DELETE FROM audit_declarations WHERE id IN (
    SELECT id FROM audit_declarations WHERE xact < pg_snapshot_xmin(pg_current_snapshot()) LIMIT 100 FOR UPDATE SKIP LOCKED);
  INSERT INTO audit_declarations (type, agency_id, sub_account_id, key_id, user_id, event)
  VALUES (ev ->> 'type', (ev ->> 'agency_id')::uuid, (ev ->> 'sub_account_id')::uuid, (ev ->> 'key_id')::uuid, (ev ->> 'user_id')::uuid,
          ev - 'changes');
  IF nullif(current_setting('scoped.actor', true), '') IS NULL THEN
    PERFORM set_config('scoped.actor', jsonb_build_object('actor_kind', ev -> 'actor_kind', 'actor_id', ev -> 'actor_id',
                                                          'client_address', ev -> 'client_address')::text, true);
  END IF;
END $$;

-- At the commit, after the changes declared before it: an event with no
-- table change is written from its declaration; one that stands for a change
-- waits for it (a change queued later may still use it) and is otherwise
-- never written.
CREATE FUNCTION audit_declarations_flush() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  d audit_declarations;
BEGIN
  SELECT * INTO d FROM audit_declarations WHERE id = NEW.id;
  IF d.consumed OR audit_type_needs_change(d.type) THEN
    RETURN NULL;
  END IF;
  UPDATE audit_declarations SET consumed = true WHERE id = d.id;
  PERFORM audit_insert(d.event);
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER audit_declarations_flush AFTER INSERT ON audit_declarations
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION audit_declarations_flush();

-- Keys: created, revoked, rolled, deleted, or any other change (updated).
-- Ending the grace of a rolled key's predecessor is part of the roll that
-- declared key.rolled (the predecessor's replaced_by names the rolled key).
CREATE FUNCTION api_keys_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  row api_keys;
  kind text;
  changes jsonb;
BEGIN
  IF TG_OP = 'INSERT' THEN
    row := NEW;
    kind := 'key.created';
  ELSIF TG_OP = 'DELETE' THEN
    row := OLD;
    kind := 'key.deleted';
  ELSE
    row := NEW;
    changes := audit_changes(to_jsonb(OLD), to_jsonb(NEW));
    IF OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL THEN
      kind := 'key.revoked';
    ELSIF OLD.replaced_by IS NULL AND NEW.replaced_by IS NOT NULL THEN
      kind := 'key.rolled';
    ELSE
      kind := 'key.updated';
      IF OLD.replaced_by IS NOT NULL AND EXISTS (
        SELECT 1 FROM audit_declarations
         WHERE xact = pg_current_xact_id() AND type = 'key.rolled' AND key_id = OLD.replaced_by) THEN
        RETURN NULL;
      END IF;
    END IF;
  END IF;
  PERFORM audit_write(jsonb_build_object('type', kind, 'agency_id', row.agency_id, 'sub_account_id', row.sub_account_id,
    'key_id', row.id, 'key_name', row.name, 'scope', row.scope, 'changes', changes));
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER api_keys_audit AFTER INSERT OR DELETE ON api_keys
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION api_keys_audit();
-- The gateways' last-use writes change only volatile columns: no work is queued for them.
CREATE CONSTRAINT TRIGGER api_keys_audit_update AFTER UPDATE ON api_keys
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN ((to_jsonb(OLD) - audit_volatile_columns()) IS DISTINCT FROM (to_jsonb(NEW) - audit_volatile_columns()))
  EXECUTE FUNCTION api_keys_audit();

-- Sub-accounts: created, deleted, updated (a rename, the default key rate limit).
CREATE FUNCTION sub_accounts_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM audit_write(jsonb_build_object('type', 'sub-account.created', 'agency_id', NEW.agency_id, 'sub_account_id', NEW.id));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM audit_write(jsonb_build_object('type', 'sub-account.deleted', 'agency_id', OLD.agency_id, 'sub_account_id', OLD.id));
  ELSE
    PERFORM audit_write(jsonb_build_object('type', 'sub-account.updated', 'agency_id', NEW.agency_id, 'sub_account_id', NEW.id,
      'changes', audit_changes(to_jsonb(OLD), to_jsonb(NEW))));
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER sub_accounts_audit AFTER INSERT OR DELETE ON sub_accounts
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION sub_accounts_audit();
CREATE CONSTRAINT TRIGGER sub_accounts_audit_update AFTER UPDATE ON sub_accounts
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN ((to_jsonb(OLD) - audit_volatile_columns()) IS DISTINCT FROM (to_jsonb(NEW) - audit_volatile_columns()))
  EXECUTE FUNCTION sub_accounts_audit();

-- An event about a user as a whole goes into the trail of each agency the
-- user belongs to at the commit, with their role there; a user who belongs
-- to none leaves no event (there is no trail to put it in).
CREATE FUNCTION audit_write_user_event(kind text, subject uuid, changes jsonb, also text[] DEFAULT '{}') RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  m record;
BEGIN
  FOR m IN SELECT am.agency_id, am.role, u.email FROM agency_memberships am JOIN users u ON u.id = am.user_id
            WHERE am.user_id = subject ORDER BY am.agency_id LOOP
    PERFORM audit_write(jsonb_build_object('type', kind, 'agency_id', m.agency_id, 'sub_account_id', NULL, 'user_id', subject,
      'user_email', m.email, 'role', m.role, 'changes', changes), also);
  END LOOP;
END $$;

-- Users: disabled, password changed, or any other change (updated). A new
-- user has no agency yet: their event is the membership's (user.created).
-- A new hash of the same password (a stronger cost, at sign-in) is declared
-- user.updated: the password did not change.
CREATE FUNCTION users_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  changes jsonb := audit_changes(to_jsonb(OLD), to_jsonb(NEW));
BEGIN
  IF OLD.disabled_at IS NULL AND NEW.disabled_at IS NOT NULL THEN
    PERFORM audit_write_user_event('user.disabled', NEW.id, changes);
  ELSIF NEW.password_hash IS DISTINCT FROM OLD.password_hash THEN
    PERFORM audit_write_user_event('user.password-changed', NEW.id, changes, ARRAY['user.updated']);
  ELSE
    PERFORM audit_write_user_event('user.updated', NEW.id, changes);
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER users_audit AFTER UPDATE ON users
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN ((to_jsonb(OLD) - audit_volatile_columns()) IS DISTINCT FROM (to_jsonb(NEW) - audit_volatile_columns()))
  EXECUTE FUNCTION users_audit();

-- A new session is a sign-in (the only way to write user.signed-in), except
-- the one a password change makes to replace the session it ends.
CREATE FUNCTION console_sessions_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM audit_declarations
              WHERE xact = pg_current_xact_id() AND type = 'user.password-changed' AND user_id = NEW.user_id) THEN
    RETURN NULL;
  END IF;
  PERFORM audit_write_user_event('user.signed-in', NEW.user_id, NULL);
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER console_sessions_audit AFTER INSERT ON console_sessions
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION console_sessions_audit();

-- Agency memberships: added (user.created when declared so: a new user with
-- their first membership), removed with the role the user had.
CREATE FUNCTION agency_memberships_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  m agency_memberships;
  email text;
BEGIN
  m := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  SELECT u.email INTO email FROM users u WHERE u.id = m.user_id;
  IF email IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM audit_write(jsonb_build_object('type', CASE WHEN TG_OP = 'DELETE' THEN 'membership.removed' ELSE 'membership.added' END,
    'agency_id', m.agency_id, 'sub_account_id', NULL, 'user_id', m.user_id, 'user_email', email, 'role', m.role),
    CASE WHEN TG_OP = 'INSERT' THEN ARRAY['user.created'] ELSE '{}' END);
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER agency_memberships_audit AFTER INSERT OR DELETE ON agency_memberships
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION agency_memberships_audit();

-- Sub-account memberships: added (part of user.created when a new user is
-- made a member of it), removed. The memberships of a deleted sub-account go
-- with it: its sub-account.deleted says so.
CREATE FUNCTION sub_account_memberships_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  m sub_account_memberships;
  agency uuid;
  email text;
  role text;
BEGIN
  m := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  SELECT s.agency_id INTO agency FROM sub_accounts s WHERE s.id = m.sub_account_id;
  SELECT u.email INTO email FROM users u WHERE u.id = m.user_id;
  IF agency IS NULL OR email IS NULL THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'INSERT' AND EXISTS (SELECT 1 FROM audit_declarations
      WHERE xact = pg_current_xact_id() AND type = 'user.created' AND user_id = m.user_id AND sub_account_id = m.sub_account_id) THEN
    RETURN NULL;
  END IF;
  SELECT am.role INTO role FROM agency_memberships am WHERE am.user_id = m.user_id AND am.agency_id = agency;
  PERFORM audit_write(jsonb_build_object('type', CASE WHEN TG_OP = 'DELETE' THEN 'membership.removed' ELSE 'membership.added' END,
    'agency_id', agency, 'sub_account_id', m.sub_account_id, 'user_id', m.user_id, 'user_email', email, 'role', role));
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER sub_account_memberships_audit AFTER INSERT OR DELETE ON sub_account_memberships
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION sub_account_memberships_audit();

-- Every function runs with the owner's search path; only audit_declare is the services' to call.
DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['audit_events_chain()', 'audit_insert(jsonb)', 'audit_write(jsonb, text[])', 'audit_declare(jsonb)',
      'audit_declarations_flush()', 'api_keys_audit()', 'sub_accounts_audit()', 'audit_write_user_event(text, uuid, jsonb, text[])', 'users_audit()',
      'console_sessions_audit()', 'agency_memberships_audit()', 'sub_account_memberships_audit()'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
  END LOOP;
END $$;
GRANT EXECUTE ON FUNCTION audit_declare(jsonb) TO scoped_agency;
REVOKE INSERT ON audit_events FROM scoped_agency;

-- Down Migration

GRANT INSERT ON audit_events TO scoped_agency;
DROP TRIGGER sub_account_memberships_audit ON sub_account_memberships;
DROP TRIGGER agency_memberships_audit ON agency_memberships;
DROP TRIGGER console_sessions_audit ON console_sessions;
DROP TRIGGER users_audit ON users;
DROP TRIGGER sub_accounts_audit_update ON sub_accounts;
DROP TRIGGER sub_accounts_audit ON sub_accounts;
DROP TRIGGER api_keys_audit_update ON api_keys;
DROP TRIGGER api_keys_audit ON api_keys;
DROP TRIGGER audit_declarations_flush ON audit_declarations;
DROP FUNCTION sub_account_memberships_audit();
DROP FUNCTION agency_memberships_audit();
DROP FUNCTION console_sessions_audit();
DROP FUNCTION users_audit();
DROP FUNCTION audit_write_user_event(text, uuid, jsonb, text[]);
DROP FUNCTION sub_accounts_audit();
DROP FUNCTION api_keys_audit();
DROP FUNCTION audit_declarations_flush();
DROP FUNCTION audit_declare(jsonb);
DROP FUNCTION audit_write(jsonb, text[]);
DROP FUNCTION audit_insert(jsonb);
DROP FUNCTION audit_transaction_actor();
DROP FUNCTION audit_changes(jsonb, jsonb);
DROP FUNCTION audit_volatile_columns();
DROP FUNCTION audit_type_needs_change(text);
DROP TABLE audit_declarations;
DROP TRIGGER audit_events_chain ON audit_events;
DROP FUNCTION audit_events_chain();
DROP INDEX audit_events_chain;
DROP FUNCTION audit_event_digest(audit_events);
-- The trail is append-only going down too: its rows stay; the columns of the chain go.
ALTER TABLE audit_events DROP COLUMN hash, DROP COLUMN prev_hash, DROP COLUMN chain_seq, DROP COLUMN database_login, DROP COLUMN changes;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.removed'
)) NOT VALID;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_kind_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_actor_kind_check CHECK (actor_kind IN ('user', 'cli', 'key')) NOT VALID;
