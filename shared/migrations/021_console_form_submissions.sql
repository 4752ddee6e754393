-- Up Migration

-- A console form that creates or changes something carries a one-time form
-- token. The first submission of a token claims its row here and records
-- what it answered; a repeated submission of the same token (a double click,
-- a resubmitted page, another replica) is answered with that first result
-- instead of doing the change again. Only the token's SHA-256 hash is stored.
--
-- For a new key (create, roll) the row also holds the key's plaintext until
-- it has been shown once, sealed (AES-256-GCM) under a key derived from the
-- form token, which is stored nowhere on the server: the row alone reveals
-- nothing. Rows go with their session, and once their time is over.
CREATE TABLE console_form_submissions (
  session_token_hash text NOT NULL REFERENCES console_sessions (token_hash) ON DELETE CASCADE,
  token_hash text NOT NULL CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  -- The path the form was posted to: a token answers only the form it came with.
  action text NOT NULL,
  -- Null while the first submission is under way.
  outcome jsonb,
  key_id uuid,
  sealed_key bytea,
  reveal_until timestamptz,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (session_token_hash, token_hash)
);
CREATE INDEX console_form_submissions_by_expiry ON console_form_submissions (expires_at);

GRANT SELECT, INSERT, UPDATE, DELETE ON console_form_submissions TO scoped_agency;

-- Down Migration

DROP TABLE console_form_submissions;
