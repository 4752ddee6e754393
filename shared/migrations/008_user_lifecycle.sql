-- Up Migration

-- The console user lifecycle: disabling a user, resetting or changing a
-- password, removing a membership, and the audit events of all of them and
-- of user creation and sign-in. Safe on a populated database: the new
-- columns are nullable (no table rewrite), every existing user stays enabled,
-- and every existing audit row satisfies the widened checks.

-- When the user was disabled; NULL: enabled. A disabled user keeps their
-- memberships (the trail and the members page still name them) but has no
-- session and cannot sign in. Who disabled them is in the audit trail.
ALTER TABLE users ADD COLUMN disabled_at timestamptz;

-- Removing a membership (ctl user remove, the console's members page).
-- Removing an agency membership removes the user's sub-account memberships in
-- that agency in the same transaction (the code does it, so each one gets its
-- own audit event).
GRANT DELETE ON agency_memberships, sub_account_memberships TO scoped_agency;

-- User events in the audit trail. Each is written into the trail of the
-- agency it concerns (an event about a user as a whole, such as a disable or
-- a sign-in, once into each agency the user belongs to), so an agency's
-- owners read it with the rest of their trail.
--   user_id     the user the event is about (the actor may be someone else)
--   user_email  their email at the time, for readers after the membership is gone
--   role        their role in that agency at the time (NULL: they had none)
ALTER TABLE audit_events
  ADD COLUMN user_id uuid,
  ADD COLUMN user_email text CHECK (length(user_email) BETWEEN 3 AND 254),
  ADD COLUMN role text CHECK (role IN ('owner', 'admin', 'member'));

ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check CHECK (type IN (
  'key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated',
  'sub-account.created', 'sub-account.deleted',
  'user.created', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused',
  'membership.removed'
));
-- NOT VALID: checked for every row written from now on; rows written before a
-- down migration (which keeps the trail's rows but drops these columns) and
-- an up again stay as they are.
ALTER TABLE audit_events ADD CONSTRAINT audit_events_user_events_name_the_user
  CHECK ((type LIKE 'user.%' OR type LIKE 'membership.%') = (user_id IS NOT NULL AND user_email IS NOT NULL)) NOT VALID;

-- Down Migration

-- The trail is append-only, going down too: user events stay, and the old
-- type check is restored for new rows only (NOT VALID).
ALTER TABLE audit_events DROP CONSTRAINT audit_events_user_events_name_the_user;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_type_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_type_check
  CHECK (type IN ('key.created', 'key.rolled', 'key.revoked', 'key.deleted', 'key.updated', 'sub-account.created', 'sub-account.deleted')) NOT VALID;
ALTER TABLE audit_events DROP COLUMN role, DROP COLUMN user_email, DROP COLUMN user_id;
REVOKE DELETE ON agency_memberships, sub_account_memberships FROM scoped_agency;
ALTER TABLE users DROP COLUMN disabled_at;
