/**
 * Least privilege in the database (migration 006): what each service's role
 * may do, table by table, and what it cannot, tried as a real login of each
 * role (`CREATE ROLE … LOGIN IN ROLE scoped_gateway`): the gateway cannot
 * read password hashes, change a revocation or touch triggers; resource-service
 * cannot read keys; no service changes, removes or truncates the audit trail
 * or truncates api_keys. The owner is held by triggers too: TRUNCATE of
 * api_keys and of the audit trail is refused, and a revocation is final.
 * The work each service does still goes through as its role, triggers that
 * write the tombstones and the invalidation log included.
 */
import t from 'tap'
import type { Test } from 'tap'
import pg from 'pg'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { hashKey } from '@scoped/shared/keys'
import { leaveRegistry, lookupKeyByHash, pollInvalidations, readRecentInvalidations, recordLastUse } from '@scoped/shared/key-store'
import { migrate, migrateOrWait, NotSchemaOwnerError } from '@scoped/shared/migrate'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { grantLogin, scramSha256Verifier } from '@scoped/agency-service/db-logins'
import { writeRequestLog } from '@scoped/shared/request-log-store'
import { expireUsage, writeUsageBatch } from '@scoped/shared/usage-store'
import { createTestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'
import type { TestDatabase } from '../helpers/database.js'
import { createServiceLogin } from '../helpers/database-roles.js'
import type { ServiceGroupRole } from '../helpers/database-roles.js'

const PRIVILEGES = ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'] as const
type Grant = 'S' | 'I' | 'U' | 'D'
const LETTER: Record<string, Grant> = { SELECT: 'S', INSERT: 'I', UPDATE: 'U', DELETE: 'D' }

/**
 * Every table and view of the schema, and the table privileges of each
 * service role on it. A table that is not here fails the test: a migration
 * that adds one must decide (and grant) who may do what with it.
 */
const EXPECTED: Record<string, Record<ServiceGroupRole, string>> = {
  agencies: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIU' },
  sub_accounts: { scoped_gateway: '', scoped_resource: 'S', scoped_agency: 'SIUD' },
  users: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIU' },
  // DELETE since 008: ctl user remove and the console's members page remove memberships.
  agency_memberships: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SID' },
  sub_account_memberships: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SID' },
  // The gateway's UPDATE is on two columns only (checked below), not on the table.
  api_keys: { scoped_gateway: 'S', scoped_resource: '', scoped_agency: 'SIUD' },
  deleted_api_keys: { scoped_gateway: 'S', scoped_resource: '', scoped_agency: '' },
  // Since 015 nobody inserts into the trail but the database's own triggers and audit_declare.
  audit_events: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'S' },
  audit_declarations: { scoped_gateway: '', scoped_resource: '', scoped_agency: '' },
  api_key_events: { scoped_gateway: '', scoped_resource: '', scoped_agency: '' },
  agents: { scoped_gateway: '', scoped_resource: 'SIUD', scoped_agency: '' },
  contacts: { scoped_gateway: '', scoped_resource: 'SIUD', scoped_agency: '' },
  calls: { scoped_gateway: '', scoped_resource: 'SIUD', scoped_agency: '' },
  console_sessions: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIUD' },
  console_sign_in_failures: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIUD' },
  console_sign_in_refusals: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIUD' },
  console_key_reveals: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIUD' },
  console_form_submissions: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIUD' },
  // 022: the console's one-time notices (taken by a DELETE) and its invitations.
  console_notices: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SID' },
  console_invitations: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIUD' },
  key_invalidations: { scoped_gateway: 'S', scoped_resource: '', scoped_agency: '' },
  gateway_replicas: { scoped_gateway: 'S', scoped_resource: '', scoped_agency: 'S' },
  schema_migrations: { scoped_gateway: '', scoped_resource: 'S', scoped_agency: 'S' },
  // 019: agency-service keeps the endpoints, and its sender the outbox's state and the attempts; the outbox is filled by
  // a trigger and the expiry reminders by a function, both with the owner's rights.
  webhook_endpoints: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIUD' },
  webhook_messages: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SU' },
  webhook_attempts: { scoped_gateway: '', scoped_resource: '', scoped_agency: 'SIU' },
  webhook_key_reminders: { scoped_gateway: '', scoped_resource: '', scoped_agency: '' },
  // 017, 018: the gateway adds to the counts (an upsert reads the row) and appends to the request log; the service reads.
  usage_minutes: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  usage_hours: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  usage_days: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  // 025: the tenants' summaries without the key, written and read like the per-key rows.
  usage_summary_minutes: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  usage_summary_hours: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  usage_summary_days: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  // 026: the whole agency's summary, the same again; where the rollup stands, moved only by usage_roll_up.
  usage_agency_minutes: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  usage_agency_hours: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  usage_agency_days: { scoped_gateway: 'SIU', scoped_resource: '', scoped_agency: 'S' },
  usage_rollup: { scoped_gateway: 'S', scoped_resource: '', scoped_agency: 'S' },
  usage_batches: { scoped_gateway: 'I', scoped_resource: '', scoped_agency: '' },
  request_log: { scoped_gateway: 'I', scoped_resource: '', scoped_agency: 'S' },
}
const ROLES: ServiceGroupRole[] = ['scoped_gateway', 'scoped_resource', 'scoped_agency']

