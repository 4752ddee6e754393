-- Up Migration

-- Webhooks (issue 32): an agency registers endpoints, and every event of its
-- audit trail (its sub-accounts' included) that an endpoint subscribes to is
-- written to an outbox in the same transaction as the event itself, by a
-- trigger on audit_events: whoever writes the event (the code, or a trigger
-- of another table), a change that committed has its webhook messages, and a
-- change that rolled back has none. agency-service's sender delivers them
-- (agency-service/src/webhooks/sender.ts).

-- An endpoint. `secret` is the Standard Webhooks signing secret (`whsec_` and
-- base64), stored as it is shown: the sender must sign with it, so a hash
-- cannot stand in, and an encryption key held by the same process that reads
-- this table would protect only a stolen backup while tying every endpoint to
-- that key's rotation. It is read by agency-service alone (the grants below),
-- never returned by a list or a read (only once, at creation or roll), and is
-- worth only the forging of this endpoint's deliveries; rolling it ends that.
CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  agency_id uuid NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
  url text NOT NULL CHECK (length(url) BETWEEN 8 AND 2000),
  events text[] NOT NULL CHECK (cardinality(events) BETWEEN 1 AND 32),
  enabled boolean NOT NULL DEFAULT true,
  secret text NOT NULL CHECK (secret ~ '^whsec_[A-Za-z0-9+/=]{32,100}$'),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_by_agency ON webhook_endpoints (agency_id, created_at, id);

-- The outbox: one message per event per subscribed endpoint. `payload` is the
-- body sent, exactly ({"type","id","at","data"}); the message id is the
-- `webhook-id` of every attempt. The sender delivers an endpoint's messages in
-- `seq` order, one at a time (the oldest pending one is its head), claiming a
-- head with FOR UPDATE SKIP LOCKED and a lease (`lease_until`, `lease_token`)
-- so two replicas never deliver the same message at once, and a replica that
-- dies mid-delivery leaves a lease that runs out instead of a lost message.
CREATE TABLE webhook_messages (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id uuid NOT NULL,
  type text NOT NULL,
  payload text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- Retries stop here (72 h after the event; a redelivery moves it).
  give_up_at timestamptz NOT NULL,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  lease_until timestamptz,
  lease_token uuid,
  finished_at timestamptz,
  UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_messages_heads ON webhook_messages (endpoint_id, seq) WHERE state = 'pending';

-- Every attempt, as it starts (state `pending`) and as it ends: the answer's
-- status, how long it took, what went wrong.
CREATE TABLE webhook_attempts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  message_id uuid NOT NULL REFERENCES webhook_messages (id) ON DELETE CASCADE,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  attempt integer NOT NULL CHECK (attempt >= 1),
  at timestamptz NOT NULL DEFAULT now(),
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  response_status integer,
  duration_ms integer,
  error text CHECK (length(error) <= 500),
  lease_token uuid NOT NULL
);
CREATE INDEX webhook_attempts_by_endpoint ON webhook_attempts (endpoint_id, at DESC, id DESC);
CREATE INDEX webhook_attempts_by_message ON webhook_attempts (message_id);

-- Expiry reminders already sent (key.expiring 7 and 1 day ahead, key.expired):
-- the primary key is what makes each one go out once, however many senders
-- look at the same moment.
CREATE TABLE webhook_key_reminders (
  key_id uuid NOT NULL,
  kind text NOT NULL CHECK (kind IN ('expiring-7d', 'expiring-1d', 'expired')),
  event_id uuid NOT NULL DEFAULT gen_random_uuid(),
  at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (key_id, kind)
);
CREATE INDEX api_keys_expiring ON api_keys (expires_at) WHERE expires_at IS NOT NULL AND revoked_at IS NULL;

-- Writes one event's messages, one per enabled endpoint of the agency that
-- subscribes to its type. The payload holds ids and names, never a key, a
-- hash or a secret (callers build `data` from such fields only).
CREATE FUNCTION webhook_enqueue(p_event_id uuid, p_type text, p_at timestamptz, p_agency_id uuid, p_data jsonb) RETURNS void
  LANGUAGE sql AS $$
  INSERT INTO webhook_messages (endpoint_id, event_id, type, payload, give_up_at)
  SELECT e.id, p_event_id, p_type,
         jsonb_build_object('type', p_type, 'id', p_event_id,
                            'at', to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'data', p_data)::text,
         p_at + interval '72 hours'
    FROM webhook_endpoints e
   WHERE e.agency_id = p_agency_id AND e.enabled AND p_type = ANY (e.events)
  ON CONFLICT DO NOTHING;
$$;

-- The fan-out from the audit trail. The row is read through to_jsonb, so
-- columns that other migrations add (a leak's `url` and `source`) come along
-- when present and are simply absent otherwise.
CREATE FUNCTION audit_events_to_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER audit_events_to_webhooks AFTER INSERT ON audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_events_to_webhooks();

-- Expiry reminders due at `at_time`, each written once (the reminders' primary
-- key) with its messages in the same statement's transaction. A rolled key's
-- end of grace is the roll's doing and is not announced; a key that expired
-- more than a day ago (before webhooks existed, say) is not announced late.
CREATE FUNCTION webhook_send_key_reminders(at_time timestamptz) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  r record;
  sent integer := 0;
BEGIN
  FOR r IN
    INSERT INTO webhook_key_reminders (key_id, kind, at)
    SELECT k.id, d.kind, at_time
      FROM api_keys k
      JOIN (VALUES ('expiring-7d', interval '7 days', interval '1 day'),
                   ('expiring-1d', interval '1 day', interval '0'),
                   ('expired', interval '0', interval '-1 day')) AS d (kind, ahead, stop)
        ON k.expires_at - d.ahead <= at_time AND k.expires_at - d.stop > at_time
     WHERE k.expires_at IS NOT NULL AND k.revoked_at IS NULL AND k.replaced_by IS NULL
       AND k.expires_at <= at_time + interval '7 days' AND k.expires_at > at_time - interval '1 day'
       AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.agency_id = k.agency_id AND e.enabled)
    ON CONFLICT DO NOTHING
    RETURNING key_id, kind, event_id
  LOOP
    PERFORM webhook_enqueue(r.event_id, CASE r.kind WHEN 'expired' THEN 'key.expired' ELSE 'key.expiring' END, at_time, k.agency_id,
      jsonb_build_object('agencyId', k.agency_id, 'subAccountId', k.sub_account_id,
                         'subAccountName', (SELECT name FROM sub_accounts s WHERE s.id = k.sub_account_id),
                         'keyId', k.id, 'keyName', k.name, 'scope', k.scope,
                         'expiresAt', to_char(k.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
      FROM api_keys k WHERE k.id = r.key_id;
    sent := sent + 1;
  END LOOP;
  RETURN sent;
END $$;

-- The functions write the outbox with the owner's rights, so whoever appends
-- to the trail (agency-service, ctl, another table's trigger) needs no grant
-- on it.
DO $$
DECLARE
  fn text;
BEGIN
  FOREACH fn IN ARRAY ARRAY['webhook_enqueue(uuid, text, timestamptz, uuid, jsonb)', 'audit_events_to_webhooks()', 'webhook_send_key_reminders(timestamptz)'] LOOP
    EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', fn, current_schema());
  END LOOP;
END $$;
REVOKE EXECUTE ON FUNCTION webhook_enqueue(uuid, text, timestamptz, uuid, jsonb) FROM PUBLIC;

-- agency-service (its API and console, its sender) and ctl.
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_endpoints TO scoped_agency;
GRANT SELECT, UPDATE ON webhook_messages TO scoped_agency;
GRANT SELECT, INSERT, UPDATE ON webhook_attempts TO scoped_agency;

-- Down Migration

DROP TRIGGER audit_events_to_webhooks ON audit_events;
DROP FUNCTION audit_events_to_webhooks();
DROP FUNCTION webhook_send_key_reminders(timestamptz);
DROP FUNCTION webhook_enqueue(uuid, text, timestamptz, uuid, jsonb);
DROP INDEX api_keys_expiring;
DROP TABLE webhook_key_reminders;
DROP TABLE webhook_attempts;
DROP TABLE webhook_messages;
DROP TABLE webhook_endpoints;
