/**
 * agency-service trusts only the gateway: a request reached directly without
 * a valid signature of its own method, path, body, tenant, nonce and audience
 * (agency-service) within the replay window, or a second time, gets 401 in
 * the envelope and changes nothing.
 */
import t from 'tap'
import { AGENCY_SERVICE_AUDIENCE, CONTENT_DIGEST_HEADER, contentDigest, RESOURCE_SERVICE_AUDIENCE, tenantHeaders } from '@scoped/shared/tenant-signature'
import { newNonce, request, subAccountTenant } from '../helpers/signed-request.js'
import type { SigningOptions } from '../helpers/signed-request.js'
import { newSecret, startAgencyService } from './fixture.js'

const refused = { success: false, message: 'Request was not signed by the gateway' }

t.test('requests without a valid gateway signature are refused with 401', async (t) => {
  const clock = Math.floor(Date.now() / 1000)
  const { baseUrl, secret, acme, globex } = await startAgencyService(t, { now: () => new Date(clock * 1000) })
  const tenant = acme.tenant
  const signing = (extra: Partial<SigningOptions> = {}): SigningOptions => ({ secret, tenant, timestamp: clock, audience: AGENCY_SERVICE_AUDIENCE, ...extra })
  const sub = (await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'West' }, signing: signing() })).item
  const subPath = `/v1/agency/sub-accounts/${sub['id']}`

  const cases: Array<[string, string, string, Parameters<typeof request>[3]]> = [
    ['no tenant headers', 'GET', '/v1/agency', {}],
    ['a forged signature', 'GET', '/v1/agency', { signing: signing({ override: { [tenantHeaders.signature]: '00'.repeat(32) } }) }],
    ['a signature under the wrong secret', 'GET', '/v1/agency', { signing: signing({ secret: newSecret() }) }],
    ['a stale timestamp', 'GET', '/v1/agency', { signing: signing({ timestamp: clock - 31 }) }],
    ['a timestamp too far ahead', 'GET', '/v1/agency', { signing: signing({ timestamp: clock + 31 }) }],
    ['a signature for another path', 'DELETE', subPath, { signing: signing({ signedPath: '/v1/agency/sub-accounts/00000000-0000-4000-8000-000000000000' }) }],
    ['a signature for another method', 'DELETE', subPath, { signing: signing({ signedMethod: 'GET' }) }],
    [
      'another agency put in after signing',
      'GET',
      '/v1/agency/sub-accounts',
      { signing: signing({ override: { [tenantHeaders.agencyId]: globex.tenant.agencyId } }) },
    ],
    ['an unsigned create', 'POST', '/v1/agency/sub-accounts', { body: { name: 'Mallory' } }],
    ['signed for the other backend (resource-service)', 'GET', '/v1/agency', { signing: signing({ audience: RESOURCE_SERVICE_AUDIENCE }) }],
    [
      'a re-bodied create (signed for another body)',
      'POST',
      '/v1/agency/sub-accounts',
      { body: { name: 'Mallory' }, signing: signing({ contentDigest: contentDigest(JSON.stringify({ name: 'West' })) }) },
    ],
    [
      'a re-bodied PATCH',
      'PATCH',
      subPath,
      { body: { name: 'Mallory' }, signing: signing({ contentDigest: contentDigest(JSON.stringify({ name: 'East' })) }) },
    ],
    ['a DELETE carrying a non-empty digest', 'DELETE', subPath, { signing: signing({ contentDigest: contentDigest('{}') }) }],
    ...[tenantHeaders.audience, tenantHeaders.nonce, CONTENT_DIGEST_HEADER].map((header): [string, string, string, Parameters<typeof request>[3]] => [
      `missing ${header}`,
      'DELETE',
      subPath,
      { signing: signing({ omit: [header] }) },
    ]),
  ]
  for (const [name, method, path, options] of cases) {
    const response = await request(baseUrl, method, path, options)
    t.equal(response.status, 401, name)
    t.same(response.json, refused, name)
  }
  t.same((await request(baseUrl, 'GET', '/v1/agency/sub-accounts', { signing: signing() })).items, [sub], 'nothing was created, changed or deleted')
  t.same((await request(baseUrl, 'GET', '/v1/agency/sub-accounts', { signing: signing({ tenant: globex.tenant }) })).items, [])
})

t.test('the previous secret is accepted during a rotation', async (t) => {
  const { baseUrl, previousSecret, acme } = await startAgencyService(t)
  const response = await request(baseUrl, 'GET', '/v1/agency', { signing: { secret: previousSecret, tenant: acme.tenant } })
  t.equal(response.status, 200)
  t.equal(response.item['id'], acme.tenant.agencyId)
})

t.test('a SUB-ACCOUNT tenant is refused with 403 on agency routes', async (t) => {
  const { baseUrl, secret, acme } = await startAgencyService(t)
  const sub = (await acme.post('/v1/agency/sub-accounts', { name: 'West' })).item
  const tenant = subAccountTenant(acme.tenant.agencyId, sub['id']!)
  for (const [method, path] of [
    ['GET', '/v1/agency'],
    ['GET', '/v1/agency/sub-accounts'],
    ['DELETE', `/v1/agency/sub-accounts/${sub['id']}`],
  ]) {
    const response = await request(baseUrl, method!, path!, { signing: { secret, tenant, audience: AGENCY_SERVICE_AUDIENCE } })
    t.equal(response.status, 403, `${method} ${path}`)
    t.same(response.json, { success: false, message: 'This API key does not have access to this resource' })
  }
  t.equal((await acme.get(`/v1/agency/sub-accounts/${sub['id']}`)).status, 200, 'the sub-account was not deleted')
})

t.test('health probes and the console are unsigned; unknown API routes are not', async (t) => {
  const { baseUrl, acme } = await startAgencyService(t)
  t.equal((await fetch(`${baseUrl}/healthz`)).status, 200)
  t.equal((await fetch(`${baseUrl}/readyz`)).status, 200)
  t.equal((await fetch(`${baseUrl}/console/no-such-page`)).status, 404, 'the console authenticates its own sessions')
  const unsigned = await request(baseUrl, 'GET', '/v1/no-such-route')
  t.equal(unsigned.status, 401, 'an unsigned caller learns nothing about which API routes exist')
  const signed = await acme.get('/v1/no-such-route')
  t.equal(signed.status, 404)
  t.same(signed.json, { success: false, message: 'Not found' })
})

t.test('a signed request is accepted once: the same headers again are refused', async (t) => {
  const { baseUrl, secret, acme } = await startAgencyService(t)
  const signing: SigningOptions = { secret, tenant: acme.tenant, nonce: newNonce(), timestamp: Math.floor(Date.now() / 1000) }
  const created = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'West' }, signing })
  t.equal(created.status, 201)
  const replayed = await request(baseUrl, 'POST', '/v1/agency/sub-accounts', { body: { name: 'West' }, signing })
  t.equal(replayed.status, 401)
  t.same(replayed.json, refused)
  t.same((await acme.get('/v1/agency/sub-accounts')).items, [created.item], 'one sub-account, not two')
})
