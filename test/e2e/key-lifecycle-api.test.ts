/**
 * The agency API for its sub-accounts' keys and its audit trail, through the
 * whole stack as processes: two gateway replicas over HTTPS in front of
 * agency-service and resource-service, sharing one Postgres and one Redis.
 * The gateways trust 127.0.0.1 as a proxy, so each request names its client
 * address in X-Forwarded-For: allowlists are tested with IPv4 and IPv6
 * clients, and the audit trail records the address the gateway derived.
 */
import t from 'tap'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import type { HttpsClient, HttpsResponse } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { startStack } from '../helpers/stack.js'

const KEY_ITEM_FIELDS = [
  'allowedCidrs',
  'createdAt',
  'expiresAt',
  'id',
  'lastUsedAt',
  'lastUsedIp',
  'name',
  'permissions',
  'replacedBy',
  'revokedAt',
  'scope',
  'status',
]
const AUDIT_ITEM_FIELDS = ['actor', 'at', 'clientAddress', 'id', 'keyId', 'subAccountId', 'type']
const REVOKED = { success: false, message: 'Invalid or revoked API key' }
const NOT_FROM_HERE = { success: false, message: 'This API key cannot be used from this address' }

const stack = await startStack(t, { replicas: 2, gatewayEnv: { GATEWAY_TRUSTED_PROXIES: '127.0.0.1' } })
const [one, two] = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert, { openapi: true })) as [HttpsClient, HttpsClient]
const replicas = [one, two]
const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
const tenants = new TenantStore(stack.db.pool)
const acme = await tenants.createAgency('Acme')
const globex = await tenants.createAgency('Globex')
const west = await tenants.createSubAccount(acme.id, 'Acme West')
const east = await tenants.createSubAccount(acme.id, 'Acme East')
const north = await tenants.createSubAccount(globex.id, 'Globex North')
// Agency keys are made in the console (owners and admins) or by the operator, never through the API.
const acmeKey = await keys.create({ scope: 'AGENCY', agencyId: acme.id }, 'acme automation', 'ctl:ops')
const globexKey = await keys.create({ scope: 'AGENCY', agencyId: globex.id }, 'globex automation', 'ctl:ops')

