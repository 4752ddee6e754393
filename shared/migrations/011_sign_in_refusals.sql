-- Up Migration

-- Refused sign-ins of a known user, coalesced: at most one audit event per
-- user per minute, carrying how many refusals it stands for, so a flood of
-- wrong passwords for one email costs one small upsert each and leaves one
-- row per minute in each of the user's agencies' trails (the trail is
-- append-only and undeletable, so it must not grow with an attacker's rate).
--
-- console_sign_in_refusals holds the minutes not yet written to the trail:
-- each refusal adds one to its (user, minute) row; once the minute has ended,
-- one agency-service replica deletes the row and writes the event in the same
-- transaction (the delete's row lock makes that exactly once across replicas).
-- Safe on a populated database: a new table, and a nullable column without a
-- default on audit_events (no table rewrite).
CREATE TABLE console_sign_in_refusals (
  user_id uuid NOT NULL,
  minute timestamptz NOT NULL,
  refusals integer NOT NULL CHECK (refusals >= 1),
  -- The client address of the latest refusal in the minute.
  client_address inet,
  PRIMARY KEY (user_id, minute)
);
CREATE INDEX console_sign_in_refusals_by_minute ON console_sign_in_refusals (minute);
GRANT SELECT, INSERT, UPDATE, DELETE ON console_sign_in_refusals TO scoped_agency;

-- How many refusals a user.sign-in-refused event stands for (NULL on every
-- other event, and on refusals recorded one by one before this migration).
ALTER TABLE audit_events ADD COLUMN refusals integer CHECK (refusals IS NULL OR refusals >= 1);

-- Down Migration

-- The trail is append-only going down too: the column goes, its rows stay.
ALTER TABLE audit_events DROP COLUMN refusals;
DROP TABLE console_sign_in_refusals;
