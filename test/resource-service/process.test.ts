/**
 * resource-service as the process operators run: configuration checked once
 * at start, migrations applied at start (safely by several at once), a
 * "ready" line, and SIGTERM that finishes the request in flight and exits 0.
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import t from 'tap'
import pg from 'pg'
import { TenantStore } from '@scoped/agency-service/tenants'
import { createTestDatabase, emptyTestDatabase } from '../helpers/database.js'
import { freePort, runToExit, startProcess } from '../helpers/processes.js'
import type { ProcessEnv } from '../helpers/processes.js'
import { deriveSecret, readAudienceSecrets } from '@scoped/shared/secrets'
import { AGENCY_SERVICE_AUDIENCE, contentDigest, RESOURCE_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { newNonce, request, subAccountTenant } from '../helpers/signed-request.js'
import type { SigningOptions } from '../helpers/signed-request.js'

const entry = 'resource-service/src/main.ts'
/** TENANT_SIGNING_SECRET, as the gateway and the backends are given it. */
const secret = randomBytes(24).toString('hex')
/** What resource-service derives from it for its own audience: what the gateway signs its requests with. */
const resourceSecret = readAudienceSecrets({ TENANT_SIGNING_SECRET: secret }, RESOURCE_SERVICE_AUDIENCE)[0]!
/** What agency-service derives from the same master: it must not open resource-service. */
const agencySecret = readAudienceSecrets({ TENANT_SIGNING_SECRET: secret }, AGENCY_SERVICE_AUDIENCE)[0]!
const refused = { success: false, message: 'Request was not signed by the gateway' }

t.test('a bad configuration stops the process with one line naming the variable', async (t) => {
  const base = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', TENANT_SIGNING_SECRET: secret, RESOURCE_SERVICE_PORT: '0' }
  const cases: Array<[string, ProcessEnv, RegExp]> = [
    [
      'no signing secret',
      { ...base, TENANT_SIGNING_SECRET: undefined },
      /^resource-service: invalid configuration: TENANT_SIGNING_SECRET: is required \(or RESOURCE_SERVICE_SIGNING_SECRET\)\n$/,
    ],
    ['a short signing secret', { ...base, TENANT_SIGNING_SECRET: 'short' }, /^resource-service: invalid configuration: TENANT_SIGNING_SECRET: is too short/],
    [
      'a short own signing secret',
      { ...base, RESOURCE_SERVICE_SIGNING_SECRET: 'short' },
      /^resource-service: invalid configuration: RESOURCE_SERVICE_SIGNING_SECRET: is too short/,
    ],
    [
      'the own previous secret equal to the own one',
      { ...base, RESOURCE_SERVICE_SIGNING_SECRET: secret, RESOURCE_SERVICE_SIGNING_SECRET_PREVIOUS: secret },
      /^resource-service: invalid configuration: RESOURCE_SERVICE_SIGNING_SECRET_PREVIOUS: must differ/,
    ],
    ['a bad port', { ...base, RESOURCE_SERVICE_PORT: 'http' }, /^resource-service: invalid configuration: RESOURCE_SERVICE_PORT: must be a port number/],
    ['a bad database URL', { ...base, DATABASE_URL: 'mysql://x' }, /^resource-service: invalid configuration: DATABASE_URL: must use postgres/],
  ]
  for (const [name, env, expected] of cases) {
    const result = await runToExit(entry, env)
    t.equal(result.status, 1, name)
    t.match(result.stderr, expected, name)
    t.notMatch(result.stderr, secret, `${name}: the secret is never printed`)
  }
})