function call(
  client: HttpsClient,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  path: string,
  key: string,
  options: { body?: unknown; from?: string } = {},
): Promise<HttpsResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` }
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  if (options.from !== undefined) headers['x-forwarded-for'] = options.from
  return client.request(path, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) })
}

const keysOf = (subAccountId: string) => `/v1/agency/sub-accounts/${subAccountId}/keys`

async function onBoth(path: string, key: string, from?: string): Promise<HttpsResponse[]> {
  return Promise.all(replicas.map((client) => call(client, 'GET', path, key, from === undefined ? {} : { from })))
}

t.test('create with an allowlist and an expiry; the key works from inside it and gets 403 from outside, on both replicas', async (t) => {
  const expiresAt = new Date(Date.now() + 86_400_000).toISOString()
  const created = await call(one, 'POST', keysOf(west.id), acmeKey.key, {
    body: { name: 'crm import', expiresAt, allowedCidrs: ['10.0.0.0/8', '2001:DB8::/32'] },
    from: '203.0.113.50',
  })
  t.equal(created.status, 201)
  t.same(Object.keys(created.json.data).sort(), [...KEY_ITEM_FIELDS, 'key'].sort(), 'the key item plus the plaintext')
  t.match(created.json.data, {
    name: 'crm import',
    scope: 'SUB-ACCOUNT',
    status: 'active',
    lastUsedAt: null,
    lastUsedIp: null,
    revokedAt: null,
    expiresAt,
    replacedBy: null,
    allowedCidrs: ['10.0.0.0/8', '2001:db8::/32'],
    key: /^sak_live_[0-9A-Za-z]{49}$/,
  })
  const key = created.json.data.key as string
  const id = created.json.data.id as string

  for (const from of ['10.1.2.3', '2001:db8::9']) {
    for (const response of await onBoth('/v1/agents', key, from)) t.equal(response.status, 200, `from ${from}: 200`)
  }
  for (const from of ['192.0.2.1', '2001:db9::9', '11.0.0.1']) {
    for (const response of await onBoth('/v1/agents', key, from)) {
      t.equal(response.status, 403, `from ${from}: 403`)
      t.same(response.json, NOT_FROM_HERE)
    }
  }
  t.equal((await call(one, 'GET', '/v1/agents', key)).status, 403, 'from the gateway’s own peer (127.0.0.1), outside the list')
  t.same((await call(one, 'GET', '/v1/nowhere', key, { from: '192.0.2.1' })).json, NOT_FROM_HERE, 'refused before any route is matched')
  t.equal((await call(one, 'GET', '/v1/nowhere', key, { from: '10.1.2.3' })).status, 404, '(control) from inside, the unknown route is a 404')

  const listed = await call(two, 'GET', keysOf(west.id), acmeKey.key)
  t.equal(listed.status, 200)
  t.match(listed.json, { success: true, pagination: { limit: 20, nextCursor: null, hasMore: false } })
  t.same(
    listed.json.data.map((item: { id: string }) => item.id),
    [id],
  )
  t.same(Object.keys(listed.json.data[0]).sort(), KEY_ITEM_FIELDS, 'never a plaintext or a hash')
  t.notOk(listed.text.includes(key))

  await t.test('the allowlist changed through the API applies to the very next request on both replicas', async (t) => {
    const patched = await call(one, 'PATCH', `${keysOf(west.id)}/${id}`, acmeKey.key, { body: { allowedCidrs: ['192.0.2.0/24'] } })
    t.equal(patched.status, 200)
    t.same(patched.json.data.allowedCidrs, ['192.0.2.0/24'])
    for (const response of await onBoth('/v1/agents', key, '192.0.2.1')) t.equal(response.status, 200, 'the new range: 200')
    for (const response of await onBoth('/v1/agents', key, '10.1.2.3')) t.same(response.json, NOT_FROM_HERE, 'the old range: 403')
  })

  await t.test('the list shows the last use and where it came from (batched, within seconds)', async (t) => {
    let item: Record<string, unknown> = {}
    for (let i = 0; i < 40 && item['lastUsedIp'] !== '192.0.2.1'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      item = (await call(one, 'GET', `${keysOf(west.id)}/${id}`, acmeKey.key)).json.data
    }
    t.equal(item['lastUsedIp'], '192.0.2.1', 'the address of the latest use the key was allowed')
    t.type(item['lastUsedAt'], 'string')
  })
})

t.test('roll, revoke and delete through the API take effect at once on both replicas', async (t) => {
  const created = await call(one, 'POST', keysOf(west.id), acmeKey.key, { body: { name: 'rotating' } })
  const old = created.json.data as { id: string; key: string }
  for (const response of await onBoth('/v1/agents', old.key)) t.equal(response.status, 200, 'warm on both replicas')

  const rolled = await call(two, 'POST', `${keysOf(west.id)}/${old.id}/roll`, acmeKey.key)
  t.equal(rolled.status, 201, 'a roll without a body: no grace period')
  t.same(Object.keys(rolled.json.data).sort(), [...KEY_ITEM_FIELDS, 'key'].sort())
  t.match(rolled.json.data, { name: 'rotating', scope: 'SUB-ACCOUNT', status: 'active', replacedBy: null, expiresAt: null })
  for (const response of await onBoth('/v1/agents', old.key)) t.same(response.json, REVOKED, 'the old key: 401 on the very next request')
  for (const response of await onBoth('/v1/agents', rolled.json.data.key)) t.equal(response.status, 200, 'the new key works')
  const oldItem = (await call(one, 'GET', `${keysOf(west.id)}/${old.id}`, acmeKey.key)).json.data
  t.match(oldItem, { status: 'expired', replacedBy: rolled.json.data.id }, 'the old key is expired, and names its replacement')
  const again = await call(one, 'POST', `${keysOf(west.id)}/${old.id}/roll`, acmeKey.key, { body: { graceSeconds: 60 } })
  t.same(again.json, { success: false, message: 'This key was already rolled; roll the key that replaced it instead' })
  t.equal(again.status, 400)

  const graced = await call(one, 'POST', `${keysOf(west.id)}/${rolled.json.data.id}/roll`, acmeKey.key, { body: { graceSeconds: 3600 } })
  t.equal(graced.status, 201)
  for (const response of await onBoth('/v1/agents', rolled.json.data.key)) t.equal(response.status, 200, 'in its grace period the rolled key keeps working')
  const gracedOld = (await call(one, 'GET', `${keysOf(west.id)}/${rolled.json.data.id}`, acmeKey.key)).json.data
  t.match(gracedOld, { status: 'active', replacedBy: graced.json.data.id })
  t.ok(Math.abs(Date.parse(gracedOld.expiresAt) - (Date.now() + 3_600_000)) < 60_000, 'until the end of its grace period')

  const revoked = await call(two, 'POST', `${keysOf(west.id)}/${graced.json.data.id}/revoke`, acmeKey.key)
  t.equal(revoked.status, 200)
  t.same(Object.keys(revoked.json.data).sort(), KEY_ITEM_FIELDS)
  t.match(revoked.json.data, { id: graced.json.data.id, status: 'revoked', revokedAt: String })
  for (const response of await onBoth('/v1/agents', graced.json.data.key)) t.same(response.json, REVOKED)

  const deleted = await call(one, 'DELETE', `${keysOf(west.id)}/${rolled.json.data.id}`, acmeKey.key)
  t.equal(deleted.status, 204)
  t.equal(deleted.text, '')
  for (const response of await onBoth('/v1/agents', rolled.json.data.key)) t.same(response.json, REVOKED, 'deleted in its grace period: 401 at once')
  t.equal((await call(one, 'GET', `${keysOf(west.id)}/${rolled.json.data.id}`, acmeKey.key)).status, 404)
})

t.test('only the agency’s own sub-accounts and keys: another’s are answered like ones that do not exist', async (t) => {
  const eastKey = (await call(one, 'POST', keysOf(east.id), acmeKey.key, { body: { name: 'east' } })).json.data as { id: string; key: string }
  const notSub = { success: false, message: 'Sub-account not found' }
  const notKey = { success: false, message: 'API key not found' }
  const rows: Array<[string, 'GET' | 'POST' | 'PATCH' | 'DELETE', string, unknown, object]> = [
    ['another agency’s sub-account: list', 'GET', keysOf(west.id), undefined, notSub],
    ['another agency’s sub-account: create', 'POST', keysOf(west.id), { name: 'x' }, notSub],
    ['another agency’s sub-account: roll', 'POST', `${keysOf(east.id)}/${eastKey.id}/roll`, {}, notSub],
    ['another agency’s sub-account: revoke', 'POST', `${keysOf(east.id)}/${eastKey.id}/revoke`, undefined, notSub],
    ['another agency’s sub-account: delete', 'DELETE', `${keysOf(east.id)}/${eastKey.id}`, undefined, notSub],
    ['a sub-account that does not exist', 'GET', keysOf('00000000-0000-4000-8000-000000000000'), undefined, notSub],
    ['not a UUID', 'GET', keysOf('west'), undefined, notSub],
  ]
  for (const [name, method, path, body, json] of rows) {
    const response = await call(one, method, path, globexKey.key, body === undefined ? {} : { body })
    t.equal(response.status, 404, name)
    t.same(response.json, json, name)
  }
  const wrongPath = await call(one, 'POST', `${keysOf(west.id)}/${eastKey.id}/revoke`, acmeKey.key)
  t.same([wrongPath.status, wrongPath.json], [404, notKey], 'a key of a sibling sub-account under the wrong path')
  const ownNorth = await call(one, 'GET', keysOf(north.id), globexKey.key)
  t.equal(ownNorth.status, 200, '(control) Globex lists its own')
  t.equal((await call(one, 'GET', '/v1/agents', eastKey.key)).status, 200, 'the East key is untouched')

  const subKeyOnAgency = await call(one, 'GET', keysOf(east.id), eastKey.key)
  t.equal(subKeyOnAgency.status, 403, 'a sub-account key cannot manage keys: AGENCY scope')
  t.equal((await call(one, 'POST', '/v1/agency/keys', acmeKey.key, { body: { name: 'agency-level' } })).status, 404, 'no route mints an agency key')
})

t.test('the same rules, limit and messages as the console', async (t) => {
  const bad: Array<[string, string, unknown, string | RegExp]> = [
    ['an unknown field', keysOf(east.id), { name: 'x', scope: 'AGENCY' }, 'body.scope is not allowed'],
    ['no name', keysOf(east.id), { expiresAt: null }, 'body.name is required'],
    ['a blank name', keysOf(east.id), { name: '   ' }, 'body.name must be 1 to 100 printable characters'],
    ['an expiry without an offset', keysOf(east.id), { name: 'x', expiresAt: '2031-01-01T00:00:00' }, /^body\.expiresAt must be an ISO 8601 date and time/],
    ['an expiry in the past', keysOf(east.id), { name: 'x', expiresAt: '2020-01-01T00:00:00Z' }, 'body.expiresAt must be in the future'],
    ['an expiry as a number', keysOf(east.id), { name: 'x', expiresAt: 1893456000 }, /body\.expiresAt must be string,null/],
    [
      'an allowlist entry with host bits',
      keysOf(east.id),
      { name: 'x', allowedCidrs: ['10.1.0.0/8'] },
      'body.allowedCidrs[0] "10.1.0.0/8" has bits set after its prefix length; the block is 10.0.0.0/8',
    ],
    [
      'an allowlist entry that is not an address',
      keysOf(east.id),
      { name: 'x', allowedCidrs: ['office'] },
      'body.allowedCidrs[0] "office" is not an IP address or CIDR block',
    ],
    ['an allowlist as a string', keysOf(east.id), { name: 'x', allowedCidrs: '10.0.0.0/8' }, 'body.allowedCidrs must be array'],
  ]
  for (const [name, path, body, message] of bad) {
    const response = await call(one, 'POST', path, acmeKey.key, { body })
    t.equal(response.status, 400, name)
    t.match(response.json, { success: false, message }, name)
  }
  const victim = (await call(one, 'POST', keysOf(east.id), acmeKey.key, { body: { name: 'victim' } })).json.data as { id: string }
  for (const [graceSeconds, message] of [
    [2_592_001, 'body.graceSeconds must be <= 2592000'],
    [-1, 'body.graceSeconds must be >= 0'],
    ['60', 'body.graceSeconds must be integer'],
    [1.5, 'body.graceSeconds must be integer'],
  ] as const) {
    const response = await call(one, 'POST', `${keysOf(east.id)}/${victim.id}/roll`, acmeKey.key, { body: { graceSeconds } })
    t.same([response.status, response.json], [400, { success: false, message }], `graceSeconds ${graceSeconds}`)
  }
  const extra = await call(one, 'POST', `${keysOf(east.id)}/${victim.id}/revoke`, acmeKey.key, { body: { reason: 'x' } })
  t.same([extra.status, extra.json], [400, { success: false, message: 'body.reason is not allowed' }])
  const patchBad = await call(one, 'PATCH', `${keysOf(east.id)}/${victim.id}`, acmeKey.key, { body: {} })
  t.same(
    [patchBad.status, patchBad.json],
    [400, { success: false, message: 'Nothing to change' }],
    'a PATCH names at least one of name, permissions, allowedCidrs',
  )

  const sub = (await call(one, 'POST', '/v1/agency/sub-accounts', acmeKey.key, { body: { name: 'Full' } })).json.data as { id: string }
  const ids: string[] = []
  for (let i = 0; i < 25; i++) ids.push((await call(one, 'POST', keysOf(sub.id), acmeKey.key, { body: { name: `key ${i}` } })).json.data.id)
  const over = await call(one, 'POST', keysOf(sub.id), acmeKey.key, { body: { name: 'one too many' } })
  t.same([over.status, over.json], [400, { success: false, message: 'Active API key limit reached for this scope' }])
  const rolled = await call(one, 'POST', `${keysOf(sub.id)}/${ids[0]}/roll`, acmeKey.key, { body: { graceSeconds: 86_400 } })
  t.equal(rolled.status, 201, 'a roll at the limit succeeds')
  const stillOver = await call(one, 'POST', keysOf(sub.id), acmeKey.key, { body: { name: 'still too many' } })
  t.equal(stillOver.status, 400, 'the replacement took the rolled key’s place')
  const page = await call(one, 'GET', `${keysOf(sub.id)}?limit=10`, acmeKey.key)
  t.match(page.json, { pagination: { limit: 10, hasMore: true, nextCursor: String } })
  const rest = await call(one, 'GET', `${keysOf(sub.id)}?limit=100&cursor=${page.json.pagination.nextCursor}`, acmeKey.key)
  t.equal(page.json.data.length + rest.json.data.length, 26, 'the list pages like every list')
  t.equal((await call(one, 'GET', `${keysOf(sub.id)}?limit=0`, acmeKey.key)).status, 400)
})

t.test('the audit trail: the agency’s own and its sub-accounts’, newest first, filtered, paged; another agency sees none of it', async (t) => {
  const sub = await call(one, 'POST', '/v1/agency/sub-accounts', acmeKey.key, { body: { name: 'Audited' }, from: '2001:db8::5' })
  const subId = sub.json.data.id as string
  const created = await call(two, 'POST', keysOf(subId), acmeKey.key, { body: { name: 'audited' }, from: '198.51.100.23' })
  const keyId = created.json.data.id as string
  await call(one, 'POST', `${keysOf(subId)}/${keyId}/roll`, acmeKey.key, { body: { graceSeconds: 60 }, from: '198.51.100.23' })
  await call(one, 'PATCH', `${keysOf(subId)}/${keyId}`, acmeKey.key, { body: { allowedCidrs: ['10.0.0.0/8'] }, from: '198.51.100.23' })
  await call(one, 'POST', `${keysOf(subId)}/${keyId}/revoke`, acmeKey.key, { from: '198.51.100.23' })
  await call(one, 'DELETE', `${keysOf(subId)}/${keyId}`, acmeKey.key, { from: '198.51.100.23' })
  const deleted = await call(one, 'DELETE', `/v1/agency/sub-accounts/${subId}`, acmeKey.key, { from: '2001:db8::5' })
  t.equal(deleted.status, 204)

  const trail = await call(two, 'GET', `/v1/agency/audit-events?subAccountId=${subId}`, acmeKey.key)
  t.equal(trail.status, 200)
  t.match(trail.json, { success: true, pagination: { limit: 20, nextCursor: null, hasMore: false } })
  for (const item of trail.json.data) t.same(Object.keys(item).sort(), AUDIT_ITEM_FIELDS, 'exactly the contract’s fields')
  const actor = { kind: 'key', id: acmeKey.id }
  const newKeyId = trail.json.data.find((item: { type: string; keyId: string }) => item.type === 'key.created' && item.keyId !== keyId).keyId
  t.same(
    trail.json.data.map((item: Record<string, unknown>) => [item['type'], item['keyId'], item['subAccountId'], item['actor'], item['clientAddress']]),
    [
      ['sub-account.deleted', null, subId, actor, '2001:db8::5'],
      ['key.deleted', newKeyId, subId, actor, '2001:db8::5'],
      ['key.deleted', keyId, subId, actor, '198.51.100.23'],
      ['key.revoked', keyId, subId, actor, '198.51.100.23'],
      ['key.updated', keyId, subId, actor, '198.51.100.23'],
      ['key.rolled', keyId, subId, actor, '198.51.100.23'],
      ['key.created', newKeyId, subId, actor, '198.51.100.23'],
      ['key.created', keyId, subId, actor, '198.51.100.23'],
      ['sub-account.created', null, subId, actor, '2001:db8::5'],
    ],
    'newest first, each with who did it and the client address the gateway derived',
  )
  const times = trail.json.data.map((item: { at: string }) => item.at)
  t.same(times, [...times].sort().reverse())

  const byType = await call(one, 'GET', `/v1/agency/audit-events?type=key.rolled&subAccountId=${subId}`, acmeKey.key)
  t.same(
    byType.json.data.map((item: { keyId: string }) => item.keyId),
    [keyId],
  )
  const byKey = await call(one, 'GET', `/v1/agency/audit-events?keyId=${keyId}`, acmeKey.key)
  t.same(
    byKey.json.data.map((item: { type: string }) => item.type),
    ['key.deleted', 'key.revoked', 'key.updated', 'key.rolled', 'key.created'],
  )
  const middle = times[4] as string
  const since = await call(one, 'GET', `/v1/agency/audit-events?subAccountId=${subId}&since=${encodeURIComponent(middle)}`, acmeKey.key)
  const until = await call(one, 'GET', `/v1/agency/audit-events?subAccountId=${subId}&until=${encodeURIComponent(middle)}`, acmeKey.key)
  t.equal(since.json.data.length + until.json.data.length, 9, 'since inclusive, until exclusive')
  t.equal(since.json.data.at(-1).at, middle)

  const all: string[] = []
  let cursor: string | null = null
  do {
    const page: HttpsResponse = await call(one, 'GET', `/v1/agency/audit-events?limit=7${cursor === null ? '' : `&cursor=${cursor}`}`, acmeKey.key)
    t.equal(page.status, 200)
    all.push(...page.json.data.map((item: { id: string }) => item.id))
    cursor = page.json.pagination.nextCursor
  } while (cursor !== null)
  t.equal(new Set(all).size, all.length, 'paging never repeats an event')
  t.ok(all.length > 9, 'the agency’s whole trail, its other sub-accounts’ events too')

  const theirs = await call(one, 'GET', `/v1/agency/audit-events?subAccountId=${subId}`, globexKey.key)
  t.same(theirs.json.data, [], 'another agency sees nothing of it, even asking by id')
  const globexAll = await call(one, 'GET', '/v1/agency/audit-events?limit=100', globexKey.key)
  t.ok(
    globexAll.json.data.every((item: { subAccountId: string | null }) => item.subAccountId === null || item.subAccountId === north.id),
    'Globex’s trail holds Globex’s events only',
  )
  for (const [query, message] of [
    ['type=key.exploded', /^querystring\.type must be equal to one of the allowed values/],
    ['keyId=abc', 'querystring.keyId must be a UUID'],
    ['since=yesterday', /^querystring\.since must be an ISO 8601 date and time/],
    [
      `since=${encodeURIComponent('2030-01-02T00:00:00Z')}&until=${encodeURIComponent('2030-01-01T00:00:00Z')}`,
      'querystring.since must be before querystring.until',
    ],
    ['colour=red', 'querystring.colour is not allowed'],
    ['cursor=nonsense', 'querystring.cursor is not a valid cursor'],
  ] as const) {
    const response = await call(one, 'GET', `/v1/agency/audit-events?${query}`, acmeKey.key)
    t.equal(response.status, 400, query)
    t.match(response.json, { success: false, message }, query)
  }
  const subKey = (await call(one, 'POST', keysOf(east.id), acmeKey.key, { body: { name: 'reader?' } })).json.data.key as string
  t.equal((await call(one, 'GET', '/v1/agency/audit-events', subKey)).status, 403, 'AGENCY scope only')
})
