/**
 * resource-service trusts only the gateway: every request reached directly,
 * without a valid signature of its own method, path, body, tenant, nonce and
 * audience (resource-service) within the replay window, or a second time,
 * gets 401 in the envelope and touches nothing.
 */
import t from 'tap'
import { AGENCY_SERVICE_AUDIENCE, CONTENT_DIGEST_HEADER, contentDigest, RESOURCE_SERVICE_AUDIENCE, tenantHeaders } from '@scoped/shared/tenant-signature'
import { agencyTenant, newNonce, request } from '../helpers/signed-request.js'
import type { SigningOptions } from '../helpers/signed-request.js'
import { newSecret, startResourceService } from './fixture.js'

const refused = { success: false, message: 'Request was not signed by the gateway' }

t.test('requests without a valid gateway signature are refused with 401', async (t) => {
  let clock = Math.floor(Date.now() / 1000)
  const service = await startResourceService(t, { now: () => new Date(clock * 1000) })
  const { baseUrl, secret, alice } = service
  const tenant = alice.tenant
  const signing = (extra: Partial<SigningOptions> = {}): SigningOptions => ({ secret, tenant, timestamp: clock, audience: RESOURCE_SERVICE_AUDIENCE, ...extra })
  const agent = (await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing: signing() })).item
  const agentPath = `/v1/agents/${agent['id']}`

  const otherTenant = { ...tenant, subAccountId: service.bob.tenant.subAccountId }

  const cases: Array<[string, string, string, Parameters<typeof request>[3]]> = [
    ['no tenant headers at all', 'GET', '/v1/agents', {}],
    [
      'tenant headers without a signature',
      'GET',
      '/v1/agents',
      {
        headers: {
          [tenantHeaders.scope]: 'SUB-ACCOUNT',
          [tenantHeaders.agencyId]: tenant.agencyId,
          [tenantHeaders.subAccountId]: tenant.subAccountId!,
          [tenantHeaders.keyId]: tenant.keyId,
          [tenantHeaders.timestamp]: String(clock),
        },
      },
    ],
    ['a forged signature', 'GET', '/v1/agents', { signing: signing({ override: { [tenantHeaders.signature]: 'ab'.repeat(32) } }) }],
    ['a signature that is not hex', 'GET', '/v1/agents', { signing: signing({ override: { [tenantHeaders.signature]: 'not-a-signature' } }) }],
    ['a signature under the wrong secret', 'GET', '/v1/agents', { signing: signing({ secret: newSecret() }) }],
    ['a stale timestamp (31 s old)', 'GET', '/v1/agents', { signing: signing({ timestamp: clock - 31 }) }],
    ['a timestamp from the future (31 s ahead)', 'GET', '/v1/agents', { signing: signing({ timestamp: clock + 31 }) }],
    ['a signature for another path', 'GET', agentPath, { signing: signing({ signedPath: '/v1/agents' }) }],
    ['a signature for another query', 'GET', '/v1/agents?limit=5', { signing: signing({ signedPath: '/v1/agents?limit=6' }) }],
    ['a signature without the query', 'GET', '/v1/agents?limit=5', { signing: signing({ signedPath: '/v1/agents' }) }],
    ['a signature for another method', 'DELETE', agentPath, { signing: signing({ signedMethod: 'GET' }) }],
    [
      'a sub-account header changed after signing',
      'GET',
      agentPath,
      { signing: signing({ override: { [tenantHeaders.subAccountId]: otherTenant.subAccountId! } }) },
    ],
    [
      'a scope header changed after signing',
      'GET',
      '/v1/agents',
      {
        signing: signing({
          tenant: agencyTenant(tenant.agencyId),
          override: { [tenantHeaders.scope]: 'SUB-ACCOUNT', [tenantHeaders.subAccountId]: tenant.subAccountId! },
        }),
      },
    ],
    [
      'a timestamp changed after signing',
      'GET',
      '/v1/agents',
      { signing: signing({ timestamp: clock - 100, override: { [tenantHeaders.timestamp]: String(clock) } }) },
    ],
    ['an unknown route without a signature', 'GET', '/v1/nothing-here', {}],
    ['a write without a signature', 'POST', '/v1/agents', { body: { name: 'Mallory' } }],
    ['signed for the other backend (agency-service)', 'GET', '/v1/agents', { signing: signing({ audience: AGENCY_SERVICE_AUDIENCE }) }],
    [
      'signed for the other backend, audience header rewritten',
      'GET',
      '/v1/agents',
      { signing: signing({ audience: AGENCY_SERVICE_AUDIENCE, override: { [tenantHeaders.audience]: RESOURCE_SERVICE_AUDIENCE } }) },
    ],
    [
      'a re-bodied POST (signed for another body)',
      'POST',
      '/v1/agents',
      { body: { name: 'Mallory' }, signing: signing({ contentDigest: contentDigest(JSON.stringify({ name: 'Ada' })) }) },
    ],
    [
      'a re-bodied PATCH, digest header rewritten to the new body',
      'PATCH',
      agentPath,
      {
        body: { name: 'Mallory' },
        signing: signing({
          contentDigest: contentDigest(JSON.stringify({ name: 'Ada' })),
          override: { [CONTENT_DIGEST_HEADER]: contentDigest(JSON.stringify({ name: 'Mallory' })) },
        }),
      },
    ],
    [
      'a POST signed as bodiless, sent with a body',
      'POST',
      '/v1/agents',
      { body: { name: 'Mallory' }, signing: signing({ contentDigest: contentDigest('') }) },
    ],
    ['a GET carrying a non-empty digest', 'GET', '/v1/agents', { signing: signing({ contentDigest: contentDigest('{}') }) }],
    ['a DELETE carrying a non-empty digest', 'DELETE', agentPath, { signing: signing({ contentDigest: contentDigest('{}') }) }],
    ['a nonce changed after signing', 'GET', '/v1/agents', { signing: signing({ override: { [tenantHeaders.nonce]: newNonce() } }) }],
    ...[
      tenantHeaders.signature,
      tenantHeaders.timestamp,
      tenantHeaders.scope,
      tenantHeaders.agencyId,
      tenantHeaders.subAccountId,
      tenantHeaders.keyId,
      tenantHeaders.audience,
      tenantHeaders.nonce,
      CONTENT_DIGEST_HEADER,
    ].map((header): [string, string, string, Parameters<typeof request>[3]] => [
      `missing ${header}`,
      'DELETE',
      agentPath,
      { signing: signing({ omit: [header] }) },
    ]),
  ]
  for (const [name, method, path, options] of cases) {
    const response = await request(baseUrl, method, path, options)
    t.equal(response.status, 401, name)
    t.same(response.json, refused, name)
    t.match(response.headers.get('content-type'), /^application\/json/, name)
  }

  const after = await request(baseUrl, 'GET', '/v1/agents', { signing: signing() })
  t.same(after.items, [agent], 'nothing was created, changed or deleted by the refused requests')

  clock += 1000
  t.equal(
    (await request(baseUrl, 'GET', '/v1/agents', { signing: signing({ timestamp: clock - 1000 }) })).status,
    401,
    'a captured request cannot be replayed later',
  )
  t.equal((await request(baseUrl, 'GET', '/v1/agents', { signing: signing({ timestamp: clock - 30 }) })).status, 200, 'inside the window (30 s) is accepted')
  t.equal((await request(baseUrl, 'GET', '/v1/agents', { signing: signing({ timestamp: clock + 30 }) })).status, 200, 'so is 30 s of clock skew ahead')
})