t.test('several processes start at once on an empty database, migrate it, and serve', async (t) => {
  const url = new URL((await emptyTestDatabase(t)).url)
  const ports = [await freePort(), await freePort(), await freePort()]
  const started = await Promise.all(
    ports.map((port) =>
      startProcess(t, entry, { DATABASE_URL: url.href, TENANT_SIGNING_SECRET: secret, RESOURCE_SERVICE_PORT: String(port) }, /resource-service ready/),
    ),
  )
  for (const running of started) {
    const ready = running
      .output()
      .split('\n')
      .find((line) => line.includes('resource-service ready'))!
    t.match(JSON.parse(ready), { msg: 'resource-service ready', address: /^http:\/\/127\.0\.0\.1:/ }, 'a JSON log line; listening on 127.0.0.1 by default')
  }
  const client = new pg.Client({ connectionString: url.href })
  await client.connect()
  t.teardown(() => client.end())
  const { rows } = await client.query<{ name: string }>(`SELECT name FROM schema_migrations ORDER BY name`)
  const applied = rows.map((row) => row.name)
  t.equal(new Set(applied).size, applied.length, 'each migration applied once')
  t.ok(applied.includes('001_tenancy_and_keys') && applied.includes('002_resources'), 'the resource tables were migrated')
  for (const port of ports) {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`)
    t.equal(response.status, 200, `replica on ${port} is ready`)
  }
})

t.test('SIGTERM finishes the request in flight, then the process exits 0', async (t) => {
  const db = await createTestDatabase(t)
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Agency')
  const sub = await tenants.createSubAccount(agency.id, 'Sub')
  const tenant = subAccountTenant(agency.id, sub.id)
  const port = await freePort()
  const service = await startProcess(
    t,
    entry,
    { DATABASE_URL: db.url, TENANT_SIGNING_SECRET: secret, RESOURCE_SERVICE_PORT: String(port) },
    /resource-service ready/,
  )
  const baseUrl = `http://127.0.0.1:${port}`
  const created = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing: { secret: resourceSecret, tenant } })
  t.equal(created.status, 201)
  const id = created.item['id']!

  // Hold the agent's row so the service's update waits on it, in flight.
  const holder = await db.pool.connect()
  t.teardown(() => holder.release())
  await holder.query('BEGIN')
  await holder.query('SELECT 1 FROM agents WHERE id = $1 FOR UPDATE', [id])
  const update = request(baseUrl, 'PATCH', `/v1/agents/${id}`, { body: { name: 'Ada Lovelace' }, signing: { secret: resourceSecret, tenant } })
  for (let waiting = 0; waiting === 0;) {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'resource-service' AND wait_event_type = 'Lock'`,
      [db.name],
    )
    waiting = rows[0]!.n
    if (waiting === 0) await delay(20)
  }
  const exit = service.stop('SIGTERM')
  // The process must be stopping (refusing new connections) before the row is released.
  for (let refused = false; !refused;) {
    refused = await fetch(`${baseUrl}/healthz`).then(
      (response) => response.status === 503,
      () => true,
    )
    if (!refused) await delay(20)
  }
  await holder.query('COMMIT')
  const answered = await update
  t.equal(answered.status, 200, 'the request in flight was answered')
  t.equal(answered.item['name'], 'Ada Lovelace')
  t.equal(await exit, 0, 'exit status 0')
  t.match(service.output(), /resource-service stopping/)
})

interface RunningService {
  baseUrl: string
  tenant: Tenant
  db: Awaited<ReturnType<typeof createTestDatabase>>
  output: () => string
}

/** resource-service as a process over a database of its own, with one sub-account to act as. */
async function startService(t: Parameters<typeof createTestDatabase>[0], env: ProcessEnv): Promise<RunningService> {
  const db = await createTestDatabase(t)
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Agency')
  const sub = await tenants.createSubAccount(agency.id, 'Sub')
  const port = await freePort()
  const service = await startProcess(t, entry, { DATABASE_URL: db.url, RESOURCE_SERVICE_PORT: String(port), ...env }, /resource-service ready/)
  return { baseUrl: `http://127.0.0.1:${port}`, tenant: subAccountTenant(agency.id, sub.id), db, output: service.output }
}

t.test('a replayed signed request is refused', async (t) => {
  const { baseUrl, tenant } = await startService(t, { TENANT_SIGNING_SECRET: secret })
  const signing: SigningOptions = { secret: resourceSecret, tenant, nonce: newNonce(), timestamp: Math.floor(Date.now() / 1000) }
  const created = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing })
  t.equal(created.status, 201)
  const replayed = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing })
  t.equal(replayed.status, 401, 'the very same request, sent again')
  t.same(replayed.json, refused)
  const list = await request(baseUrl, 'GET', '/v1/agents', { signing: { secret: resourceSecret, tenant } })
  t.same(list.items, [created.item], 'one agent was created, not two')
})

t.test('a re-bodied signed POST/PATCH is refused (the change is not applied: read the row back)', async (t) => {
  const { baseUrl, tenant, db } = await startService(t, { TENANT_SIGNING_SECRET: secret })
  const created = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing: { secret: resourceSecret, tenant } })
  t.equal(created.status, 201)
  const id = created.item['id']!
  const signedFor = (body: unknown): SigningOptions => ({ secret: resourceSecret, tenant, contentDigest: contentDigest(JSON.stringify(body)) })

  const patch = await request(baseUrl, 'PATCH', `/v1/agents/${id}`, { body: { name: 'Mallory' }, signing: signedFor({ name: 'Ada Lovelace' }) })
  t.equal(patch.status, 401, 'a PATCH whose body is not the signed one')
  t.same(patch.json, refused)
  const post = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Mallory' }, signing: signedFor({ name: 'Grace' }) })
  t.equal(post.status, 401, 'a POST whose body is not the signed one')
  // The same bytes with one more byte: a body longer than the signed one.
  const longer = await request(baseUrl, 'POST', '/v1/agents', { rawBody: `${JSON.stringify({ name: 'Grace' })} `, signing: signedFor({ name: 'Grace' }) })
  t.equal(longer.status, 401, 'a body with a byte appended')

  const { rows } = await db.pool.query<{ id: string; name: string }>('SELECT id, name FROM agents ORDER BY created_at')
  t.same(rows, [{ id, name: 'Ada' }], 'the row is unchanged and nothing was created')
  const read = await request(baseUrl, 'GET', `/v1/agents/${id}`, { signing: { secret: resourceSecret, tenant } })
  t.equal(read.item['name'], 'Ada', 'and the service reads it back unchanged')
})

