/**
 * The whole stack with a least-privilege login per process (migration 006):
 * the gateway as a member of scoped_gateway, resource-service of
 * scoped_resource, agency-service and ctl of scoped_agency; only the test's
 * own setup (the migrations) runs as the owner. Everything works as those
 * roles: tenants, users and keys made by ctl, API requests to both backends,
 * a console sign-in, last use written by the gateway, a revoke and a delete
 * that the gateways hear of through the log the triggers write. And what a
 * service role may not do, ctl refuses plainly: migrating.
 */
import t from 'tap'
import { createServiceLogin } from '../helpers/database-roles.js'
import { consoleSignIn } from '../helpers/console-https.js'
import { httpsClient } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'

const names: Record<'gateway' | 'resource' | 'agency', string> = { gateway: '', resource: '', agency: '' }
let agencyUrl = ''
const stack = await startStack(t, {
  databaseUrls: async (db) => {
    const [gateway, resource, agency] = await Promise.all([
      createServiceLogin(t, db, 'scoped_gateway'),
      createServiceLogin(t, db, 'scoped_resource'),
      createServiceLogin(t, db, 'scoped_agency'),
    ])
    Object.assign(names, { gateway: gateway.name, resource: resource.name, agency: agency.name })
    agencyUrl = agency.url
    return { gateway: gateway.url, resource: resource.url, agency: agency.url }
  },
})
const ctlEnv = { ...stack.ctlEnv, DATABASE_URL: agencyUrl }
const api = httpsClient(t, stack.gatewayPorts[0]!, stack.cert, { openapi: true })

async function ctl(args: string[], input = ''): Promise<Record<string, unknown>> {
  const result = await runCtl(args, ctlEnv, input)
  if (result.status !== 0) throw new Error(`ctl ${args.join(' ')} failed: ${result.stderr}`)
  return result.json as Record<string, unknown>
}

t.test('ctl, the API, the console and revocation all work as the service roles', async (t) => {
  const agency = await ctl(['agency', 'create', '--name', 'Least Privilege'])
  const sub = await ctl(['sub-account', 'create', '--agency', String(agency['id']), '--name', 'Least West'])
  const subKey = await ctl(['key', 'create', '--sub-account', String(sub['id']), '--name', 'crm'])
  const agencyKey = await ctl(['key', 'create', '--agency', String(agency['id']), '--name', 'billing'])
  const email = `owner-${Date.now()}@example.test`
  await ctl(['user', 'create', '--email', email, '--agency', String(agency['id']), '--role', 'owner'], 'a long and private passphrase\n')

  const asSub = { 'x-api-key': String(subKey['key']) }
  const asAgency = { 'x-api-key': String(agencyKey['key']) }
  const created = await api.request('/v1/agents', {
    method: 'POST',
    headers: { ...asSub, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Ada' }),
  })
  t.equal(created.status, 201, 'resource-service writes its tables')
  t.equal((await api.request('/v1/agents', { headers: asSub })).json.data.length, 1, 'and reads them')
  t.equal((await api.request('/v1/agency', { headers: asAgency })).status, 200, 'agency-service reads its agency')
  const newSub = await api.request('/v1/agency/sub-accounts', {
    method: 'POST',
    headers: { ...asAgency, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Least East' }),
  })
  t.equal(newSub.status, 201, 'and makes sub-accounts (with their audit event)')

  t.equal((await consoleSignIn(api, email, 'wrong password, twice wrong')).status, 401, 'a failed console sign-in is recorded')
  t.equal((await consoleSignIn(api, email, 'a long and private passphrase')).status, 303, 'a console sign-in reads the user and makes a session')

  let lastUsedAt: unknown = null
  for (let waited = 0; lastUsedAt === null && waited < 15_000; waited += 500) {
    const list = (await ctl(['key', 'list', '--sub-account', String(sub['id'])])) as unknown as Array<{ id: string; lastUsedAt: unknown }>
    lastUsedAt = list.find((item) => item.id === subKey['id'])?.lastUsedAt ?? null
    if (lastUsedAt === null) await new Promise((resolve) => setTimeout(resolve, 500))
  }
  t.ok(lastUsedAt, 'the gateway wrote the key last use')

  const updated = await ctl(['key', 'update', String(subKey['id']), '--allow-cidr', '127.0.0.1/32'])
  t.same(updated['allowedCidrs'], ['127.0.0.1/32'], 'a key change (logged as "changed" by the trigger, as the owner)')
  t.equal((await api.request('/v1/agents', { headers: asSub })).status, 200, 'and the gateway applies it')
  const rolled = await ctl(['key', 'roll', String(agencyKey['id']), '--grace', '60s'])
  t.equal(rolled['replaces'], agencyKey['id'], 'a roll')
  t.equal((await api.request('/v1/agency', { headers: { 'x-api-key': String(rolled['key']) } })).status, 200, 'the new key works')
  const trail = await api.request('/v1/agency/audit-events', { headers: { 'x-api-key': String(rolled['key']) } })
  t.equal(trail.status, 200, 'the audit trail reads')
  t.ok(trail.json.data.length >= 4, 'with every event written as scoped_agency')

  t.same(await ctl(['key', 'revoke', String(subKey['id'])]), { id: subKey['id'], status: 'revoked' })
  const revoked = await api.request('/v1/agents', { headers: asSub })
  t.equal(revoked.status, 401, 'the revoke reached the gateway at once')
  t.same(revoked.json, { success: false, message: 'Invalid or revoked API key' })
  t.same(await ctl(['key', 'delete', String(agencyKey['id'])]), { id: agencyKey['id'], deleted: true })
  t.same(
    (await api.request('/v1/agency', { headers: asAgency })).json,
    { success: false, message: 'Invalid or revoked API key' },
    'a deleted key left its tombstone',
  )
})

t.test('each process was connected as its own login', async (t) => {
  const { rows } = await stack.db.pool.query<{ usename: string; application_name: string }>(
    `SELECT DISTINCT usename, application_name FROM pg_stat_activity WHERE datname = $1 AND application_name IN ('gateway', 'agency-service', 'resource-service')`,
    [stack.db.name],
  )
  const byApplication = new Map(rows.map((row) => [row.application_name, row.usename]))
  t.equal(byApplication.get('gateway'), names.gateway)
  t.equal(byApplication.get('resource-service'), names.resource)
  t.equal(byApplication.get('agency-service'), names.agency)
})

t.test('ctl as a service role refuses to migrate, and says how', async (t) => {
  const result = await runCtl(['migrate'], ctlEnv)
  t.equal(result.status, 1)
  t.match(result.stderr, /cannot apply migrations.*ctl migrate.*Database roles/)
  const asOwner = await runCtl(['migrate'], stack.ctlEnv)
  t.same(asOwner.json, { applied: [] }, 'the owner can (nothing is pending)')
})
