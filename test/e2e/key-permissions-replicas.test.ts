/**
 * Restricted keys (issue 30) through the whole stack as processes: two
 * gateway replicas over HTTPS, the services, and the operator CLI. A key
 * restricted to some permissions gets exactly the routes and methods they
 * allow on both replicas, for every method class (GET, HEAD, OPTIONS read;
 * POST, PUT, PATCH, DELETE write); a change through `ctl` or the API holds on
 * both replicas when it returns, as a revoke does; a roll carries the
 * permissions over; an unknown name is refused where it is set.
 */
import t from 'tap'
import type { Test } from 'tap'
import type { Dispatcher } from 'undici'
import { errorCatalog } from '@scoped/shared/errors'
import type { HttpsClient, HttpsResponse } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'

const REFUSED = { success: false, message: errorCatalog.permissionRefused.message }

const stack = await startStack(t, 2)
const replicas = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert, { openapi: true })) as [HttpsClient, HttpsClient]
const env = { ...stack.ctlEnv, CTL_ACTOR: 'permissions-test' }

async function ctl(args: string[]): Promise<Record<string, unknown>> {
  const result = await runCtl(args, env)
  if (result.status !== 0) throw new Error(`ctl ${args.join(' ')}: ${result.stderr}`)
  return result.json as Record<string, unknown>
}

const agency = await ctl(['agency', 'create', '--name', 'Permissions'])
const sub = await ctl(['sub-account', 'create', '--agency', String(agency['id']), '--name', 'Permissions West'])
const subId = String(sub['id'])
const agencyKey = String((await ctl(['key', 'create', '--agency', String(agency['id']), '--name', 'operator']))['key'])

function send(client: HttpsClient, key: string, method: Dispatcher.HttpMethod, path: string, body?: unknown): Promise<HttpsResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  return client.request(path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
}

/** The same request on both replicas: the statuses, and whether each was the permission refusal. */
async function onBoth(key: string, method: Dispatcher.HttpMethod, path: string, body?: unknown): Promise<HttpsResponse[]> {
  return Promise.all(replicas.map((client) => send(client, key, method, path, body)))
}

async function expectRefused(t: Test, key: string, method: Dispatcher.HttpMethod, path: string, body?: unknown): Promise<void> {
  for (const [index, response] of (await onBoth(key, method, path, body)).entries()) {
    t.equal(response.status, 403, `replica ${index + 1}: ${method} ${path} refused`)
    if (method !== 'HEAD') t.same(response.json, REFUSED, `replica ${index + 1}: ${method} ${path}: the contract’s message`)
    t.equal(response.headers['ratelimit'], undefined, `replica ${index + 1}: no rate limit was spent`)
  }
}

async function expectAllowed(t: Test, key: string, method: Dispatcher.HttpMethod, path: string, status: number, body?: unknown): Promise<HttpsResponse[]> {
  const responses = await onBoth(key, method, path, body)
  for (const [index, response] of responses.entries()) t.equal(response.status, status, `replica ${index + 1}: ${method} ${path} ${status}`)
  return responses
}

t.test('a restricted key gets exactly what its permissions allow, on both replicas, for every method class', async (t) => {
  const created = await ctl(['key', 'create', '--sub-account', subId, '--name', 'reader', '--permission', 'contacts:write', '--permission', 'calls:read'])
  t.same(created['permissions'], ['calls:read', 'contacts:write'], 'sorted')
  const key = String(created['key'])
  // calls:read: the reading methods only.
  await expectAllowed(t, key, 'GET', '/v1/calls', 200)
  await expectAllowed(t, key, 'HEAD', '/v1/calls', 200)
  for (const response of await onBoth(key, 'OPTIONS', '/v1/calls')) t.not(response.status, 403, 'OPTIONS reads: past the gateway')
  await expectRefused(t, key, 'POST', '/v1/calls', { contactId: '00000000-0000-4000-8000-000000000000' })
  await expectRefused(t, key, 'PATCH', '/v1/calls/00000000-0000-4000-8000-000000000000', {})
  await expectRefused(t, key, 'PUT', '/v1/calls/00000000-0000-4000-8000-000000000000', {})
  await expectRefused(t, key, 'DELETE', '/v1/calls/00000000-0000-4000-8000-000000000000')
  // contacts:write includes read.
  await expectAllowed(t, key, 'GET', '/v1/contacts', 200)
  const [made] = await expectAllowed(t, key, 'POST', '/v1/contacts', 201, { name: 'Ada' })
  const contactId = String(made!.json.data.id)
  await expectAllowed(t, key, 'PATCH', `/v1/contacts/${contactId}`, 200, { name: 'Ada L.' })
  for (const response of await onBoth(key, 'PUT', `/v1/contacts/${contactId}`, { name: 'x' }))
    t.equal(response.status, 405, 'PUT writes: past the gateway, to the service’s 405')
  t.equal((await send(replicas[1], key, 'DELETE', `/v1/contacts/${contactId}`)).status, 204, 'DELETE writes')
  // agents: nothing at all.
  for (const method of ['GET', 'HEAD', 'OPTIONS', 'DELETE'] as const) await expectRefused(t, key, method, '/v1/agents')
  // The scope comes first: an agency route is 403 for the scope, not the permission.
  for (const response of await onBoth(key, 'GET', '/v1/agency')) t.equal(response.json.message, errorCatalog.scopeMismatch.message)
  // An unrestricted key as before.
  const open = String((await ctl(['key', 'create', '--sub-account', subId, '--name', 'open']))['key'])
  await expectAllowed(t, open, 'GET', '/v1/agents', 200)
})

