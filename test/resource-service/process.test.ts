/**
 * resource-service as the process operators run: configuration checked once
 * at start, migrations applied at start (safely by several at once), a
 * "ready" line, and SIGTERM that finishes the request in flight and exits 0.
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import t from 'tap'
import pg from 'pg'
import { createAgency, createSubAccount } from '@scoped/agency-service/tenants'
import { createTestDatabase, serverUrl } from '../helpers/database.js'
import { freePort, runToExit, startProcess } from '../helpers/processes.js'
import type { ProcessEnv } from '../helpers/processes.js'
import { request, subAccountTenant } from '../helpers/signed-request.js'

const entry = 'resource-service/src/main.ts'
const secret = randomBytes(24).toString('hex')

t.test('a bad configuration stops the process with one line naming the variable', async (t) => {
  const base = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', TENANT_SIGNING_SECRET: secret, RESOURCE_SERVICE_PORT: '0' }
  const cases: Array<[string, ProcessEnv, RegExp]> = [
    ['no signing secret', { ...base, TENANT_SIGNING_SECRET: undefined }, /^resource-service: invalid configuration: TENANT_SIGNING_SECRET: is required\n$/],
    ['a short signing secret', { ...base, TENANT_SIGNING_SECRET: 'short' }, /^resource-service: invalid configuration: TENANT_SIGNING_SECRET: is too short/],
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
  const name = `sak_test_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  t.teardown(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
  })
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  const ports = [await freePort(), await freePort(), await freePort()]
  const started = await Promise.all(
    ports.map((port) => startProcess(t, entry, { DATABASE_URL: url.href, TENANT_SIGNING_SECRET: secret, RESOURCE_SERVICE_PORT: String(port) }, /resource-service ready/)),
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
  const agency = await createAgency(db.pool, 'Agency')
  const sub = await createSubAccount(db.pool, agency.id, 'Sub')
  const tenant = subAccountTenant(agency.id, sub.id)
  const port = await freePort()
  const service = await startProcess(t, entry, { DATABASE_URL: db.url, TENANT_SIGNING_SECRET: secret, RESOURCE_SERVICE_PORT: String(port) }, /resource-service ready/)
  const baseUrl = `http://127.0.0.1:${port}`
  const created = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing: { secret, tenant } })
  t.equal(created.status, 201)
  const id = created.item['id']!

  // Hold the agent's row so the service's update waits on it, in flight.
  const holder = await db.pool.connect()
  t.teardown(() => holder.release())
  await holder.query('BEGIN')
  await holder.query('SELECT 1 FROM agents WHERE id = $1 FOR UPDATE', [id])
  const update = request(baseUrl, 'PATCH', `/v1/agents/${id}`, { body: { name: 'Ada Lovelace' }, signing: { secret, tenant } })
  for (let waiting = 0; waiting === 0; ) {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'resource-service' AND wait_event_type = 'Lock'`,
      [db.name],
    )
    waiting = rows[0]!.n
    if (waiting === 0) await delay(20)
  }
  const exit = service.stop('SIGTERM')
  // The process must be stopping (refusing new connections) before the row is released.
  for (let refused = false; !refused; ) {
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