interface Logins {
  db: TestDatabase
  gateway: Pool
  resource: Pool
  agency: Pool
  urls: Record<'gateway' | 'resource' | 'agency', string>
}

async function logins(t: Test): Promise<Logins> {
  const db = await createTestDatabase(t)
  const [gateway, resource, agency] = await Promise.all(ROLES.map((role) => createServiceLogin(t, db, role)))
  const pools = [gateway!, resource!, agency!].map((login) => createPool(login.url, { max: 2, applicationName: 'scoped-api-test' }))
  // Teardowns run in order: the database goes first (its connections with it), then the logins, then these pools.
  t.teardown(() => Promise.all(pools.map((pool) => pool.end())))
  return { db, gateway: pools[0]!, resource: pools[1]!, agency: pools[2]!, urls: { gateway: gateway!.url, resource: resource!.url, agency: agency!.url } }
}

/** The SQLSTATE a statement fails with, or 'ok'. */
async function outcome(pool: Pool, sql: string, values: unknown[] = []): Promise<string> {
  try {
    await pool.query(sql, values)
    return 'ok'
  } catch (error) {
    return (error as { code?: string }).code ?? String(error)
  }
}

const DENIED = '42501'
const RAISED = 'P0001'

/** An agency, a sub-account and one key of it, made by the owner. */
async function seed(pool: Pool): Promise<{ agencyId: string; subAccountId: string; keyId: string; key: string }> {
  const tenants = new TenantStore(pool)
  const agency = await tenants.createAgency('Least')
  const sub = await tenants.createSubAccount(agency.id, 'Least West')
  const keys = new KeyService(pool, new KeyRevocationNotifier(pool, null))
  const created = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'seed', 'test')
  return { agencyId: agency.id, subAccountId: sub.id, keyId: created.id, key: created.key }
}

