-- Up Migration

-- The console's server-side sessions. The browser holds the session token;
-- only its SHA-256 hash is stored, so a copy of this table signs nobody in.
-- Times are written by the application's clock (a parameter, for tests).
CREATE TABLE console_sessions (
  token_hash text PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- Per-session token every state-changing form must echo (CSRF).
  csrf_token text NOT NULL CHECK (length(csrf_token) >= 32),
  created_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_by_user ON console_sessions (user_id);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);

-- Failed sign-ins, per subject (a hash of the email, or of the client
-- address), so throttling holds across processes and replicas.
CREATE TABLE console_sign_in_failures (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  subject text NOT NULL CHECK (subject ~ '^[0-9a-f]{64}$'),
  failed_at timestamptz NOT NULL
);
CREATE INDEX console_sign_in_failures_by_subject ON console_sign_in_failures (subject, failed_at);
CREATE INDEX console_sign_in_failures_by_time ON console_sign_in_failures (failed_at);

-- The one-time display of a new key's plaintext after the redirect that
-- follows its creation. The browser holds the plaintext encrypted (in a
-- short-lived cookie); this row holds only the random decryption key, which
-- says nothing about the plaintext and is deleted the first time it is read.
CREATE TABLE console_key_reveals (
  key_id uuid PRIMARY KEY REFERENCES api_keys (id) ON DELETE CASCADE,
  session_token_hash text NOT NULL REFERENCES console_sessions (token_hash) ON DELETE CASCADE,
  secret bytea NOT NULL CHECK (length(secret) = 32),
  expires_at timestamptz NOT NULL
);
CREATE INDEX console_key_reveals_by_session ON console_key_reveals (session_token_hash);
CREATE INDEX console_key_reveals_by_expiry ON console_key_reveals (expires_at);

-- Down Migration

DROP TABLE console_key_reveals;
DROP TABLE console_sign_in_failures;
DROP TABLE console_sessions;
