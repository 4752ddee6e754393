-- Up Migration

-- Sub-account resources. Every row belongs to one sub-account and goes with
-- it; every query of resource-service is bound to the caller's sub-account.
-- Lists walk (sub_account_id, created_at, id), hence one index per table.

CREATE TABLE agents (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  sub_account_id uuid NOT NULL REFERENCES sub_accounts (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- Lets a call reference an agent of its own sub-account only.
  CONSTRAINT agents_id_sub_account UNIQUE (id, sub_account_id)
);
CREATE INDEX agents_by_sub_account ON agents (sub_account_id, created_at, id);

CREATE TABLE contacts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  sub_account_id uuid NOT NULL REFERENCES sub_accounts (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  email text CHECK (length(email) BETWEEN 3 AND 254),
  phone text CHECK (phone ~ '^\+[1-9][0-9]{1,14}$'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT contacts_id_sub_account UNIQUE (id, sub_account_id)
);
CREATE INDEX contacts_by_sub_account ON contacts (sub_account_id, created_at, id);

CREATE TABLE calls (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  sub_account_id uuid NOT NULL REFERENCES sub_accounts (id) ON DELETE CASCADE,
  agent_id uuid NOT NULL,
  contact_id uuid NOT NULL,
  status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'in-progress', 'completed', 'failed')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- The sub-account is part of each reference, so a call can never point at
  -- another tenant's agent or contact. NO ACTION (checked at the end of the
  -- statement) refuses deleting an agent or contact that calls still use,
  -- yet lets a sub-account's deletion cascade through all three tables.
  CONSTRAINT calls_agent_fk FOREIGN KEY (agent_id, sub_account_id) REFERENCES agents (id, sub_account_id),
  CONSTRAINT calls_contact_fk FOREIGN KEY (contact_id, sub_account_id) REFERENCES contacts (id, sub_account_id)
);
CREATE INDEX calls_by_sub_account ON calls (sub_account_id, created_at, id);
CREATE INDEX calls_by_agent ON calls (agent_id, sub_account_id);
CREATE INDEX calls_by_contact ON calls (contact_id, sub_account_id);

-- Down Migration

DROP TABLE calls;
DROP TABLE contacts;
DROP TABLE agents;