t.test('every table has decided grants, and each role has exactly those', async (t) => {
  const db = await createTestDatabase(t)
  const { rows: tables } = await db.pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'v', 'p', 'm') AND NOT c.relispartition ORDER BY 1`,
  )
  for (const { name } of tables) {
    const expected = EXPECTED[name]
    if (expected === undefined) {
      t.fail(`table ${name} has no decided grants: grant on it in its migration and add it to EXPECTED`)
      continue
    }
    for (const role of ROLES) {
      const { rows } = await db.pool.query<{ privilege: string; granted: boolean }>(
        `SELECT p AS privilege, has_table_privilege($1, $2, p) AS granted FROM unnest($3::text[]) AS p`,
        [role, name, PRIVILEGES],
      )
      const held = rows
        .filter((row) => row.granted)
        .map((row) => LETTER[row.privilege] ?? row.privilege)
        .join('')
      t.equal(held, expected[role], `${role} on ${name}`)
    }
  }
  t.same(tables.map((table) => table.name).sort(), Object.keys(EXPECTED).sort(), 'the schema has every table the matrix names (none renamed or gone)')
  const columns = await db.pool.query<{ column: string }>(
    `SELECT attname AS column FROM pg_attribute WHERE attrelid = 'api_keys'::regclass AND attnum > 0 AND NOT attisdropped
        AND has_column_privilege('scoped_gateway', 'api_keys', attname, 'UPDATE') ORDER BY 1`,
  )
  t.same(
    columns.rows.map((row) => row.column),
    ['last_used_at', 'last_used_ip'],
    'the gateway may update the last-use columns of a key and nothing else',
  )
  const roles = await db.pool.query<{ rolname: string; rolcanlogin: boolean; rolsuper: boolean; rolcreaterole: boolean; rolbypassrls: boolean }>(
    `SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = ANY($1) ORDER BY 1`,
    [ROLES],
  )
  t.equal(roles.rows.length, 3, 'the migration made the three group roles')
  for (const role of roles.rows) {
    t.notOk(role.rolcanlogin || role.rolsuper || role.rolcreaterole || role.rolbypassrls, `${role.rolname} is a NOLOGIN group role without attributes`)
  }
})

t.test('the gateway: reads keys, writes last use and its registry row, nothing else', async (t) => {
  const { db, gateway, agency } = await logins(t)
  const { keyId, key } = await seed(db.pool)

  t.match(await lookupKeyByHash(gateway, hashKey(key)), { status: 'active' }, 'looks a key up')
  await recordLastUse(gateway, new Map([[keyId, { at: new Date(), ip: '203.0.113.9' }]]))
  const used = await db.pool.query(`SELECT last_used_at, host(last_used_ip) AS ip FROM api_keys WHERE id = $1`, [keyId])
  t.equal(used.rows[0].ip, '203.0.113.9', 'records last use')
  const start = await readRecentInvalidations(gateway, 60)
  await pollInvalidations(gateway, 'replica-under-test', start.snapshot, 1500)
  const beat = await db.pool.query<{ stamped: boolean }>(
    `SELECT seen_at BETWEEN now() - interval '1 minute' AND clock_timestamp() AS stamped FROM gateway_replicas WHERE replica_id = 'replica-under-test'`,
  )
  t.same(beat.rows, [{ stamped: true }], 'keeps its registry row, stamped by the database')
  const future = `'2099-01-01T00:00:00Z'`
  t.equal(
    await outcome(gateway, `INSERT INTO gateway_replicas (replica_id, seen_at, applied_snapshot) VALUES ('forged', ${future}, $1)`, [start.snapshot]),
    DENIED,
    'cannot register a replica of its choosing',
  )
  t.equal(await outcome(gateway, `UPDATE gateway_replicas SET seen_at = ${future}`), DENIED, 'cannot choose when it was seen')
  t.equal(await outcome(gateway, `DELETE FROM gateway_replicas`), DENIED, 'cannot remove other replicas')
  t.equal(
    await outcome(agency, `SELECT gateway_replica_heartbeat('agency', $1::pg_snapshot, 1500)`, [start.snapshot]),
    DENIED,
    'no other service keeps a heartbeat',
  )
  await leaveRegistry(gateway, 'replica-under-test')
  t.equal((await db.pool.query(`SELECT 1 FROM gateway_replicas WHERE replica_id = 'replica-under-test'`)).rowCount, 0, 'leaves the registry')

  t.equal(await outcome(gateway, `SELECT password_hash FROM users`), DENIED, 'cannot read password hashes')
  t.equal(await outcome(gateway, `SELECT id FROM users`), DENIED, 'cannot read users at all')
  t.equal(await outcome(gateway, `UPDATE api_keys SET revoked_at = NULL, revoked_by = NULL WHERE id = $1`, [keyId]), DENIED, 'cannot change revoked_at')
  t.equal(await outcome(gateway, `UPDATE api_keys SET allowed_cidrs = '{}' WHERE id = $1`, [keyId]), DENIED, 'cannot change what a key may do')
  t.equal(await outcome(gateway, `DELETE FROM api_keys WHERE id = $1`, [keyId]), DENIED, 'cannot delete a key')
  t.equal(await outcome(gateway, `INSERT INTO key_invalidations (key_hash, state) VALUES ($1, 'revoked')`, ['a'.repeat(64)]), DENIED, 'cannot forge the log')
  t.equal(await outcome(gateway, `ALTER TABLE api_keys DISABLE TRIGGER api_keys_immutable`), DENIED, 'cannot disable a trigger')
  t.equal(await outcome(gateway, `ALTER TABLE api_keys DISABLE TRIGGER ALL`), DENIED, 'cannot disable all triggers')
  t.equal(await outcome(gateway, `DROP TRIGGER api_keys_tombstone ON api_keys`), DENIED, 'cannot drop a trigger')
  t.equal(await outcome(gateway, `SET session_replication_role = replica`), DENIED, 'cannot switch triggers off for its session')
  t.equal(await outcome(gateway, `CREATE TABLE scratch (id int)`), DENIED, 'cannot create tables')
  t.equal(await outcome(gateway, `SELECT name FROM schema_migrations`), DENIED, 'does not read the migrations table')
})

t.test('resource-service: its own tables; never a key', async (t) => {
  const { db, resource } = await logins(t)
  const { subAccountId } = await seed(db.pool)
  const agent = await resource.query<{ id: string }>(`INSERT INTO agents (sub_account_id, name) VALUES ($1, 'Ada') RETURNING id`, [subAccountId])
  t.equal(agent.rowCount, 1, 'writes its own tables (the foreign key to sub_accounts is checked)')
  t.equal(await outcome(resource, `SELECT id FROM sub_accounts`), 'ok', 'reads sub-accounts')
  t.equal(await outcome(resource, `SELECT key_hash FROM api_keys`), DENIED, 'cannot read api_keys')
  t.equal(await outcome(resource, `SELECT key_hash FROM deleted_api_keys`), DENIED, 'cannot read tombstones')
  t.equal(await outcome(resource, `SELECT password_hash FROM users`), DENIED, 'cannot read users')
  t.equal(await outcome(resource, `DELETE FROM sub_accounts`), DENIED, 'cannot delete sub-accounts')
  t.equal(await outcome(resource, `SELECT * FROM audit_events`), DENIED, 'cannot read the audit trail')
})

t.test('agency-service: keys end with their records, the audit trail only grows', async (t) => {
  const { db, agency } = await logins(t)
  const tenants = new TenantStore(agency)
  const made = await tenants.createAgency('As agency')
  const sub = await tenants.createSubAccount(made.id, 'As agency West', 'test')
  const keys = new KeyService(agency, new KeyRevocationNotifier(agency, null))
  const first = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'first', 'test')
  const second = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'second', 'test')
  await keys.revoke(first.id, 'test')
  await keys.delete(second.id, 'test')
  const log = await db.pool.query<{ state: string }>(`SELECT state FROM key_invalidations WHERE key_hash = ANY($1) ORDER BY id`, [
    [hashKey(first.key), hashKey(second.key)],
  ])
  t.same(
    log.rows.map((row) => row.state),
    ['created', 'created', 'revoked', 'deleted'],
    'the invalidation log is written by the triggers, which run as the owner (creations too, for the issued-key filters)',
  )
  t.equal((await db.pool.query(`SELECT 1 FROM deleted_api_keys WHERE key_hash = $1`, [hashKey(second.key)])).rowCount, 1, 'a deleted key leaves its tombstone')
  t.ok((await db.pool.query(`SELECT 1 FROM audit_events`)).rowCount! >= 4, 'each step is in the audit trail')

  for (const sql of [`UPDATE audit_events SET actor_id = 'someone else'`, `DELETE FROM audit_events`, `TRUNCATE audit_events`]) {
    t.equal(await outcome(agency, sql), DENIED, `refused by the grants: ${sql}`)
  }
  t.equal(await outcome(agency, `TRUNCATE api_keys`), DENIED, 'cannot truncate api_keys')
  t.equal(await outcome(agency, `DELETE FROM key_invalidations`), DENIED, 'cannot empty the invalidation log')
  t.equal(await outcome(agency, `DELETE FROM deleted_api_keys`), DENIED, 'cannot remove tombstones')
  t.equal(await outcome(agency, `SELECT * FROM agents`), DENIED, 'no business with resource tables')
  t.equal(await outcome(agency, `ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only`), DENIED, 'cannot disable the append-only trigger')
  t.equal(
    await outcome(agency, `UPDATE api_keys SET revoked_by = 'someone else' WHERE id = $1`, [first.id]),
    RAISED,
    'a revocation is final for it too (trigger)',
  )
})

t.test('no service role may change the audit trail or truncate keys; the owner is held by triggers', async (t) => {
  const { db, gateway, resource, agency } = await logins(t)
  const { keyId } = await seed(db.pool)
  for (const [name, pool] of [
    ['gateway', gateway],
    ['resource-service', resource],
    ['agency-service', agency],
  ] as const) {
    for (const sql of [
      `UPDATE audit_events SET actor_id = 'x'`,
      `DELETE FROM audit_events`,
      `TRUNCATE audit_events`,
      `TRUNCATE api_keys`,
      `TRUNCATE api_keys CASCADE`,
    ]) {
      t.equal(await outcome(pool, sql), DENIED, `${name}: ${sql}`)
    }
  }
  t.equal(await outcome(db.pool, `TRUNCATE api_keys CASCADE`), RAISED, 'even the owner cannot truncate api_keys (it would skip the tombstones)')
  t.equal(await outcome(db.pool, `TRUNCATE agencies CASCADE`), RAISED, 'nor through a cascade')
  t.equal(await outcome(db.pool, `TRUNCATE audit_events`), RAISED, 'nor the audit trail')
  await db.pool.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = 'ctl:ops' WHERE id = $1`, [keyId])
  t.equal(await outcome(db.pool, `UPDATE api_keys SET revoked_by = 'ctl:someone else' WHERE id = $1`, [keyId]), RAISED, 'who revoked a key never changes')
  t.equal(await outcome(db.pool, `UPDATE api_keys SET revoked_at = revoked_at - interval '1 day' WHERE id = $1`, [keyId]), RAISED, 'nor when')
  t.equal(await outcome(db.pool, `UPDATE api_keys SET last_used_at = now() WHERE id = $1`, [keyId]), 'ok', 'last use of a revoked key is still written')
})