t.test("a request signed for the other backend's audience is refused", async (t) => {
  const { baseUrl, tenant } = await startService(t, { TENANT_SIGNING_SECRET: secret })
  const cases: Array<[string, SigningOptions]> = [
    ["agency-service's audience and secret", { secret: agencySecret, tenant, audience: AGENCY_SERVICE_AUDIENCE }],
    ["agency-service's audience, this backend's secret", { secret: resourceSecret, tenant, audience: AGENCY_SERVICE_AUDIENCE }],
    ["this audience, agency-service's secret", { secret: agencySecret, tenant, audience: RESOURCE_SERVICE_AUDIENCE }],
    ['this audience, the master secret itself', { secret, tenant, audience: RESOURCE_SERVICE_AUDIENCE }],
  ]
  for (const [name, signing] of cases) {
    const response = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Mallory' }, signing })
    t.equal(response.status, 401, name)
    t.same(response.json, refused, name)
  }
  const list = await request(baseUrl, 'GET', '/v1/agents', { signing: { secret: resourceSecret, tenant } })
  t.equal(list.status, 200, 'signed for this backend, with its secret: accepted')
  t.same(list.items, [], 'nothing was created')
})

t.test("a backend given only its own RESOURCE_SERVICE_SIGNING_SECRET (no TENANT_SIGNING_SECRET) works and refuses the other backend's secret", async (t) => {
  const own = randomBytes(24).toString('hex')
  const othersOwn = randomBytes(24).toString('hex')
  const { baseUrl, tenant } = await startService(t, { RESOURCE_SERVICE_SIGNING_SECRET: own })
  const created = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing: { secret: own, tenant } })
  t.equal(created.status, 201, 'signed with its own secret')
  const cases: Array<[string, SigningOptions]> = [
    [
      "the other backend's own secret (AGENCY_SERVICE_SIGNING_SECRET), for the other audience",
      { secret: othersOwn, tenant, audience: AGENCY_SERVICE_AUDIENCE },
    ],
    ["the other backend's own secret, for this audience", { secret: othersOwn, tenant, audience: RESOURCE_SERVICE_AUDIENCE }],
    ['a secret derived from some TENANT_SIGNING_SECRET', { secret: deriveSecret(secret, `tenant-signing:${RESOURCE_SERVICE_AUDIENCE}`), tenant }],
  ]
  for (const [name, signing] of cases) {
    const response = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Mallory' }, signing })
    t.equal(response.status, 401, name)
  }
  const list = await request(baseUrl, 'GET', '/v1/agents', { signing: { secret: own, tenant } })
  t.same(list.items, [created.item], 'only the request signed with its own secret was applied')
})

t.test('the request log has the path without its query, the request id, and no header', async (t) => {
  const { baseUrl, tenant, output } = await startService(t, { TENANT_SIGNING_SECRET: secret })
  const key = `sak_live_${randomBytes(24).toString('hex')}`
  const requestId = `log-test-${randomBytes(4).toString('hex')}`
  const response = await request(baseUrl, 'GET', `/v1/agents?api_key=${key}&limit=5`, {
    headers: { 'x-request-id': requestId, authorization: `Bearer ${key}`, 'x-api-key': key, 'user-agent': 'log-test-agent' },
    signing: { secret: resourceSecret, tenant },
  })
  t.equal(response.status, 400, 'the unknown query parameter is refused, after the request was logged')
  // The "request completed" line is written as the answer goes out; give the pipe a moment.
  for (let i = 0; i < 50 && !output().includes('request completed'); i++) await delay(20)
  const lines = output()
    .split('\n')
    .filter((line) => line.includes(requestId))
    .map((line) => JSON.parse(line) as { msg: string; req?: unknown })
  const incoming = lines.find((line) => line.msg === 'incoming request')
  t.same(incoming?.req, { method: 'GET', path: '/v1/agents', id: requestId }, 'method, path without the query, request id')
  t.notMatch(output(), key, 'the key in the query or headers is never logged')
  t.notMatch(output(), 'log-test-agent', 'no header is logged')
  t.notMatch(output(), 'limit=5', 'no query is logged')
})