t.test('the previous secret is accepted during a rotation', async (t) => {
  const { baseUrl, previousSecret, alice } = await startResourceService(t)
  const response = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing: { secret: previousSecret, tenant: alice.tenant } })
  t.equal(response.status, 201)
  t.equal((await alice.get('/v1/agents')).items.length, 1)
})

t.test('an AGENCY tenant is refused with 403 on sub-account resources', async (t) => {
  const { baseUrl, secret, alice } = await startResourceService(t)
  for (const [method, path] of [
    ['GET', '/v1/agents'],
    ['POST', '/v1/contacts'],
    ['GET', '/v1/calls/00000000-0000-4000-8000-000000000000'],
  ] as const) {
    const response = await request(baseUrl, method, path, {
      body: method === 'POST' ? { name: 'x' } : undefined,
      signing: { secret, tenant: agencyTenant(alice.tenant.agencyId), audience: RESOURCE_SERVICE_AUDIENCE },
    })
    t.equal(response.status, 403, `${method} ${path}`)
    t.same(response.json, { success: false, message: 'This API key does not have access to this resource' })
  }
  t.equal((await alice.get('/v1/contacts')).items.length, 0, 'nothing was created')
})

t.test('tenant identifiers in the query or body are never taken', async (t) => {
  const { alice, bob } = await startResourceService(t)
  const bobs = (await bob.post('/v1/agents', { name: 'Bob agent' })).item
  const query = await alice.get(`/v1/agents?sub_account_id=${bob.tenant.subAccountId}`)
  t.equal(query.status, 400)
  t.same(query.json, { success: false, message: 'querystring.sub_account_id is not allowed' })
  const body = await alice.post('/v1/agents', { name: 'x', sub_account_id: bob.tenant.subAccountId })
  t.equal(body.status, 400)
  t.same(body.json, { success: false, message: 'body.sub_account_id is not allowed' })
  const agencyBody = await alice.post('/v1/agents', { name: 'x', agency_id: bob.tenant.agencyId })
  t.equal(agencyBody.status, 400)
  t.same(agencyBody.json, { success: false, message: 'body.agency_id is not allowed' })
  t.same((await bob.get('/v1/agents')).items, [bobs], "bob's list is unchanged")
  t.same((await alice.get('/v1/agents')).items, [], 'alice has nothing')
})