t.test('service roles cannot migrate; they check that nothing is pending', async (t) => {
  const { urls, db } = await logins(t)
  await t.rejects(migrate(urls.agency), NotSchemaOwnerError, 'ctl migrate as a service role says to run it as the owner')
  t.same(await migrateOrWait(urls.resource, { waitMs: 0 }), [], 'a current schema: nothing to wait for')
  await db.pool.query(`DELETE FROM schema_migrations WHERE name = '006_least_privilege'`)
  await t.rejects(
    migrateOrWait(urls.agency, { waitMs: 0 }),
    /lacks migrations 006_least_privilege.*ctl migrate/,
    'a pending migration stops a service that cannot apply it',
  )
  let told: string[] = []
  let saidIt: () => void = () => undefined
  const said = new Promise<void>((resolve) => (saidIt = resolve))
  const waiting = migrateOrWait(urls.agency, {
    waitMs: 10_000,
    pollMs: 50,
    onWait: (pending) => {
      told = pending
      saidIt()
    },
  })
  await said
  await db.pool.query(`INSERT INTO schema_migrations (name, run_on) VALUES ('006_least_privilege', now())`)
  t.same(await waiting, [], 'it waits for the migration job, then starts')
  t.same(told, ['006_least_privilege'], 'and said what it was waiting for')
})

