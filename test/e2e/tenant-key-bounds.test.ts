/**
 * A tenant's keys stay within its bounds whatever the sequence (issue 26),
 * through the agency API over HTTPS: 100 rolls after the 25th key, each with
 * a grace period, and at no point do more than 25 keys plus the one in grace
 * work, judged by the gateway for every key ever issued; a roll carries every
 * limit of the old key (allowlist, rate limit, expiry policy) to the new one;
 * and an agency's default rate limit for a sub-account's keys, which every
 * new key gets.
 */
import t from 'tap'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import type { HttpsClient, HttpsResponse } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { startStack } from '../helpers/stack.js'

const stack = await startStack(t, { replicas: 1, gatewayEnv: { GATEWAY_TRUSTED_PROXIES: '127.0.0.1' } })
const gateway = httpsClient(t, stack.gatewayPorts[0]!, stack.cert)
const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
const tenants = new TenantStore(stack.db.pool)
const agency = await tenants.createAgency('Chain')
const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: agency.id }, 'automation', 'ctl:ops')

function call(
  client: HttpsClient,
  method: 'GET' | 'POST' | 'PATCH',
  path: string,
  key: string,
  options: { body?: unknown; from?: string } = {},
): Promise<HttpsResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` }
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  if (options.from !== undefined) headers['x-forwarded-for'] = options.from
  return client.request(path, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) })
}

const keysOf = (subAccountId: string): string => `/v1/agency/sub-accounts/${subAccountId}/keys`

let client = 0

/**
 * How the gateway answers each of `plaintexts` right now, as counts by status.
 * Each request comes from a client address of its own, so the ended keys'
 * 401s never make the failed-authentication throttle refuse the others.
 */
async function working(plaintexts: readonly string[]): Promise<Record<number, number>> {
  const answers: Record<number, number> = {}
  for (const key of plaintexts) {
    client++
    const { status } = await call(gateway, 'GET', '/v1/agents', key, { from: `10.${(client >> 16) & 255}.${(client >> 8) & 255}.${client & 255}` })
    answers[status] = (answers[status] ?? 0) + 1
  }
  return answers
}

t.test('100 rolls after the 25th create: never more than 25 keys plus the one in grace work', async (t) => {
  const sub = await tenants.createSubAccount(agency.id, 'Chain West')
  const issued: string[] = []
  let newest = ''
  for (let i = 0; i < 25; i++) {
    const created = await call(gateway, 'POST', keysOf(sub.id), agencyKey.key, { body: { name: `key ${i}` } })
    t.equal(created.status, 201, `key ${i} created`)
    issued.push(created.json.data.key as string)
    newest = created.json.data.id as string
  }
  const refused = await call(gateway, 'POST', keysOf(sub.id), agencyKey.key, { body: { name: 'one too many' } })
  t.equal(refused.json.message, 'Active API key limit reached for this scope')

  let mostActive = 0
  for (let roll = 0; roll < 100; roll++) {
    const rolled = await call(gateway, 'POST', `${keysOf(sub.id)}/${newest}/roll`, agencyKey.key, { body: { graceSeconds: 3600 } })
    if (rolled.status !== 201) t.fail(`roll ${roll}: ${rolled.status} ${rolled.body}`)
    issued.push(rolled.json.data.key as string)
    newest = rolled.json.data.id as string
    const listed = await call(gateway, 'GET', `${keysOf(sub.id)}?limit=100`, agencyKey.key)
    const active = (listed.json.data as Array<{ status: string }>).filter((key) => key.status === 'active').length
    mostActive = Math.max(mostActive, active)
    // Every few rolls, every key ever issued is tried at the gateway.
    if (roll % 25 === 0 || roll === 99) {
      const ended = issued.length - 26
      t.same(await working(issued), ended === 0 ? { 200: 26 } : { 200: 26, 401: ended }, `after roll ${roll + 1}: 25 keys and one in grace work`)
    }
  }
  t.equal(mostActive, 26, 'the list never showed more than 25 keys and one in grace as active')
  t.equal(issued.length, 125)
  const create = await call(gateway, 'POST', keysOf(sub.id), agencyKey.key, { body: { name: 'still full' } })
  t.equal(create.status, 400, 'and the limit still holds for creation')
})

t.test('a roll carries the allowlist, the rate limit and the expiry policy to the new key', async (t) => {
  const sub = await tenants.createSubAccount(agency.id, 'Chain East')
  const lifetimeMs = 7 * 86_400_000
  const created = await call(gateway, 'POST', keysOf(sub.id), agencyKey.key, {
    body: { name: 'limited', expiresAt: new Date(Date.now() + lifetimeMs).toISOString(), allowedCidrs: ['10.0.0.0/8'] },
  })
  t.equal(created.status, 201)
  const old = created.json.data as { id: string; createdAt: string; expiresAt: string }
  await keys.update(old.id, { actor: 'ctl:ops', rateLimit: { rate: 2, burst: 3 } })
  const rolled = await call(gateway, 'POST', `${keysOf(sub.id)}/${old.id}/roll`, agencyKey.key, { body: { graceSeconds: 0 } })
  t.equal(rolled.status, 201)
  const fresh = rolled.json.data as { key: string; createdAt: string; expiresAt: string; allowedCidrs: string[]; rateLimit: unknown }
  t.same(fresh.allowedCidrs, ['10.0.0.0/8'], 'the allowlist')
  t.same(fresh.rateLimit, { rate: 2, burst: 3 }, 'the rate limit')
  const lifetime = (key: { createdAt: string; expiresAt: string }): number => Date.parse(key.expiresAt) - Date.parse(key.createdAt)
  // The database keeps microseconds, the API milliseconds: each instant may lose one.
  t.ok(Math.abs(lifetime(fresh) - lifetime(old)) <= 2, 'the same lifetime, from the roll')

  t.equal((await call(gateway, 'GET', '/v1/agents', fresh.key, { from: '203.0.113.9' })).status, 403, 'refused outside the allowlist')
  const statuses: number[] = []
  for (let i = 0; i < 8; i++) statuses.push((await call(gateway, 'GET', '/v1/agents', fresh.key, { from: '10.1.2.3' })).status)
  t.equal(statuses[0], 200, 'served inside it')
  t.ok(statuses.includes(429), 'and held to the old key’s rate limit')
})

t.test('the agency sets a default rate limit for a sub-account’s keys: new keys get it, the sub-account shows it', async (t) => {
  const sub = await tenants.createSubAccount(agency.id, 'Chain North')
  const other = await tenants.createSubAccount((await tenants.createAgency('Elsewhere')).id, 'Not ours')
  const path = `/v1/agency/sub-accounts/${sub.id}`
  const set = await call(gateway, 'PATCH', path, agencyKey.key, { body: { keyRateLimit: { rate: 1, burst: 2 } } })
  t.equal(set.status, 200)
  t.match(set.json.data, { id: sub.id, name: 'Chain North', keyRateLimit: { rate: 1, burst: 2 } })
  t.same((await call(gateway, 'GET', path, agencyKey.key)).json.data.keyRateLimit, { rate: 1, burst: 2 }, 'read back')

  const created = await call(gateway, 'POST', keysOf(sub.id), agencyKey.key, { body: { name: 'fresh' } })
  t.equal(created.status, 201)
  t.same(created.json.data.rateLimit, { rate: 1, burst: 2 }, 'a new key gets the default')
  const statuses: number[] = []
  for (let i = 0; i < 6; i++) statuses.push((await call(gateway, 'GET', '/v1/agents', created.json.data.key as string)).status)
  t.equal(statuses[0], 200)
  t.ok(statuses.includes(429), 'and the gateway holds it to that limit')

  for (const [body, what] of [
    [{ keyRateLimit: { rate: 0, burst: 2 } }, 'a rate of 0'],
    [{ keyRateLimit: { rate: 1 } }, 'a rate without a burst'],
    [{ keyRateLimit: 'fast' }, 'not an object'],
    [{}, 'nothing to change'],
  ] as const) {
    const refused = await call(gateway, 'PATCH', path, agencyKey.key, { body })
    t.equal(refused.status, 400, `${what}: 400`)
    t.equal(refused.json.success, false)
  }
  const notOurs = await call(gateway, 'PATCH', `/v1/agency/sub-accounts/${other.id}`, agencyKey.key, { body: { keyRateLimit: { rate: 1, burst: 2 } } })
  t.equal(notOurs.status, 404, 'another agency’s sub-account is not found')

  const cleared = await call(gateway, 'PATCH', path, agencyKey.key, { body: { keyRateLimit: null } })
  t.equal(cleared.json.data.keyRateLimit, null, 'cleared')
  const after = await call(gateway, 'POST', keysOf(sub.id), agencyKey.key, { body: { name: 'after' } })
  t.notOk('rateLimit' in after.json.data, 'new keys get the route’s defaults again')
  t.same((await keys.find(created.json.data.id as string))!.rateLimit, { rate: 1, burst: 2 }, 'and the key made before keeps its limit')
  const { rows } = await stack.db.pool.query<{ actor_kind: string }>(
    `SELECT actor_kind FROM audit_events WHERE type = 'sub-account.updated' AND sub_account_id = $1`,
    [sub.id],
  )
  t.same(rows, [{ actor_kind: 'key' }, { actor_kind: 'key' }], 'each change recorded, by the agency key')
})
