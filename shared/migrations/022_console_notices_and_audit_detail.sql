-- Up Migration

-- Safe on a populated database: a new table, and nullable columns without a
-- default on audit_events (no table rewrite).

-- A notice after a change in the console ("Key web backend (…Moy3) was
-- revoked"), shown once: written by the change, deleted by the first page of
-- the same session that shows it, so a reload or Back never shows it again and
-- nothing of it lives in the address bar.
CREATE TABLE console_notices (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  session_token_hash text NOT NULL REFERENCES console_sessions (token_hash) ON DELETE CASCADE,
  -- The page that shows it (its path), so a notice of one list is never shown on another.
  page text NOT NULL,
  notice text NOT NULL CHECK (notice ~ '^[a-z-]{1,40}$'),
  -- What it is about, as a person names it ("web backend (…Moy3)").
  subject text CHECK (length(subject) <= 300),
  created_at timestamptz NOT NULL
);
CREATE INDEX console_notices_by_session ON console_notices (session_token_hash, page);
GRANT SELECT, INSERT, DELETE ON console_notices TO scoped_agency;

-- What the trail needs to tell events apart and match them to the key list:
-- the key's hint (sak_live_…xxxx, never secret) and, for key.updated, which
-- of its settings changed ('allowedCidrs', 'rateLimit').
ALTER TABLE audit_events
  ADD COLUMN key_hint text CHECK (length(key_hint) <= 40),
  ADD COLUMN changed_fields text[];

-- Invitations: an agency's owners and admins invite a person by email; the
-- link carries a random token (only its SHA-256 hash is stored), works until
-- it expires or once, and is accepted by setting a password.
CREATE TABLE console_invitations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  token_hash text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  agency_id uuid NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
  sub_account_id uuid REFERENCES sub_accounts (id) ON DELETE CASCADE,
  email text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
  role text NOT NULL CHECK (role IN ('admin', 'member')),
  invited_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  accepted_at timestamptz
);
CREATE INDEX console_invitations_by_agency ON console_invitations (agency_id);
GRANT SELECT, INSERT, UPDATE, DELETE ON console_invitations TO scoped_agency;

-- New audit event types: invitation.created (the invitee's email and role in
-- user_email and role; no user_id, as there is no user yet) and
-- invitation.accepted (by the new user, who is named by their user.created).
ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated', 'key.leaked',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.updated', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.added', 'membership.removed',
  'invitation.created', 'invitation.accepted'
));

-- Down Migration

-- The trail is append-only going down too: invitation rows stay, and the old
-- type check holds for new rows only (NOT VALID).
ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.removed'
)) NOT VALID;
DROP TABLE console_invitations;

ALTER TABLE audit_events DROP COLUMN changed_fields, DROP COLUMN key_hint;
DROP TABLE console_notices;