t.test('ctl db grant-login: a login in one group role, keyed by a SCRAM verifier, never a privileged role', async (t) => {
  const db = await createTestDatabase(t)
  const user = `sak_test_login_${Date.now().toString(36)}`
  const admin = new pg.Client({ connectionString: db.url })
  await admin.connect()
  t.teardown(async () => {
    await admin.query(`DROP ROLE IF EXISTS ${user}, ${user}_cli`)
    await admin.end()
  })
  const password = 'f'.repeat(8) + '0123456789abcdef'
  t.same(await grantLogin(db.pool, { role: 'scoped_gateway', user, password }), { user, role: 'scoped_gateway', created: true })
  const { rows } = await admin.query<{ rolcanlogin: boolean; groups: string[]; verifier: string }>(
    `SELECT r.rolcanlogin, ARRAY(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid)::text[] AS groups,
            a.rolpassword AS verifier
       FROM pg_roles r JOIN pg_authid a ON a.oid = r.oid WHERE r.rolname = $1`,
    [user],
  )
  t.equal(rows[0]?.rolcanlogin, true)
  t.same(rows[0]?.groups, ['scoped_gateway'], 'a member of the one group role')
  const match = /^SCRAM-SHA-256\$(\d+):([^$]+)\$(.+)$/.exec(rows[0]?.verifier ?? '')
  t.ok(match, 'the server stores the SCRAM verifier it was given')
  t.equal(scramSha256Verifier(password, Buffer.from(match![2]!, 'base64'), Number(match![1])), rows[0]?.verifier, 'computed from the password')

  t.same(
    await grantLogin(db.pool, { role: 'scoped_gateway', user, password: 'g'.repeat(32) }),
    { user, role: 'scoped_gateway', created: false },
    'run again: a new password',
  )
  await t.rejects(
    grantLogin(db.pool, { role: 'scoped_agency', user, password: 'g'.repeat(32) }),
    /more than a scoped_agency login/,
    'never a member of two group roles',
  )
  await t.rejects(
    grantLogin(db.pool, { role: 'scoped_gateway', user: 'postgres', password: 'g'.repeat(32) }),
    /more than a scoped_gateway login/,
    'never a privileged role',
  )
  await t.rejects(grantLogin(db.pool, { role: 'scoped_owner', user, password: 'g'.repeat(32) }), /--role must be one of/)
  await t.rejects(grantLogin(db.pool, { role: 'scoped_gateway', user: 'Robert"; DROP', password: 'g'.repeat(32) }), /--user must be/)
  await t.rejects(grantLogin(db.pool, { role: 'scoped_gateway', user, password: 'short' }), /16 to 1024 printable ASCII/)

  const cli = `${user}_cli`
  const made = await runCtl(['db', 'grant-login', '--role', 'scoped_resource', '--user', cli], { DATABASE_URL: db.url }, `${'h'.repeat(32)}\n`)
  t.same(made.json, { user: cli, role: 'scoped_resource', created: true }, 'ctl db grant-login, the password on stdin')
  const refused = await runCtl(['db', 'grant-login', '--role', 'scoped_resource', '--user', 'postgres'], { DATABASE_URL: db.url }, `${'h'.repeat(32)}\n`)
  t.equal(refused.status, 1, 'ctl refuses to re-key a privileged role')
})

