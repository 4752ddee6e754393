import t from 'tap'
import { randomUUID } from 'node:crypto'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { signTenantHeaders, verifyTenantHeaders } from '@scoped/shared/tenant-signature'
import { TenantSigner } from '@scoped/gateway/tenant-signer'

const secret = 'k'.repeat(40)
const tenant: Tenant = { scope: 'SUB-ACCOUNT', agencyId: randomUUID(), subAccountId: randomUUID(), keyId: randomUUID() }
const other: Tenant = { scope: 'AGENCY', agencyId: tenant.agencyId, subAccountId: null, keyId: randomUUID() }
const at = 1_795_000_000_250

t.test('the headers are exactly what signTenantHeaders makes, and verify', async (t) => {
  const signer = new TenantSigner(secret)
  const headers = signer.sign('GET', '/v1/agents?limit=5', tenant, at)
  t.same(headers, signTenantHeaders(secret, 'GET', '/v1/agents?limit=5', tenant, at / 1000))
  t.same(verifyTenantHeaders(headers, 'GET', '/v1/agents?limit=5', [secret], at / 1000), { ok: true, tenant })
})

t.test('reused within one second for the same key, method and path; never across them', async (t) => {
  const signer = new TenantSigner(secret)
  const first = signer.sign('GET', '/v1/agents', tenant, at)
  t.equal(signer.sign('GET', '/v1/agents', tenant, at + 700), first, 'same second: the same headers')
  t.not(signer.sign('GET', '/v1/agents', tenant, at + 800), undefined)
  const next = signer.sign('GET', '/v1/agents', tenant, at + 1_000)
  t.not(next, first, 'next second: signed again')
  t.not(next['x-tenant-timestamp'], first['x-tenant-timestamp'])
  for (const [method, path, who] of [
    ['POST', '/v1/agents', tenant],
    ['GET', '/v1/agents/1', tenant],
    ['GET', '/v1/agents?limit=5', tenant],
    ['GET', '/v1/agents', other],
  ] as const) {
    const headers = signer.sign(method, path, who, at + 1_000)
    t.same(verifyTenantHeaders(headers, method, path, [secret], (at + 1_000) / 1000), { ok: true, tenant: who }, `${method} ${path} ${who.scope}`)
  }
})

t.test('the reuse table is bounded', async (t) => {
  const signer = new TenantSigner(secret, 2)
  const a = signer.sign('GET', '/a', tenant, at)
  signer.sign('GET', '/b', tenant, at)
  const c = signer.sign('GET', '/c', tenant, at)
  t.equal(signer.sign('GET', '/a', tenant, at), a, 'kept')
  t.not(signer.sign('GET', '/c', tenant, at), c, 'beyond the bound: signed each time')
  t.same(signer.sign('GET', '/c', tenant, at), c, 'and still the same value')
})
