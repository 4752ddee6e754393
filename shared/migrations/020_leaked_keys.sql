-- Up Migration

-- Leak response (issue 32): a key reported as leaked, by GitHub's secret
-- scanning (POST /v1/secret-scanning/github) or by anyone through the public
-- revocation API (POST /v1/credentials/revoke), is recorded as `key.leaked`,
-- with where it was reported from (`leak_source`: GitHub's `source`, such as
-- `content` or `commit`, or `report` for the revocation API) and, from GitHub,
-- the public URL where it was found (`leak_url`). Nullable columns without a
-- default: no table rewrite. The type list is the one of 015 plus key.leaked.

ALTER TABLE audit_events
  ADD COLUMN leak_source text CHECK (length(leak_source) BETWEEN 1 AND 100),
  ADD COLUMN leak_url text CHECK (length(leak_url) BETWEEN 1 AND 2048);
ALTER TABLE audit_events ADD CONSTRAINT audit_events_leaks_name_their_source
  CHECK ((type = 'key.leaked') = (leak_source IS NOT NULL)) NOT VALID;

ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated', 'key.leaked',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.updated', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.added', 'membership.removed'
));

-- Down Migration

-- The trail is append-only going down too: key.leaked rows stay, and the old
-- checks hold for new rows only (NOT VALID).
ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.removed'
)) NOT VALID;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_leaks_name_their_source;
