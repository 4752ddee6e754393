-- Up Migration

-- A sub-account's default rate limit for its keys, set by its agency (ctl
-- sub-account key-rate-limit, PATCH /v1/agency/sub-accounts/:id, the
-- console's owners and admins): every key created for the sub-account
-- without a limit of its own gets it (api_keys.rate_limit_*, 007), so a
-- member who cannot change a key's limit cannot escape a lower one by
-- creating a fresh key; a roll carries the old key's limit. NULL (both): new
-- keys get the routes file's, as before. Safe on a populated database:
-- nullable columns without a default (no table rewrite); the bounds are
-- those of a key's own limit. Changing it is recorded (sub-account.updated).

ALTER TABLE sub_accounts
  ADD COLUMN key_rate_limit_rate double precision,
  ADD COLUMN key_rate_limit_burst integer,
  ADD CONSTRAINT sub_accounts_key_rate_limit_whole CHECK ((key_rate_limit_rate IS NULL) = (key_rate_limit_burst IS NULL)),
  ADD CONSTRAINT sub_accounts_key_rate_limit_rate CHECK (key_rate_limit_rate > 0 AND key_rate_limit_rate <= 1000000),
  ADD CONSTRAINT sub_accounts_key_rate_limit_burst CHECK (key_rate_limit_burst BETWEEN 1 AND 10000000);

ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
  'sub-account.created', 'sub-account.updated', 'sub-account.deleted',
  'user.created', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.removed'
));

-- Down Migration

-- The trail is append-only going down too: sub-account.updated rows stay, and
-- the old type check holds for new rows only (NOT VALID).
ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
  'sub-account.created', 'sub-account.deleted',
  'user.created', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.removed'
)) NOT VALID;
ALTER TABLE sub_accounts
  DROP CONSTRAINT sub_accounts_key_rate_limit_burst,
  DROP CONSTRAINT sub_accounts_key_rate_limit_rate,
  DROP CONSTRAINT sub_accounts_key_rate_limit_whole,
  DROP COLUMN key_rate_limit_burst,
  DROP COLUMN key_rate_limit_rate;
