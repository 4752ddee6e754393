-- Up Migration

-- The merge of the audit trail written by triggers (015) with the fields later
-- migrations added to audit_events: the leak report (020: leak_source,
-- leak_url) and the console's detail (022: key_hint, changed_fields; an
-- invitation's invitee goes in user_email and role).
--
-- 1. The type CHECK is the union of every list: 015's, key.leaked (020) and
--    invitation.created / invitation.accepted (022).
-- 2. audit_insert copies the new columns from the declaration (or the
--    trigger's event); a key's trigger gives the row's hint, which stands
--    when the declaration gives none, so a change nobody declared carries it
--    too. Which settings a key.updated changed is in `changes` as well (the
--    console reads it there when changed_fields is not given).
-- 3. The hash covers the new columns, each appended with its name only when
--    set: the hash of an event without them is what it was, so the chain of
--    existing events stays valid (audit-chain.ts computes the same).
-- 4. Webhooks of key.leaked (019's fan-out) read the leak's url and source
--    from 020's columns, leak_url and leak_source.
--
-- Safe on a populated database: no table rewrite; the CHECK allows every
-- type an earlier migration did.

ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated', 'key.leaked',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.updated', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.added', 'membership.removed',
  'invitation.created', 'invitation.accepted'
));

CREATE OR REPLACE FUNCTION audit_event_digest(e audit_events) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT encode(sha256(convert_to(string_agg(CASE WHEN f IS NULL THEN '~' ELSE octet_length(f)::text || ':' || f END, '|' ORDER BY n), 'UTF8')), 'hex')
    FROM unnest(ARRAY[
      e.id::text, e.agency_id::text, e.chain_seq::text, e.type,
      to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
      e.actor_kind, e.actor_id, e.sub_account_id::text, e.key_id::text, e.key_name, e.scope,
      e.client_address::text, e.user_id::text, e.user_email, e.role, e.refusals::text,
      e.changes::text, e.database_login, e.prev_hash
    ] || array_remove(ARRAY[
      'key_hint=' || e.key_hint, 'changed_fields=' || e.changed_fields::text,
      'leak_source=' || e.leak_source, 'leak_url=' || e.leak_url
    ], NULL)) WITH ORDINALITY AS u(f, n)
$$;

CREATE OR REPLACE FUNCTION audit_insert(ev jsonb) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  INSERT INTO audit_events (type, actor_kind, actor_id, agency_id, sub_account_id, key_id, key_name, scope, client_address,
                            user_id, user_email, role, refusals, changes, key_hint, changed_fields, leak_source, leak_url)
  SELECT r.type, r.actor_kind, r.actor_id, r.agency_id, r.sub_account_id, r.key_id, r.key_name, r.scope, r.client_address,
         r.user_id, r.user_email, r.role, r.refusals, r.changes, r.key_hint, r.changed_fields, r.leak_source, r.leak_url
    FROM jsonb_populate_record(NULL::audit_events, ev) AS r;
END $$;

CREATE OR REPLACE FUNCTION audit_write(ev jsonb, also text[] DEFAULT '{}') RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
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
    -- The key row's hint stands when the declaration gives none.
    ev := ev || (d.event - 'changes') || jsonb_build_object('type', d.type, 'key_hint', coalesce(d.event ->> 'key_hint', ev ->> 'key_hint'));
  ELSE
    ev := ev || audit_transaction_actor();
  END IF;
  PERFORM audit_insert(ev);
END $$;

