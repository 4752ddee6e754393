/**
 * The permission rule (issue 30) as pure functions, table by table: which
 * method a permission allows on a route that names a resource, where the
 * check stands in the gateway's order (after the key's own limits and the
 * scope), how a routes file names resources (a malformed name stops the map),
 * how a key's list travels in a sealed Redis entry, and the signed header.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import { KeyStateCodec } from '@scoped/shared/key-state'
import type { ActiveKeyState } from '@scoped/shared/key-state'
import { canonicalPermissions, parsePermission, permissionsHeader, permits, routePermission } from '@scoped/shared/permissions'
import { signTenantHeaders, verifyTenantHeaders } from '@scoped/shared/tenant-signature'
import { authorize } from '@scoped/gateway/gate'
import { signedTenant } from '@scoped/gateway/key-policy'
import { refusals } from '@scoped/gateway/outcomes'
import { parseRouteMap } from '@scoped/gateway/route-map'
import type { ScopedRoute } from '@scoped/gateway/route-map'

const contacts = routePermission('contacts')
const METHODS = ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'] as const
const READS = new Set(['GET', 'HEAD', 'OPTIONS'])

t.test('the rule: read for GET, HEAD and OPTIONS, write for the rest, write includes read', async (t) => {
  const rows: Array<[string, readonly string[] | undefined, (method: string) => boolean]> = [
    ['unrestricted', undefined, () => true],
    ['contacts:read', ['contacts:read'], (method) => READS.has(method)],
    ['contacts:write', ['contacts:write'], () => true],
    ['both', ['contacts:read', 'contacts:write'], () => true],
    ['another resource only', ['calls:write'], () => false],
    ['nothing (an empty list)', [], () => false],
    ['a name that only looks alike', ['contact:write', 'contacts-x:write', 'calls:read'], () => false],
  ]
  for (const [label, permissions, allowed] of rows) {
    for (const method of METHODS) t.equal(permits(permissions, contacts, method), allowed(method), `${label}: ${method}`)
  }
  for (const method of METHODS) t.equal(permits([], undefined, method), true, `a route that names no permission: ${method} needs nothing beyond the scope`)
})

t.test('authorize: the permission comes after the key, its limits and the scope, as 403 with the contract’s message', async (t) => {
  const tenant = { scope: 'SUB-ACCOUNT' as const, agencyId: randomUUID(), subAccountId: randomUUID(), keyId: randomUUID() }
  const route = { prefix: '/v1/contacts', scope: 'SUB-ACCOUNT', auth: 'key', permission: contacts } as unknown as ScopedRoute
  const agency = { prefix: '/v1/agency', scope: 'AGENCY', auth: 'key', permission: routePermission('agency') } as unknown as ScopedRoute
  const now = Date.now()
  const reader: ActiveKeyState = { status: 'active', tenant, permissions: ['contacts:read'] }
  t.equal(authorize(route, reader, now, '10.0.0.1', 'GET'), 'valid')
  t.equal(authorize(route, reader, now, '10.0.0.1', 'DELETE'), 'permission-refused')
  t.equal(authorize(undefined, reader, now, '10.0.0.1', 'DELETE'), 'no-route', 'no route: 404 as before')
  t.equal(authorize(agency, reader, now, '10.0.0.1', 'GET'), 'scope-mismatch', 'the scope before the permission')
  t.equal(authorize(route, { ...reader, expiresAt: now }, now, '10.0.0.1', 'DELETE'), 'expired', 'the expiry before')
  t.equal(authorize(route, { ...reader, allowedCidrs: ['10.9.0.0/16'] }, now, '10.0.0.1', 'DELETE'), 'not-allowed-address', 'the allowlist before')
  t.equal(authorize(route, { status: 'revoked' }, now, '10.0.0.1', 'DELETE'), 'revoked')
  t.equal(authorize(route, { status: 'active', tenant }, now, '10.0.0.1', 'DELETE'), 'valid', 'an unrestricted key as today')
  t.same(refusals['permission-refused'], { status: 403, message: 'This API key does not have the permission this request needs' })
  t.equal(refusals['permission-refused'], errorCatalog.permissionRefused)
})

t.test('permission names: parsed strictly, a list has one spelling', async (t) => {
  const rows: Array<[unknown, boolean]> = [
    ['contacts:read', true],
    ['sub-accounts:write', true],
    ['a1:read', true],
    ['contacts:admin', false],
    ['Contacts:read', false],
    ['contacts', false],
    [':read', false],
    ['-x:read', false],
    ['contacts:read:write', false],
    ['con tacts:read', false],
    [7, false],
    [`${'x'.repeat(65)}:read`, false],
  ]
  for (const [value, ok] of rows) t.equal(parsePermission(value) !== undefined, ok, JSON.stringify(value))
  t.same(canonicalPermissions(['contacts:write', 'calls:read', 'contacts:write']), ['calls:read', 'contacts:write'])
  t.equal(permissionsHeader(undefined), '*')
  t.equal(permissionsHeader(['calls:read', 'contacts:write']), 'calls:read,contacts:write')
  t.equal(permissionsHeader([]), '')
})

t.test('the routes file: a route names a resource; a malformed one stops the map with a line that names it', async (t) => {
  const file = (permission: string, auth = 'scope: SUB-ACCOUNT') =>
    `routes:\n  - prefix: /v1/contacts\n    ${auth}\n    upstream: http://127.0.0.1:4002\n    permission: ${permission}\n`
  const map = parseRouteMap(file('contacts'), 'routes.yaml')
  t.same((map.routes[0] as ScopedRoute).permission, contacts)
  const none = parseRouteMap('routes:\n  - prefix: /v1/calls\n    scope: SUB-ACCOUNT\n    upstream: http://127.0.0.1:4002\n', 'routes.yaml')
  t.equal((none.routes[0] as ScopedRoute).permission, undefined, 'no permission: nothing beyond the scope')
  for (const bad of ['Contacts', 'contacts:read', '"con tacts"', '"-x"', '""', '[contacts]', '7']) {
    t.throws(() => parseRouteMap(file(bad), 'routes.yaml'), { message: /^routes\.yaml: route \/v1\/contacts: permission .* must be a resource name/ }, bad)
  }
  t.throws(() => parseRouteMap('routes:\n  - prefix: /console\n    auth: session\n    upstream: http://127.0.0.1:4001\n    permission: console\n', 'r.yaml'), {
    message: /permission is for scoped routes only/,
  })
})

t.test('a sealed Redis entry carries the list, bounded, and an empty list stays restricted', async (t) => {
  const codec = new KeyStateCodec(Buffer.alloc(32, 7))
  const hash = 'a'.repeat(64)
  const tenant = { scope: 'SUB-ACCOUNT' as const, agencyId: randomUUID(), subAccountId: randomUUID(), keyId: randomUUID() }
  const now = Date.now()
  for (const permissions of [undefined, [], ['calls:read', 'contacts:write']]) {
    const state: ActiveKeyState = permissions === undefined ? { status: 'active', tenant } : { status: 'active', tenant, permissions }
    t.same(codec.decodeEntry(hash, codec.encodeEntry(hash, state, now + 1000), now), state, JSON.stringify(permissions))
  }
  const tooMany = Array.from({ length: 65 }, (_, i) => `r${i}:read`)
  t.equal(codec.decodeEntry(hash, codec.encodeEntry(hash, { status: 'active', tenant, permissions: tooMany }, now + 1000), now), undefined, 'too many: absent')
  const odd = codec.encodeEntry(hash, { status: 'active', tenant, permissions: ['contacts:admin'] }, now + 1000)
  t.equal(codec.decodeEntry(hash, odd, now), undefined, 'a name that is not a permission: absent')
})

t.test('x-tenant-key-permissions is signed: changed or removed, the signature fails; without it, as before', async (t) => {
  const secret = Buffer.alloc(32, 3)
  const tenant = { scope: 'SUB-ACCOUNT' as const, agencyId: randomUUID(), subAccountId: randomUUID(), keyId: randomUUID() }
  const request = {
    method: 'GET',
    pathWithQuery: '/v1/calls',
    audience: 'resource-service',
    contentDigest: 'sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:',
    nonce: 'nonce-123456',
  }
  const received = { method: 'GET', pathWithQuery: '/v1/calls', audience: 'resource-service' }
  const now = 1_800_000_000
  const restricted = signedTenant({ status: 'active', tenant, permissions: ['calls:read'] })
  const headers = signTenantHeaders(secret, request, restricted, now)
  t.equal(headers['x-tenant-key-permissions'], 'calls:read')
  const verified = verifyTenantHeaders(headers, received, [secret], now)
  t.ok(verified.ok && verified.tenant.permissions === 'calls:read', 'the backend reads the list')
  t.same(verifyTenantHeaders({ ...headers, 'x-tenant-key-permissions': '*' }, received, [secret], now), { ok: false, reason: 'bad-signature' }, 'widened')
  const without = { ...headers }
  delete without['x-tenant-key-permissions']
  t.same(verifyTenantHeaders(without, received, [secret], now), { ok: false, reason: 'bad-signature' }, 'removed')
  t.same(verifyTenantHeaders({ ...headers, 'x-tenant-key-permissions': 'calls:admin' }, received, [secret], now), { ok: false, reason: 'malformed' })
  const unrestricted = signTenantHeaders(secret, request, signedTenant({ status: 'active', tenant }), now)
  t.equal(unrestricted['x-tenant-key-permissions'], '*')
  const old = signTenantHeaders(secret, request, tenant, now)
  t.equal(old['x-tenant-key-permissions'], undefined)
  const oldVerified = verifyTenantHeaders(old, received, [secret], now)
  t.ok(oldVerified.ok && oldVerified.tenant.permissions === undefined, 'signed without it (an older gateway): verifies as before')
})