t.test('a restricted agency key: its own resources of the agency scope', async (t) => {
  const created = await ctl(['key', 'create', '--agency', String(agency['id']), '--name', 'auditor', '--permission', 'agency:read'])
  const key = String(created['key'])
  await expectAllowed(t, key, 'GET', '/v1/agency', 200)
  await expectAllowed(t, key, 'GET', '/v1/agency/audit-events', 200)
  await expectRefused(t, key, 'GET', '/v1/agency/sub-accounts')
  await expectRefused(t, key, 'POST', '/v1/agency/sub-accounts', { name: 'nope' })
})

t.test('ctl key update: in force on both replicas when it returns; a roll carries the permissions over', async (t) => {
  const created = await ctl(['key', 'create', '--sub-account', subId, '--name', 'changing', '--permission', 'calls:read'])
  const key = String(created['key'])
  await expectAllowed(t, key, 'GET', '/v1/calls', 200)
  await expectAllowed(t, key, 'GET', '/v1/calls', 200)
  await expectRefused(t, key, 'GET', '/v1/agents')
  t.same(await ctl(['key', 'update', String(created['id']), '--permission', 'agents:read']), { id: created['id'], permissions: ['agents:read'] })
  await expectAllowed(t, key, 'GET', '/v1/agents', 200)
  await expectRefused(t, key, 'GET', '/v1/calls')
  await expectRefused(t, key, 'POST', '/v1/agents', { name: 'x' })

  const rolled = await ctl(['key', 'roll', String(created['id'])])
  const successor = String(rolled['key'])
  await expectAllowed(t, successor, 'GET', '/v1/agents', 200)
  await expectRefused(t, successor, 'GET', '/v1/calls')
  const listed = (await ctl(['key', 'list', '--sub-account', subId])) as unknown as Array<Record<string, unknown>>
  t.same(listed.find((item) => item['id'] === rolled['id'])?.['permissions'], ['agents:read'], 'listed with its permissions')

  t.same(await ctl(['key', 'update', String(rolled['id']), '--unrestricted']), { id: rolled['id'], permissions: null })
  await expectAllowed(t, successor, 'GET', '/v1/calls', 200)
  await expectAllowed(t, successor, 'POST', '/v1/agents', 201, { name: 'Agent' })

  const unknown = await runCtl(['key', 'update', String(rolled['id']), '--permission', 'billing:read'], env)
  t.equal(unknown.status, 1, 'an unknown permission: exit 1')
  t.match(unknown.json, { success: false, message: 'Unknown permission: billing:read' })
  const agencyOnly = await runCtl(['key', 'create', '--sub-account', subId, '--name', 'x', '--permission', 'sub-accounts:read'], env)
  t.match(agencyOnly.json, { success: false, message: 'Unknown permission: sub-accounts:read' }, 'a resource of the other scope is unknown to this one')
})

t.test('the API: create restricted, PATCH the permissions; in force on both replicas when it answers', async (t) => {
  const base = `/v1/agency/sub-accounts/${subId}/keys`
  const created = await send(replicas[0], agencyKey, 'POST', base, { name: 'api made', permissions: ['contacts:read'] })
  t.equal(created.status, 201)
  const item = created.json.data
  t.same(item.permissions, ['contacts:read'])
  await expectAllowed(t, item.key, 'GET', '/v1/contacts', 200)
  await expectRefused(t, item.key, 'POST', '/v1/contacts', { name: 'x' })
  const [patched] = await expectAllowed(t, agencyKey, 'PATCH', `${base}/${item.id}`, 200, {
    permissions: ['contacts:write', 'contacts:write'],
    name: 'renamed',
  })
  t.match(patched!.json.data, { id: item.id, name: 'renamed', permissions: ['contacts:write'] })
  await expectAllowed(t, item.key, 'POST', '/v1/contacts', 201, { name: 'y' })
  for (const response of await onBoth(agencyKey, 'PATCH', `${base}/${item.id}`, { permissions: ['contacts:admin'] })) {
    t.equal(response.status, 400)
    t.same(response.json, { success: false, message: 'Unknown permission: contacts:admin' })
  }
  const list = await send(replicas[0], agencyKey, 'GET', base)
  t.ok(
    list.json.data.every((key: { permissions: unknown }) => key.permissions === null || Array.isArray(key.permissions)),
    'every item carries permissions',
  )
  const unrestricted = await send(replicas[0], agencyKey, 'PATCH', `${base}/${item.id}`, { permissions: null })
  t.equal(unrestricted.json.data.permissions, null)
  await expectAllowed(t, item.key, 'GET', '/v1/agents', 200)
})