CREATE OR REPLACE FUNCTION api_keys_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
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
    'key_id', row.id, 'key_name', row.name, 'key_hint', row.hint, 'scope', row.scope, 'changes', changes));
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION audit_events_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  row jsonb := to_jsonb(NEW);
  data jsonb;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE agency_id = NEW.agency_id AND enabled AND NEW.type = ANY (events)) THEN
    RETURN NULL;
  END IF;
  data := jsonb_build_object(
    'agencyId', NEW.agency_id,
    'subAccountId', NEW.sub_account_id,
    'subAccountName', (SELECT name FROM sub_accounts WHERE id = NEW.sub_account_id),
    'keyId', NEW.key_id,
    'keyName', NEW.key_name,
    'scope', NEW.scope,
    'actor', jsonb_build_object('kind', NEW.actor_kind, 'id', NEW.actor_id));
  -- A leak's report, under the names 019 gave them (the columns are 020's).
  data := data || jsonb_strip_nulls(jsonb_build_object('url', row -> 'leak_url', 'source', row -> 'leak_source'));
  PERFORM webhook_enqueue(NEW.id, NEW.type, NEW.at, NEW.agency_id, data);
  RETURN NULL;
END $$;

DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['audit_insert(jsonb)', 'audit_write(jsonb, text[])', 'api_keys_audit()', 'audit_events_to_webhooks()'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
  END LOOP;
END $$;

-- Down Migration

-- 015's functions again (events written since keep their columns, but the
-- hash of one with a new column set no longer verifies); the trail is
-- append-only going down too, so the old type check holds for new rows only.
CREATE OR REPLACE FUNCTION audit_event_digest(e audit_events) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT encode(sha256(convert_to(string_agg(CASE WHEN f IS NULL THEN '~' ELSE octet_length(f)::text || ':' || f END, '|' ORDER BY n), 'UTF8')), 'hex')
    FROM unnest(ARRAY[
      e.id::text, e.agency_id::text, e.chain_seq::text, e.type,
      to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
      e.actor_kind, e.actor_id, e.sub_account_id::text, e.key_id::text, e.key_name, e.scope,
      e.client_address::text, e.user_id::text, e.user_email, e.role, e.refusals::text,
      e.changes::text, e.database_login, e.prev_hash
    ]) WITH ORDINALITY AS u(f, n)
$$;

CREATE OR REPLACE FUNCTION audit_insert(ev jsonb) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  INSERT INTO audit_events (type, actor_kind, actor_id, agency_id, sub_account_id, key_id, key_name, scope, client_address,
                            user_id, user_email, role, refusals, changes)
  SELECT r.type, r.actor_kind, r.actor_id, r.agency_id, r.sub_account_id, r.key_id, r.key_name, r.scope, r.client_address,
         r.user_id, r.user_email, r.role, r.refusals, r.changes
    FROM jsonb_populate_record(NULL::audit_events, ev) AS r;
END $$;

CREATE OR REPLACE FUNCTION audit_write(ev jsonb, also text[] DEFAULT '{}') RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
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

CREATE OR REPLACE FUNCTION api_keys_audit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
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

CREATE OR REPLACE FUNCTION audit_events_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  row jsonb := to_jsonb(NEW);
  data jsonb;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE agency_id = NEW.agency_id AND enabled AND NEW.type = ANY (events)) THEN
    RETURN NULL;
  END IF;
  data := jsonb_build_object(
    'agencyId', NEW.agency_id,
    'subAccountId', NEW.sub_account_id,
    'subAccountName', (SELECT name FROM sub_accounts WHERE id = NEW.sub_account_id),
    'keyId', NEW.key_id,
    'keyName', NEW.key_name,
    'scope', NEW.scope,
    'actor', jsonb_build_object('kind', NEW.actor_kind, 'id', NEW.actor_id));
  data := data || jsonb_strip_nulls(jsonb_build_object('url', row -> 'url', 'source', row -> 'source'));
  PERFORM webhook_enqueue(NEW.id, NEW.type, NEW.at, NEW.agency_id, data);
  RETURN NULL;
END $$;

DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['audit_insert(jsonb)', 'audit_write(jsonb, text[])', 'api_keys_audit()', 'audit_events_to_webhooks()'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
  END LOOP;
END $$;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.removed',
  'invitation.created', 'invitation.accepted'
)) NOT VALID;