t.test('a signed request is accepted once: the same headers again are refused', async (t) => {
  const { baseUrl, secret, alice } = await startResourceService(t)
  const signing: SigningOptions = { secret, tenant: alice.tenant, nonce: newNonce(), timestamp: Math.floor(Date.now() / 1000) }
  const created = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'Ada' }, signing })
  t.equal(created.status, 201)
  for (const [name, method, path, body] of [
    ['the same POST again', 'POST', '/v1/agents', { name: 'Ada' }],
    ['the nonce on another request', 'GET', '/v1/agents', undefined],
  ] as const) {
    const replayed = await request(baseUrl, method, path, { body, signing })
    t.equal(replayed.status, 401, name)
    t.same(replayed.json, refused, name)
  }
  t.same((await alice.get('/v1/agents')).items, [created.item], 'one agent, not two')
})

t.test('a signed body is what is stored; a re-bodied PATCH changes nothing', async (t) => {
  const { baseUrl, secret, alice } = await startResourceService(t)
  const contact = (await alice.post('/v1/contacts', { name: 'Ada', email: 'ada@example.test' })).item
  const path = `/v1/contacts/${contact['id']}`
  const signed = { name: 'Ada Lovelace' }
  const sent = { name: 'Mallory', email: 'mallory@example.test' }
  const refusedPatch = await request(baseUrl, 'PATCH', path, {
    body: sent,
    signing: { secret, tenant: alice.tenant, contentDigest: contentDigest(JSON.stringify(signed)) },
  })
  t.equal(refusedPatch.status, 401)
  t.same((await alice.get(path)).item, contact, 'the row is as it was')
  const patched = await request(baseUrl, 'PATCH', path, { body: signed, signing: { secret, tenant: alice.tenant } })
  t.equal(patched.status, 200)
  t.equal((await alice.get(path)).item['name'], 'Ada Lovelace', 'the signed body was applied')
})