t.test('the gateway writes usage and the request log as its role (partitions made by the owner’s functions); agency-service reads them', async (t) => {
  const { gateway, agency } = await logins(t)
  const ids = { keyId: crypto.randomUUID(), agencyId: crypto.randomUUID(), subAccountId: null }
  const row = { bucket: Date.UTC(2026, 0, 2, 3, 4), ...ids, route: '/v1/agency', outcome: 'served', statusClass: 2, requests: 3, latency: [3] }
  const logRow = {
    at: Date.UTC(2026, 0, 2, 3, 4),
    requestId: 'r1',
    ...ids,
    method: 'GET',
    path: '/v1/agency',
    status: 503,
    outcome: 'served',
    durationMs: 1,
    clientAddress: null,
  }
  const batch = {
    replicaId: 'roles',
    seq: 1,
    minutes: [row],
    hours: [row],
    days: [row],
    alsoWrite: (client: pg.PoolClient) => writeRequestLog(client, [logRow], 10),
  }
  t.equal(await writeUsageBatch(gateway, batch), 'applied')
  t.equal(await writeUsageBatch(gateway, batch), 'duplicate')
  t.equal((await agency.query('SELECT sum(requests)::int AS n FROM usage_summary_hours')).rows[0]?.n, 6, 'the summaries written as the gateway')
  t.equal(
    (await agency.query('SELECT sum(requests)::int AS n FROM usage_agency_hours')).rows[0]?.n,
    6,
    "the agency's summary too: the minute row late for its rolled hour, and the hour row",
  )
  t.equal(await outcome(gateway, 'SELECT usage_roll_up(now())'), 'ok', 'the gateway rolls up the hours')
  t.equal(await outcome(gateway, 'UPDATE usage_rollup SET rolled_until = rolled_until'), DENIED, 'but moves the rollup only through it')
  t.equal(await outcome(gateway, 'DELETE FROM usage_hours'), DENIED, 'nor deletes the rows it replaces')
  t.equal(await expireUsage(gateway, { minutes: 86_400, hours: 86_400, days: 86_400 }), 9, 'the 2026-01 partitions are past a day, per key and summed')
  t.equal(await outcome(gateway, 'DELETE FROM request_log'), DENIED, 'the gateway removes no log row itself')
  t.equal(await outcome(gateway, 'SELECT usage_partition($1, $2, now())', ['usage_minutes', 'day']), DENIED, 'nor makes a partition but through usage_prepare')
  t.equal((await agency.query('SELECT count(*)::int AS n FROM request_log')).rows[0]?.n, 1)
  t.equal(await outcome(agency, 'INSERT INTO usage_batches (replica_id, seq) VALUES ($1, 1)', ['x']), DENIED)
})
